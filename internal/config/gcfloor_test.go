package config

import (
	"strings"
	"testing"
)

func TestTheCollectorsHeapFloorComesFromTheEnvironment(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for v, want := range map[string]int64{"": 64 << 20, "0": 0, "134217728": 128 << 20} {
		c, err := FromEnv(env(map[string]string{"KLIQUE_GC_HEAP_FLOOR": v}))
		if err != nil {
			t.Fatalf("KLIQUE_GC_HEAP_FLOOR=%q: %v", v, err)
		}
		if c.GCHeapFloor != want {
			t.Errorf("KLIQUE_GC_HEAP_FLOOR=%q read as %d, want %d", v, c.GCHeapFloor, want)
		}
	}
	for _, bad := range []string{"-1", "64MiB", "1.5", "2199023255553"} {
		_, err := FromEnv(env(map[string]string{"KLIQUE_GC_HEAP_FLOOR": bad}))
		if err == nil || !strings.Contains(err.Error(), "KLIQUE_GC_HEAP_FLOOR") || !strings.Contains(err.Error(), "number of bytes") {
			t.Errorf("KLIQUE_GC_HEAP_FLOOR=%s: %v, want an error naming the variable and what to give", bad, err)
		}
	}
}
