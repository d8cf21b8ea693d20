package estate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/model"
)

func TestPoolClaimTimeout(t *testing.T) {
	t.Parallel()
	doc := func(claim string) string {
		d := estatetest.Header + "gpuClasses:\n  - {name: h100, memoryGb: 80}\npools:\n  - name: k8s\n    kind: kubernetes\n    capacity: 8\n    gpuClass: h100\n"
		if claim != "" {
			d += "    claimTimeout: " + claim + "\n"
		}
		return d
	}

	t.Run("a claim timeout is read, exported as written, and left out takes the default", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			text   string
			want   *time.Duration
			export string
		}{
			{"", nil, ""},
			{"10m", ptr(10 * time.Minute), "10m"},
			{"1h30m", ptr(90 * time.Minute), "1h30m"},
			{"off", ptr(time.Duration(0)), "off"},
		} {
			e := estatetest.Apply(t, &estate.Estate{}, doc(tc.text))
			p := e.PoolByName("k8s")
			if (p.ClaimTimeout == nil) != (tc.want == nil) || (tc.want != nil && *p.ClaimTimeout != *tc.want) {
				t.Errorf("claimTimeout %q read as %v, want %v", tc.text, p.ClaimTimeout, tc.want)
			}
			if got := e.Export().Pools[0].ClaimTimeout; got != tc.export {
				t.Errorf("claimTimeout %q exported as %q, want %q", tc.text, got, tc.export)
			}
		}
	})

	t.Run("the default is off for a pool an autoscaler serves, 5 minutes otherwise", func(t *testing.T) {
		t.Parallel()
		p := &model.Pool{}
		if got := p.EffectiveClaimTimeout(true); got != 0 {
			t.Errorf("with an autoscaler: %s, want off", got)
		}
		if got := p.EffectiveClaimTimeout(false); got != 5*time.Minute {
			t.Errorf("without: %s, want 5m", got)
		}
		set := 20 * time.Minute
		p.ClaimTimeout = &set
		if got := p.EffectiveClaimTimeout(true); got != set {
			t.Errorf("set on an autoscaled pool: %s, want %s", got, set)
		}
	})

	t.Run("a claim timeout that is not a duration, or out of range, is refused with what to write", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{"soon", "30s", "1500ms", "200h", "-5m"} {
			d := estatetest.Parse(t, doc(bad))
			_, err := d.Apply(&estate.Estate{}, "t", estatetest.SeqIDs("x"), estatetest.Now)
			if err == nil {
				t.Errorf("claimTimeout %q accepted", bad)
				continue
			}
			if _, ok := estatetest.FindProblem(estatetest.Problems(t, err), `pool "k8s"`, "claimTimeout"); !ok ||
				!strings.Contains(err.Error(), "off") {
				t.Errorf("claimTimeout %q: %v", bad, err)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }
