package studies

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/model"
)

// Bounds on a study, so one study cannot flood a queue or the store.
const (
	// MaxTrials is the most trials one study runs.
	MaxTrials = 1000
	// MaxConcurrent is the most trials one study runs at once.
	MaxConcurrent = 100
	// defaultEta is successive halving's reduction factor when none is
	// given.
	defaultEta = 3
)

// paramName is what a parameter may be called: what the worker's
// {param} templates and KLIQUE_PARAM_* variables accept.
var paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// Normalize fills a spec's defaults (the direction from the objective's
// name, as compare decides it; one trial at a time; eta 3) and returns the
// problems that make it unusable, each saying what to change. direction is
// the rule that names a metric's better side (tasks.Direction).
func Normalize(spec *model.StudySpec, direction func(string) string) []string {
	var ps []string
	bad := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	spec.Objective = strings.TrimSpace(spec.Objective)
	if spec.Objective == "" {
		bad("the objective metric is missing: name the metric the trials report (objective.metric)")
	}
	switch spec.Direction = strings.ToLower(strings.TrimSpace(spec.Direction)); spec.Direction {
	case "":
		if spec.Objective != "" {
			spec.Direction = direction(spec.Objective)
		}
	case "min", "max":
	case "minimize", "minimise":
		spec.Direction = "min"
	case "maximize", "maximise":
		spec.Direction = "max"
	default:
		bad("unknown objective direction %q: use min or max (or leave it out to take it from the metric's name)", spec.Direction)
	}
	switch spec.Summary = strings.ToLower(strings.TrimSpace(spec.Summary)); spec.Summary {
	case "":
		spec.Summary = "final"
	case "final", "best":
	default:
		bad("unknown objective summary %q: use final (the last value reported) or best", spec.Summary)
	}
	if spec.MaxConcurrent == 0 {
		spec.MaxConcurrent = 1
	}
	if spec.MaxConcurrent < 0 || spec.MaxConcurrent > MaxConcurrent {
		bad("maxConcurrent is %d: give 1 to %d trials at once", spec.MaxConcurrent, MaxConcurrent)
	}
	b := spec.Budget
	switch {
	case b.Trials < 0 || b.GPUHours < 0 || math.IsNaN(b.GPUHours) || math.IsInf(b.GPUHours, 0):
		bad("the budget is negative or not a number: give budget.trials and/or budget.gpuHours above 0")
	case b.Trials == 0 && b.GPUHours == 0:
		bad("the budget is missing: set budget.trials, budget.gpuHours or both")
	case b.Trials > MaxTrials:
		bad("budget.trials is %d: a study runs at most %d trials", b.Trials, MaxTrials)
	}
	ps = append(ps, checkSpace(spec.Space)...)
	switch spec.Strategy = strings.ToLower(strings.TrimSpace(spec.Strategy)); spec.Strategy {
	case model.StrategyGrid:
		for _, p := range spec.Space {
			if p.Kind == model.ParamUniform || p.Kind == model.ParamLogUniform {
				bad("parameter %q: a grid cannot enumerate %s(%g, %g): use choice or int, or the random strategy", p.Name, p.Kind, p.Lo, p.Hi)
			}
		}
	case model.StrategyRandom:
	case model.StrategyHalving, "successive_halving", "successive-halving":
		spec.Strategy = model.StrategyHalving
		ps = append(ps, checkHalving(spec)...)
	case "":
		bad("the strategy is missing: use grid, random or halving")
	default:
		bad("unknown strategy %q: use grid, random or halving", spec.Strategy)
	}
	if spec.Strategy != model.StrategyHalving && spec.Halving != nil {
		bad("halving settings are given but the strategy is %q: use strategy halving or remove them", spec.Strategy)
	}
	return ps
}

// checkSpace checks the search space's parameters.
func checkSpace(space []model.SearchParam) []string {
	var ps []string
	bad := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	if len(space) == 0 {
		return []string{"the search space is empty: give at least one parameter (choice, uniform, loguniform or int)"}
	}
	seen := map[string]bool{}
	for i := range space {
		p := &space[i]
		p.Name = strings.TrimSpace(p.Name)
		if !paramName.MatchString(p.Name) {
			bad("parameter %d: name %q must start with a letter or _ and hold only letters, digits, _, . and -", i+1, p.Name)
			continue
		}
		if seen[p.Name] {
			bad("parameter %q is given twice", p.Name)
		}
		seen[p.Name] = true
		p.Kind = strings.ToLower(strings.TrimSpace(p.Kind))
		switch p.Kind {
		case model.ParamChoice:
			if len(p.Values) == 0 {
				bad("parameter %q: choice needs at least one value", p.Name)
			}
		case model.ParamUniform:
			if !(p.Lo < p.Hi) {
				bad("parameter %q: uniform(lo, hi) needs lo < hi, got lo %g and hi %g", p.Name, p.Lo, p.Hi)
			}
		case model.ParamLogUniform:
			switch {
			case !(p.Lo > 0):
				bad("parameter %q: loguniform(lo, hi) needs lo > 0, got lo %g", p.Name, p.Lo)
			case !(p.Lo < p.Hi):
				bad("parameter %q: loguniform(lo, hi) needs lo < hi, got lo %g and hi %g", p.Name, p.Lo, p.Hi)
			}
		case model.ParamInt:
			if p.Step == 0 {
				p.Step = 1
			}
			switch {
			case p.Lo != math.Trunc(p.Lo) || p.Hi != math.Trunc(p.Hi) || math.Abs(p.Lo) > 1e15 || math.Abs(p.Hi) > 1e15:
				bad("parameter %q: int(lo, hi) needs whole numbers, got %g and %g", p.Name, p.Lo, p.Hi)
			case !(p.Lo < p.Hi):
				bad("parameter %q: int(lo, hi) needs lo < hi, got lo %g and hi %g", p.Name, p.Lo, p.Hi)
			case p.Step < 0:
				bad("parameter %q: int step %d must be at least 1", p.Name, p.Step)
			}
		case "":
			bad("parameter %q: the kind is missing: use choice, uniform, loguniform or int", p.Name)
		default:
			bad("parameter %q: unknown kind %q: use choice, uniform, loguniform or int", p.Name, p.Kind)
		}
	}
	return ps
}

// checkHalving checks successive halving's settings.
func checkHalving(spec *model.StudySpec) []string {
	h := spec.Halving
	if h == nil {
		return []string{"the halving strategy needs halving.resource (the parameter that sets epochs or steps), halving.minResource and halving.maxResource"}
	}
	var ps []string
	bad := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	h.Resource = strings.TrimSpace(h.Resource)
	if h.Eta == 0 {
		h.Eta = defaultEta
	}
	switch {
	case !paramName.MatchString(h.Resource):
		bad("halving.resource %q must name the parameter that sets the trial's epochs or steps", h.Resource)
	case h.MinResource < 1 || h.MaxResource <= h.MinResource:
		bad("halving needs 1 <= minResource < maxResource, got %d and %d", h.MinResource, h.MaxResource)
	case h.Eta < 2:
		bad("halving.eta is %d: it must be at least 2 (the top 1/eta continue at each rung)", h.Eta)
	}
	for _, p := range spec.Space {
		if p.Name == h.Resource {
			bad("parameter %q is the halving resource: the study sets it, remove it from the space", p.Name)
		}
	}
	return ps
}

// GridSize is the number of points of a grid over space (0 when a
// parameter cannot be enumerated).
func GridSize(space []model.SearchParam) int {
	n := 1
	for _, p := range space {
		c := gridCount(p)
		if c == 0 {
			return 0
		}
		if n > MaxTrials*MaxTrials/c {
			return MaxTrials * MaxTrials
		}
		n *= c
	}
	return n
}

func gridCount(p model.SearchParam) int {
	switch p.Kind {
	case model.ParamChoice:
		return len(p.Values)
	case model.ParamInt:
		step := max(p.Step, 1)
		return int((p.Hi-p.Lo)/float64(step)) + 1
	}
	return 0
}

// formatFloat writes a sampled value with six significant digits: enough
// for a learning rate, short enough to read in a table.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
