package studies

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/tasks"
)

var testDecider = decider{summarize: func(points []model.MetricPoint, direction string) (Value, Value, bool) {
	f, b, ok := tasks.Summarize(points, direction)
	return Value(f), Value(b), ok
}}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// curve is metric points at steps 1..n of values f(step).
func curve(n int, f func(step int) float64) []model.MetricPoint {
	var out []model.MetricPoint
	for s := 1; s <= n; s++ {
		out = append(out, model.MetricPoint{Name: "accuracy", Step: int64(s), Value: f(s), Seq: int64(s)})
	}
	return out
}

func study(spec model.StudySpec) model.Study {
	if ps := Normalize(&spec, tasks.Direction); len(ps) > 0 {
		panic(strings.Join(ps, "; "))
	}
	return model.Study{ID: "s1", TenantID: "t1", Name: "sweep", State: model.StudyRunning, Spec: spec}
}

// running gives n running trials with tasks task-0…
func running(n int) []*model.StudyTrial {
	var out []*model.StudyTrial
	for i := range n {
		out = append(out, &model.StudyTrial{Number: i, TaskID: fmt.Sprint("task-", i), State: model.TrialRunning, Params: map[string]string{}})
	}
	return out
}

func TestSuccessiveHalvingStopsTrialsBelowTheRungsCut(t *testing.T) {
	st := study(model.StudySpec{Strategy: "halving", Objective: "accuracy", MaxConcurrent: 4, Budget: model.StudyBudget{Trials: 4},
		Space:   []model.SearchParam{{Name: "lr", Kind: "uniform", Lo: 0, Hi: 1}},
		Halving: &model.Halving{Resource: "epochs", MinResource: 1, MaxResource: 9, Eta: 2}})
	trials := running(4)
	// At rung 1 (epoch 1) the four report 0.2, 0.6, 0.4, 0.8: with eta 2
	// the best two (0.8, 0.6) continue, the cut is 0.6.
	obs := map[int]observation{}
	for i, v := range []float64{0.2, 0.6, 0.4, 0.8} {
		obs[i] = observation{Status: model.TaskRunning, Points: curve(1, func(int) float64 { return v })}
	}
	p := testDecider.decide(st, trials, obs, 0, t0)
	stopped := map[int]string{}
	for _, o := range p.Stop {
		stopped[o.Trial.Number] = o.Reason
	}
	if len(stopped) != 2 || stopped[0] == "" || stopped[2] == "" {
		t.Fatalf("stopped %v, want trials 0 and 2", stopped)
	}
	want := "stopped early by study sweep at rung 1 (epochs 1): accuracy 0.2 was below the rung's cut 0.6"
	if stopped[0] != want || trials[0].Reason != want || trials[0].State != model.TrialStoppedEarly || *trials[0].Objective != 0.2 {
		t.Fatalf("trial 0: %q, state %s; want %q", stopped[0], trials[0].State, want)
	}
	if trials[1].Rung != 1 || trials[3].Rung != 1 || trials[1].State != model.TrialRunning {
		t.Fatalf("promoted trials pass rung 1: %+v %+v", trials[1], trials[3])
	}
	if p.Study.State != model.StudyRunning || len(p.Added) != 0 {
		t.Fatalf("the trial budget (4) is used: no new trials, the study runs on; %+v", p)
	}

	// At rung 2 (epoch 2; rungs are 1, 2, 4, 8) only trials 1 and 3 compete (the stopped ones
	// never reached it): 3 leads, 1 is stopped, with its value at epoch 2.
	obs[1] = observation{Status: model.TaskRunning, Points: curve(3, func(s int) float64 { return 0.6 + 0.01*float64(s) })}
	obs[3] = observation{Status: model.TaskRunning, Points: curve(3, func(s int) float64 { return 0.8 + 0.01*float64(s) })}
	p = testDecider.decide(st, trials, obs, 0, t0)
	if len(p.Stop) != 1 || p.Stop[0].Trial.Number != 1 ||
		p.Stop[0].Reason != "stopped early by study sweep at rung 2 (epochs 2): accuracy 0.62 was below the rung's cut 0.82" {
		t.Fatalf("rung 2 stops %+v", p.Stop)
	}
	// Trial 3 completes: the study is done and 3 is the best.
	obs[3] = observation{Status: model.TaskCompleted, FinishedAt: &t0, Points: curve(9, func(s int) float64 { return 0.8 + 0.01*float64(s) })}
	p = testDecider.decide(st, trials, obs, 0, t0)
	if p.Study.State != model.StudyCompleted || p.Study.BestTaskID != "task-3" || *trials[3].Objective != 0.89 {
		t.Fatalf("study %+v, trial 3 %+v", p.Study, trials[3])
	}
	if p.Study.Reason != "its budget of 4 trials is spent" {
		t.Fatalf("reason %q", p.Study.Reason)
	}
}

func TestSuccessiveHalvingMinimisesALoss(t *testing.T) {
	st := study(model.StudySpec{Strategy: "halving", Objective: "loss", MaxConcurrent: 3, Budget: model.StudyBudget{Trials: 3},
		Space:   []model.SearchParam{{Name: "lr", Kind: "uniform", Lo: 0, Hi: 1}},
		Halving: &model.Halving{Resource: "steps", MinResource: 2, MaxResource: 10, Eta: 3}})
	trials := running(3)
	obs := map[int]observation{}
	for i, v := range []float64{0.9, 0.3, 0.5} {
		obs[i] = observation{Status: model.TaskRunning, Points: []model.MetricPoint{{Name: "loss", Step: 1, Value: 5, Seq: 1}, {Name: "loss", Step: 2, Value: v, Seq: 2}}}
	}
	p := testDecider.decide(st, trials, obs, 0, t0)
	if len(p.Stop) != 2 || trials[1].State != model.TrialRunning || !strings.Contains(trials[0].Reason, "loss 0.9 was above the rung's cut 0.3") {
		t.Fatalf("stops %+v; trial 0 %q", p.Stop, trials[0].Reason)
	}
}

func TestConcurrencyIsNeverExceeded(t *testing.T) {
	st := study(model.StudySpec{Strategy: "random", Seed: 3, Objective: "accuracy", MaxConcurrent: 2, Budget: model.StudyBudget{Trials: 8},
		Space: []model.SearchParam{{Name: "x", Kind: "uniform", Lo: 0, Hi: 1}}})
	var trials []*model.StudyTrial
	obs := map[int]observation{}
	for pass := range 20 {
		p := testDecider.decide(st, trials, obs, 0, t0)
		for _, a := range p.Added {
			a.TaskID, a.State = fmt.Sprint("task-", a.Number), model.TrialRunning
			trials = append(trials, a)
		}
		active := 0
		for _, tr := range trials {
			if !tr.State.Final() {
				active++
			}
		}
		if active > 2 {
			t.Fatalf("pass %d: %d trials at once, the most is 2", pass, active)
		}
		// One trial ends each pass.
		for _, tr := range trials {
			if !tr.State.Final() {
				obs[tr.Number] = observation{Status: model.TaskCompleted, FinishedAt: &t0, Points: curve(1, func(int) float64 { return float64(tr.Number) })}
				break
			}
		}
		if p.Study.State == model.StudyCompleted {
			if len(trials) != 8 || p.Study.BestTaskID != "task-7" {
				t.Fatalf("%d trials, best %s; want 8 and task-7", len(trials), p.Study.BestTaskID)
			}
			return
		}
	}
	t.Fatal("the study never completed")
}

func TestGPUHourBudgetAbortsRunningTrialsAndEndsTheStudy(t *testing.T) {
	st := study(model.StudySpec{Strategy: "random", Objective: "accuracy", MaxConcurrent: 2, Budget: model.StudyBudget{GPUHours: 1.5},
		Space: []model.SearchParam{{Name: "x", Kind: "uniform", Lo: 0, Hi: 1}}})
	trials := running(2)
	obs := map[int]observation{0: {Status: model.TaskRunning}, 1: {Status: model.TaskRunning}}
	p := testDecider.decide(st, trials, obs, 1.2, t0)
	if len(p.Stop) != 0 || len(p.Added) != 0 || p.Study.State != model.StudyRunning {
		t.Fatalf("under the budget, at full concurrency: nothing to do, got %+v", p)
	}
	p = testDecider.decide(st, trials, obs, 1.6, t0)
	if len(p.Stop) != 2 || len(p.Added) != 0 || p.Study.State != model.StudyCompleted {
		t.Fatalf("over the budget: stop both, add none, complete; got %+v", p)
	}
	if !strings.Contains(p.Stop[0].Reason, "its budget of 1.5 GPU-hours is spent (1.6 used)") || trials[0].State != model.TrialAborted {
		t.Fatalf("reason %q, state %s", p.Stop[0].Reason, trials[0].State)
	}
}

func TestTrialBudgetAndExhaustedGridEndTheStudy(t *testing.T) {
	st := study(model.StudySpec{Strategy: "grid", Objective: "accuracy", MaxConcurrent: 5, Budget: model.StudyBudget{Trials: 10},
		Space: []model.SearchParam{{Name: "x", Kind: "int", Lo: 1, Hi: 3}}})
	p := testDecider.decide(st, nil, nil, 0, t0)
	if len(p.Added) != 3 {
		t.Fatalf("a grid of 3 points adds 3 trials, got %d", len(p.Added))
	}
	trials := p.Added
	obs := map[int]observation{}
	for i, tr := range trials {
		tr.TaskID, tr.State = fmt.Sprint("task-", i), model.TrialRunning
		obs[i] = observation{Status: model.TaskCompleted, FinishedAt: &t0, Points: curve(2, func(s int) float64 { return float64(s * (3 - i)) })}
	}
	obs[2] = observation{Status: model.TaskFailed, Reason: "exit status 1", FinishedAt: &t0}
	p = testDecider.decide(st, trials, obs, 0, t0)
	if p.Study.State != model.StudyCompleted || p.Study.Reason != "all 3 points of its grid have run" || p.Study.BestTaskID != "task-0" {
		t.Fatalf("%+v", p.Study)
	}
	if trials[2].State != model.TrialFailed || trials[2].Reason != "exit status 1" || trials[0].Objective == nil || *trials[0].Objective != 6 {
		t.Fatalf("trials %+v %+v", trials[0], trials[2])
	}
}
