package tasks

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Comparing runs side by side is one operation, here, so that GraphQL's
// compareTasks, the MCP tool compare_tasks, 'klique compare' and its
// regression gate agree on what differs and on which value is best.

// Bounds on a comparison.
const (
	MinCompared = 2
	MaxCompared = 10
	// MaxSeriesPoints is the most points of one metric's series a
	// comparison returns per run; longer series are thinned evenly, the
	// last point always kept.
	MaxSeriesPoints = 500
)

// Comparison is runs side by side.
type Comparison struct {
	Tasks      []*model.Task
	Parameters []ComparedParameter
	Metrics    []ComparedMetric
	Code       ComparedCode
}

// ComparedParameter is one parameter across the runs ("" where a run has
// none; Set says which have it).
type ComparedParameter struct {
	Name    string
	Values  []string
	Set     []bool
	Differs bool
}

// MetricValue is a metric's value at a step.
type MetricValue struct {
	Value float64
	Step  int64
}

// ComparedMetric is one metric across the runs: each run's final value (the
// last reported) and best value (by Direction), nil where a run reported
// none, and each run's series for overlaid charts.
type ComparedMetric struct {
	Name string
	// Direction is "min" when lower is better (a loss, an error), else
	// "max"; see Direction.
	Direction string
	Final     []*MetricValue
	Best      []*MetricValue
	Series    [][]MetricValue
	Differs   bool
}

// ComparedCode is the code state of the runs: repository, commit and the
// size of the uncommitted diff, and whether any of them differs.
type ComparedCode struct {
	Repositories []string
	Commits      []string
	// DiffFiles, DiffAdded and DiffRemoved summarise each run's recorded
	// uncommitted diff (files touched, lines added and removed).
	DiffFiles, DiffAdded, DiffRemoved []int
	// SameDiff says whether two runs' diffs are identical, per run against
	// the first.
	SameDiff []bool
	Differs  bool
}

// lowerIsBetter are words of metric names whose best value is the least.
var lowerIsBetter = []string{"loss", "error", "err", "perplexity", "ppl", "mse", "mae", "rmse", "wer", "cer", "latency", "time", "duration", "seconds", "regret"}

// Direction says which way a metric improves, from its name: "min" for
// losses, errors and times (a name with one of those words, split on
// '/', '_', '-', '.' and spaces), else "max" (accuracy, F1, reward). The
// regression gate and the best values follow it.
func Direction(metric string) string {
	words := strings.FieldsFunc(strings.ToLower(metric), func(r rune) bool {
		return r == '/' || r == '_' || r == '-' || r == '.' || r == ' ' || r == ':'
	})
	for _, w := range words {
		if slices.Contains(lowerIsBetter, w) {
			return "min"
		}
	}
	return "max"
}

// CompareTasks puts runs the caller may see side by side: parameters with
// differences marked, each metric's final and best values and series, and
// the code each ran.
func (s *Tasks) CompareTasks(ctx context.Context, ids []string) (*Comparison, error) {
	if _, err := kernel.Caller(ctx); err != nil {
		return nil, err
	}
	if len(ids) < MinCompared || len(ids) > MaxCompared {
		return nil, kernel.Invalid("compare two to ten runs: %d given", len(ids))
	}
	c := &Comparison{}
	seen := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if seen[id] {
			return nil, kernel.Invalid("run %s is listed twice", kernel.Quote(id))
		}
		seen[id] = true
		t, err := s.Task(ctx, id)
		if err != nil {
			return nil, err
		}
		c.Tasks = append(c.Tasks, t)
	}
	c.Parameters = compareParameters(c.Tasks)
	series := make([]map[string][]model.MetricPoint, len(c.Tasks))
	for i, t := range c.Tasks {
		points, err := s.allMetrics(ctx, t)
		if err != nil {
			return nil, err
		}
		series[i] = map[string][]model.MetricPoint{}
		for _, p := range points {
			series[i][p.Name] = append(series[i][p.Name], p)
		}
	}
	c.Metrics = compareMetrics(series)
	c.Code = compareCode(c.Tasks)
	return c, nil
}

// allMetrics reads every metric point of a task, page by page.
func (s *Tasks) allMetrics(ctx context.Context, t *model.Task) ([]model.MetricPoint, error) {
	var all []model.MetricPoint
	var after int64
	for {
		page, err := s.TaskMetrics(ctx, t, "", after, 10000, false)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < 10000 {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}

func compareParameters(tasks []*model.Task) []ComparedParameter {
	names := map[string]bool{}
	for _, t := range tasks {
		for k := range t.Spec.Parameters {
			names[k] = true
		}
	}
	out := []ComparedParameter{}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		row := ComparedParameter{Name: k}
		for _, t := range tasks {
			v, ok := t.Spec.Parameters[k]
			row.Values, row.Set = append(row.Values, v), append(row.Set, ok)
		}
		for i := range row.Values {
			if row.Values[i] != row.Values[0] || row.Set[i] != row.Set[0] {
				row.Differs = true
			}
		}
		out = append(out, row)
	}
	return out
}

func compareMetrics(series []map[string][]model.MetricPoint) []ComparedMetric {
	names := map[string]bool{}
	for _, m := range series {
		for k := range m {
			names[k] = true
		}
	}
	out := []ComparedMetric{}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		row := ComparedMetric{Name: name, Direction: Direction(name)}
		for _, m := range series {
			points := m[name]
			if len(points) == 0 {
				row.Final, row.Best, row.Series = append(row.Final, nil), append(row.Best, nil), append(row.Series, []MetricValue{})
				continue
			}
			final, best, _ := Summarize(points, row.Direction)
			row.Final = append(row.Final, &final)
			row.Best = append(row.Best, &best)
			row.Series = append(row.Series, thin(points))
		}
		for i := range row.Final {
			a, b := row.Final[i], row.Final[0]
			if (a == nil) != (b == nil) || (a != nil && !sameFloat(a.Value, b.Value)) {
				row.Differs = true
			}
		}
		out = append(out, row)
	}
	return out
}

// Summarize returns one metric's final value, the last reported (by step,
// then by order of arrival: the store's sequence), and its best value in
// direction ("min" or "max"); false when there are no points. Studies rank
// their trials by the same rule.
func Summarize(points []model.MetricPoint, direction string) (final, best MetricValue, ok bool) {
	if len(points) == 0 {
		return MetricValue{}, MetricValue{}, false
	}
	f, b := points[0], points[0]
	for _, p := range points[1:] {
		if p.Step > f.Step || (p.Step == f.Step && p.Seq > f.Seq) {
			f = p
		}
		if (direction == "min" && p.Value < b.Value) || (direction == "max" && p.Value > b.Value) {
			b = p
		}
	}
	return MetricValue{f.Value, f.Step}, MetricValue{b.Value, b.Step}, true
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// thin returns a series of at most MaxSeriesPoints points, evenly spaced,
// keeping the last.
func thin(points []model.MetricPoint) []MetricValue {
	n := len(points)
	stride := 1
	if n > MaxSeriesPoints {
		stride = (n + MaxSeriesPoints - 1) / MaxSeriesPoints
	}
	out := make([]MetricValue, 0, min(n, MaxSeriesPoints)+1)
	for i := 0; i < n; i += stride {
		out = append(out, MetricValue{points[i].Value, points[i].Step})
	}
	if last := points[n-1]; (n-1)%stride != 0 {
		out = append(out, MetricValue{last.Value, last.Step})
	}
	return out
}

func compareCode(tasks []*model.Task) ComparedCode {
	var c ComparedCode
	for _, t := range tasks {
		files, added, removed := diffSummary(t.Spec.Diff)
		c.Repositories = append(c.Repositories, t.Spec.Repository)
		c.Commits = append(c.Commits, t.Spec.Commit)
		c.DiffFiles, c.DiffAdded, c.DiffRemoved = append(c.DiffFiles, files), append(c.DiffAdded, added), append(c.DiffRemoved, removed)
		c.SameDiff = append(c.SameDiff, t.Spec.Diff == tasks[0].Spec.Diff)
	}
	for i, t := range tasks {
		if t.Spec.Repository != tasks[0].Spec.Repository || t.Spec.Commit != tasks[0].Spec.Commit || !c.SameDiff[i] ||
			!slices.Equal(t.Spec.Command, tasks[0].Spec.Command) || t.Spec.EntryPoint != tasks[0].Spec.EntryPoint {
			c.Differs = true
		}
	}
	return c
}

// diffSummary counts the files a unified diff touches and its lines added
// and removed.
func diffSummary(diff string) (files, added, removed int) {
	for line := range strings.Lines(diff) {
		switch {
		case strings.HasPrefix(line, "diff --git "):
			files++
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
		case strings.HasPrefix(line, "+"):
			added++
		case strings.HasPrefix(line, "-"):
			removed++
		}
	}
	return files, added, removed
}
