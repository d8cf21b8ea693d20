package estate_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
)

// TestPoolAppNetworks: a pool's appNetworks and local (the router's
// address rule) are read, normalised, exported as read, and refused when
// they are not CIDRs or would open loopback, link-local or everything.
func TestPoolAppNetworks(t *testing.T) {
	t.Parallel()
	doc := func(fields string) string {
		return estatetest.Header + "gpuClasses:\n  - {name: h100, memoryGb: 80}\npools:\n  - name: k8s\n    kind: kubernetes\n    capacity: 8\n    gpuClass: h100\n" + fields
	}
	e := estatetest.Apply(t, &estate.Estate{}, doc("    appNetworks: [10.244.1.7/16, \"fd00:1::/64\"]\n    local: true\n"))
	p := e.PoolByName("k8s")
	if !slices.Equal(p.AppNetworks, []string{"10.244.0.0/16", "fd00:1::/64"}) || !p.Local {
		t.Fatalf("read %q, local %v", p.AppNetworks, p.Local)
	}
	if ex := e.Export().Pools[0]; !slices.Equal(ex.AppNetworks, p.AppNetworks) || !ex.Local {
		t.Fatalf("exported %q, local %v", ex.AppNetworks, ex.Local)
	}
	if p := estatetest.Apply(t, &estate.Estate{}, doc("")).PoolByName("k8s"); p.AppNetworks != nil || p.Local {
		t.Fatalf("left out: %q, local %v", p.AppNetworks, p.Local)
	}
	for bad, want := range map[string]string{
		"[10.0.0.0]":       "is not a CIDR",
		"[eth0]":           "is not a CIDR",
		"[127.0.0.0/8]":    "declare the pool local",
		"[169.254.0.0/16]": "declare the pool local",
		"[0.0.0.0/0]":      "declare the pool local",
	} {
		e, err := estatetest.Parse(t, doc("    appNetworks: "+bad+"\n")).Apply(&estate.Estate{}, "t", estatetest.SeqIDs("x"), estatetest.Now)
		if err == nil {
			err = e.Validate() // what every write of the estate runs
		}
		if err == nil {
			t.Errorf("appNetworks %s was accepted", bad)
			continue
		}
		if _, ok := estatetest.FindProblem(estatetest.Problems(t, err), `pool "k8s"`, "appNetworks"); !ok || !strings.Contains(err.Error(), want) {
			t.Errorf("appNetworks %s: %v, want %q", bad, err, want)
		}
	}
}
