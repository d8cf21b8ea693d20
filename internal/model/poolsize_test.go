package model

import (
	"strings"
	"testing"
)

// TestMultiNodePoolKindsNamesTheRule: the kinds the messages name are the
// kinds CanRun lets multi-node work on, no more and no fewer.
func TestMultiNodePoolKindsNamesTheRule(t *testing.T) {
	gang := Size{Nodes: 2, PerNode: GPUs(4)}
	one := Size{Nodes: 1, PerNode: GPUs(8)}
	for _, k := range PoolKinds {
		named := strings.Contains(", "+strings.ReplaceAll(MultiNodePoolKinds, " or ", ", ")+",", " "+string(k)+",")
		if named != k.CanRun(gang) {
			t.Errorf("kind %s: named %v in %q, CanRun(2x4) %v", k, named, MultiNodePoolKinds, k.CanRun(gang))
		}
		if !k.CanRun(one) {
			t.Errorf("kind %s cannot run one node", k)
		}
	}
}
