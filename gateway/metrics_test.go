package gateway

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/klique-ai/klique/internal/model"
)

func TestMetricsCountCallsAndTokensPerAlias(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.call(&model.ModelCall{Alias: "chat", Outcome: model.CallOK, InputTokens: 10, OutputTokens: 2}, 100*time.Microsecond)
	}
	m.call(&model.ModelCall{Alias: "chat", Outcome: model.CallRateLimited}, 60*time.Microsecond)
	m.call(&model.ModelCall{Alias: "embed", Outcome: model.CallOK, InputTokens: 5}, 3*time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			v := s.GetCounter().GetValue()
			if h := s.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
				// Each call's time outside the upstream, in seconds.
				if sum := h.GetSampleSum(); math.Abs(sum-(3*100e-6+60e-6+3e-3)) > 1e-9 {
					t.Errorf("overhead sum %v s, want %v s", sum, 3*100e-6+60e-6+3e-3)
				}
				for _, b := range h.GetBucket() {
					if b.GetUpperBound() == 100e-6 && b.GetCumulativeCount() != 4 {
						t.Errorf("%d calls of at most 100 µs, want 4 (a bucket holds what is up to its bound)", b.GetCumulativeCount())
					}
				}
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	// Series nothing was counted in (embed's output) are not made up.
	want := map[string]float64{
		"klique_gateway_calls_total{chat," + model.CallOK + "}":          3,
		"klique_gateway_calls_total{chat," + model.CallRateLimited + "}": 1,
		"klique_gateway_calls_total{embed," + model.CallOK + "}":         1,
		"klique_gateway_tokens_total{chat,input}":                        30,
		"klique_gateway_tokens_total{chat,output}":                       6,
		"klique_gateway_tokens_total{embed,input}":                       5,
		"klique_gateway_limits_degraded{}":                               0,
		"klique_gateway_overhead_seconds{}":                              5,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("series:\n%s\nwant:\n%s", show(got), show(want))
	}
}

func show(m map[string]float64) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&sb, "  %s %v\n", k, m[k])
	}
	return sb.String()
}
