package model

import (
	"fmt"
	"strings"
)

// MultiNodePoolKinds names the pool kinds whose environment places a
// multi-node gang itself (PoolKind.MultiNode), for messages.
const MultiNodePoolKinds = "kubernetes, neocloud, slurm, pbs or lsf"

// CanRun reports whether a pool of kind k can run work of size s: work
// across several nodes needs a kind whose own scheduler places all of its
// nodes together; any kind runs work on one node. This is the one rule of
// which pool kinds take which sizes: estate validation asks it of a
// profile's fixed size, enqueue of a size read from a task's parameter,
// and the engine's pass before it places work on a pool, so a size that
// reaches a pool by any path is held to it.
func (k PoolKind) CanRun(s Size) bool { return !s.MultiNode() || k.MultiNode() }

// NoPoolCanRun says that none of a profile's pools (names, with their
// kinds) can run work of size s: "no pool of profile flex can run
// multi-node work (2x4): bare-metal is bare_metal, and multi-node work
// needs a kubernetes, neocloud, slurm, pbs or lsf pool".
func NoPoolCanRun(profile string, s Size, names []string, kinds []PoolKind) string {
	is := make([]string, len(names))
	for i := range names {
		is[i] = fmt.Sprintf("%s is %s", names[i], kinds[i])
	}
	return fmt.Sprintf("no pool of profile %s can run multi-node work (%s): %s, and multi-node work needs a %s pool",
		profile, s, strings.Join(is, ", "), MultiNodePoolKinds)
}
