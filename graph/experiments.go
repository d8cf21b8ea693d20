package graph

import (
	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/platform"
)

// comparisonOut is a comparison in the API's shape: a value a run does not
// have is null.
func comparisonOut(c *platform.Comparison) *gqlmodel.TaskComparison {
	out := &gqlmodel.TaskComparison{Tasks: c.Tasks, Parameters: []*gqlmodel.ComparedParameter{}, Metrics: []*gqlmodel.ComparedMetric{}}
	for _, p := range c.Parameters {
		row := &gqlmodel.ComparedParameter{Name: p.Name, Differs: p.Differs}
		for i, v := range p.Values {
			if p.Set[i] {
				row.Values = append(row.Values, &v)
			} else {
				row.Values = append(row.Values, nil)
			}
		}
		out.Parameters = append(out.Parameters, row)
	}
	value := func(v *platform.MetricValue) *gqlmodel.MetricValue {
		if v == nil {
			return nil
		}
		return &gqlmodel.MetricValue{Value: v.Value, Step: int(v.Step)}
	}
	for _, m := range c.Metrics {
		row := &gqlmodel.ComparedMetric{Name: m.Name, Direction: gqlmodel.MetricDirectionMax, Differs: m.Differs}
		if m.Direction == "min" {
			row.Direction = gqlmodel.MetricDirectionMin
		}
		for i := range m.Final {
			row.Final, row.Best = append(row.Final, value(m.Final[i])), append(row.Best, value(m.Best[i]))
			series := make([]*gqlmodel.MetricValue, len(m.Series[i]))
			for j := range m.Series[i] {
				series[j] = value(&m.Series[i][j])
			}
			row.Series = append(row.Series, series)
		}
		out.Metrics = append(out.Metrics, row)
	}
	code := &gqlmodel.ComparedCode{DiffFiles: c.Code.DiffFiles, DiffAdded: c.Code.DiffAdded, DiffRemoved: c.Code.DiffRemoved,
		SameDiff: c.Code.SameDiff, Differs: c.Code.Differs}
	for i := range c.Code.Commits {
		code.Repositories = append(code.Repositories, orNull(c.Code.Repositories[i]))
		code.Commits = append(code.Commits, orNull(c.Code.Commits[i]))
	}
	out.Code = code
	return out
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
