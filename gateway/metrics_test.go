package gateway

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

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
		m.call(&model.ModelCall{Alias: "chat", Outcome: model.CallOK, InputTokens: 10, OutputTokens: 2})
	}
	m.call(&model.ModelCall{Alias: "chat", Outcome: model.CallRateLimited})
	m.call(&model.ModelCall{Alias: "embed", Outcome: model.CallOK, InputTokens: 5})
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
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = s.GetCounter().GetValue()
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
