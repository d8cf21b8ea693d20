package graph

import (
	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// localRunReport turns a report's input into the platform's; the platform
// checks it.
func localRunReport(in gqlmodel.LocalRunReportInput) platform.LocalRunReport {
	r := platform.LocalRunReport{Parameters: in.Parameters}
	for _, m := range in.Metrics {
		p := model.MetricPoint{Name: m.Name, Value: m.Value}
		if m.Step != nil {
			p.Step = int64(*m.Step)
		}
		if m.At != nil {
			p.At = *m.At
		}
		r.Metrics = append(r.Metrics, p)
	}
	for _, l := range in.Logs {
		line := model.LogLine{Line: l.Line, Stream: deref(l.Stream)}
		if l.N != nil {
			line.N = int64(*l.N)
		}
		if l.At != nil {
			line.At = *l.At
		}
		r.Logs = append(r.Logs, line)
	}
	return r
}
