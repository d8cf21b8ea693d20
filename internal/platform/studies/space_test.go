package studies

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/tasks"
)

func validSpec() model.StudySpec {
	return model.StudySpec{Strategy: "random", Seed: 1, Objective: "accuracy", MaxConcurrent: 2, Budget: model.StudyBudget{Trials: 8},
		Space: []model.SearchParam{{Name: "lr", Kind: "loguniform", Lo: 1e-4, Hi: 1e-1}, {Name: "opt", Kind: "choice", Values: []string{"sgd", "adam"}}}}
}

func TestNormalizeRefusesWithMessagesSayingWhatToChange(t *testing.T) {
	for name, c := range map[string]struct {
		change func(*model.StudySpec)
		want   string
	}{
		"an empty space":           {func(s *model.StudySpec) { s.Space = nil }, "the search space is empty"},
		"uniform with lo >= hi":    {func(s *model.StudySpec) { s.Space[0] = model.SearchParam{Name: "x", Kind: "uniform", Lo: 2, Hi: 1} }, `parameter "x": uniform(lo, hi) needs lo < hi, got lo 2 and hi 1`},
		"int with lo == hi":        {func(s *model.StudySpec) { s.Space[0] = model.SearchParam{Name: "n", Kind: "int", Lo: 3, Hi: 3} }, `int(lo, hi) needs lo < hi`},
		"loguniform with lo <= 0":  {func(s *model.StudySpec) { s.Space[0].Lo = 0 }, `parameter "lr": loguniform(lo, hi) needs lo > 0, got lo 0`},
		"an unknown direction":     {func(s *model.StudySpec) { s.Direction = "up" }, `unknown objective direction "up": use min or max`},
		"a missing budget":         {func(s *model.StudySpec) { s.Budget = model.StudyBudget{} }, "the budget is missing: set budget.trials, budget.gpuHours or both"},
		"a negative budget":        {func(s *model.StudySpec) { s.Budget.GPUHours = -1 }, "the budget is negative"},
		"a missing objective":      {func(s *model.StudySpec) { s.Objective = " " }, "the objective metric is missing"},
		"an unknown strategy":      {func(s *model.StudySpec) { s.Strategy = "bayes" }, `unknown strategy "bayes": use grid, random or halving`},
		"a grid over a uniform":    {func(s *model.StudySpec) { s.Strategy = "grid" }, `parameter "lr": a grid cannot enumerate loguniform`},
		"a parameter given twice":  {func(s *model.StudySpec) { s.Space[1].Name = "lr" }, `parameter "lr" is given twice`},
		"a choice of nothing":      {func(s *model.StudySpec) { s.Space[1].Values = nil }, `parameter "opt": choice needs at least one value`},
		"an unknown kind":          {func(s *model.StudySpec) { s.Space[1].Kind = "normal" }, `unknown kind "normal"`},
		"halving without settings": {func(s *model.StudySpec) { s.Strategy = "halving" }, "the halving strategy needs halving.resource"},
		"halving with eta 1": {func(s *model.StudySpec) {
			s.Strategy, s.Halving = "halving", &model.Halving{Resource: "epochs", MinResource: 1, MaxResource: 9, Eta: 1}
		}, "halving.eta is 1"},
		"halving over its own space": {func(s *model.StudySpec) {
			s.Strategy, s.Halving = "halving", &model.Halving{Resource: "lr", MinResource: 1, MaxResource: 9}
		}, `parameter "lr" is the halving resource`},
		"too many trials at once":     {func(s *model.StudySpec) { s.MaxConcurrent = 1000 }, "maxConcurrent is 1000"},
		"a name the worker can't use": {func(s *model.StudySpec) { s.Space[0].Name = "learning rate" }, `name "learning rate" must start with a letter`},
	} {
		t.Run(name, func(t *testing.T) {
			s := validSpec()
			c.change(&s)
			ps := Normalize(&s, tasks.Direction)
			if !strings.Contains(strings.Join(ps, "; "), c.want) {
				t.Fatalf("problems %q, want one containing %q", ps, c.want)
			}
		})
	}
}

func TestNormalizeFillsDefaults(t *testing.T) {
	s := validSpec()
	s.Objective, s.MaxConcurrent = "val/loss", 0
	if ps := Normalize(&s, tasks.Direction); len(ps) > 0 {
		t.Fatal(ps)
	}
	if s.Direction != "min" || s.Summary != "final" || s.MaxConcurrent != 1 {
		t.Fatalf("defaults: direction %q (a loss is minimised, as compare says), summary %q, maxConcurrent %d", s.Direction, s.Summary, s.MaxConcurrent)
	}
	s = validSpec()
	s.Strategy, s.Halving = "successive_halving", &model.Halving{Resource: "epochs", MinResource: 1, MaxResource: 9}
	if ps := Normalize(&s, tasks.Direction); len(ps) > 0 {
		t.Fatal(ps)
	}
	if s.Direction != "max" || s.Strategy != model.StrategyHalving || s.Halving.Eta != 3 {
		t.Fatalf("accuracy is maximised and eta defaults to 3: %+v %+v", s, s.Halving)
	}
}
