package platform_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/platform/studies"
	"github.com/klique-ai/klique/internal/store"
)

func studyInput(base string, mod func(*studies.StartInput)) studies.StartInput {
	in := studies.StartInput{Name: "sweep", BaseTask: base, Spec: model.StudySpec{Strategy: "random", Seed: 7, Objective: "accuracy",
		MaxConcurrent: 2, Budget: model.StudyBudget{Trials: 6}, Space: []model.SearchParam{{Name: "lr", Kind: "loguniform", Lo: 1e-4, Hi: 1}}}}
	if mod != nil {
		mod(&in)
	}
	return in
}

// studyTasks counts the tasks of the tenant and those of them that have
// not ended.
func studyTasks(t *testing.T, b *testBundle) (all, live int) {
	t.Helper()
	tasks, err := b.Store.ListTasks(context.Background(), b.Tenant, store.TaskFilter{}, model.Page{Limit: 1000}, false)
	platformtest.Must(t, err)
	for _, tk := range tasks {
		if !tk.Status.Final() {
			live++
		}
	}
	return len(tasks), live
}

func TestStudyRefusalsComeBeforeAnythingIsEnqueued(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		base := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", map[string]string{"lr": "0.1"})
		before, _ := studyTasks(t, b)
		for _, c := range []struct {
			who   context.Context
			mod   func(*studies.StartInput)
			code  platform.Code
			words []string
		}{
			{ps.rita, func(in *studies.StartInput) { in.Spec.Space = nil }, platform.CodeInvalid, []string{"the search space is empty"}},
			{ps.rita, func(in *studies.StartInput) { in.Spec.Space[0].Lo = 0 }, platform.CodeInvalid, []string{"loguniform(lo, hi) needs lo > 0"}},
			{ps.rita, func(in *studies.StartInput) { in.Spec.Budget = model.StudyBudget{} }, platform.CodeInvalid, []string{"the budget is missing"}},
			{ps.rita, func(in *studies.StartInput) { in.Spec.Direction = "upwards" }, platform.CodeInvalid, []string{`unknown objective direction "upwards"`}},
			{ps.rita, func(in *studies.StartInput) { in.ComputeResource, in.Group = "8 GPUs", "vision" }, platform.CodeForbidden, []string{"you are not in group vision"}},
			{ps.vic, nil, platform.CodeNotFound, []string{"no task"}},
			{ps.viewer, nil, platform.CodeForbidden, []string{"a viewer cannot start studies"}},
		} {
			_, err := b.Svc.StartStudy(c.who, studyInput(base.ID, c.mod))
			platformtest.WantError(t, err, c.code, c.words...)
		}
		after, _ := studyTasks(t, b)
		list, err := b.Store.ListStudies(context.Background(), b.Tenant, "")
		platformtest.Must(t, err)
		if after != before || len(list) != 0 {
			t.Fatalf("a refused study left %d tasks (had %d) and %d studies", after, before, len(list))
		}
	})
}

// TestConcurrentPassesNeverExceedConcurrencyNorEnqueueATrialTwice runs the
// controller's pass from several goroutines at once (as replicas would),
// ending one trial's task between rounds, and checks the store: never
// more trials live than the study allows, one task per trial, and the
// trial budget kept.
func TestConcurrentPassesNeverExceedConcurrencyNorEnqueueATrialTwice(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		base := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", map[string]string{"lr": "0.1"})
		st, err := b.Svc.StartStudy(ps.rita, studyInput(base.ID, nil))
		platformtest.Must(t, err)
		ctx := context.Background()
		for round := 0; ; round++ {
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					platformtest.Must(t, b.Svc.ReconcileStudies(ctx))
				}()
			}
			wg.Wait()
			trials, err := b.Store.ListStudyTrials(ctx, b.Tenant, st.ID)
			platformtest.Must(t, err)
			all, live := studyTasks(t, b)
			if live > 2+1 { // the base task is still queued
				t.Fatalf("round %d: %d tasks live, the study allows 2", round, live-1)
			}
			if all != len(trials)+1 {
				t.Fatalf("round %d: %d tasks for %d trials", round, all-1, len(trials))
			}
			seen := map[string]bool{}
			var running *model.StudyTrial
			for _, tr := range trials {
				if tr.TaskID == "" || seen[tr.TaskID] {
					t.Fatalf("round %d: trial %d has task %q (twice or none)", round, tr.Number, tr.TaskID)
				}
				seen[tr.TaskID] = true
				if tr.State == model.TrialRunning && running == nil {
					running = tr
				}
			}
			got, err := b.Svc.Study(ps.rita, st.ID)
			platformtest.Must(t, err)
			if got.State == model.StudyCompleted {
				if len(trials) != 6 || got.Reason != "its budget of 6 trials is spent" {
					t.Fatalf("completed with %d trials: %q", len(trials), got.Reason)
				}
				return
			}
			if running == nil || round > 20 {
				t.Fatalf("round %d: the study runs with no trial running: %+v", round, trials)
			}
			_, err = b.Svc.AbortTask(ps.rita, running.TaskID, fmt.Sprint("round ", round))
			platformtest.Must(t, err)
		}
	})
}

func TestStoppingAStudyAbortsItsRunningTrials(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		base := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", map[string]string{"lr": "0.1"})
		st, err := b.Svc.StartStudy(ps.rita, studyInput(base.ID, nil))
		platformtest.Must(t, err)
		_, err = b.Svc.StopStudy(ps.vic, st.ID, "")
		platformtest.WantError(t, err, platform.CodeNotFound)
		got, err := b.Svc.StopStudy(ps.lead, st.ID, "enough")
		platformtest.Must(t, err)
		if got.State != model.StudyStopped || got.Reason != "stopped by lena: enough" {
			t.Fatalf("study %+v", got)
		}
		trials, err := b.Store.ListStudyTrials(context.Background(), b.Tenant, st.ID)
		platformtest.Must(t, err)
		if len(trials) != 2 {
			t.Fatalf("%d trials, want the 2 the first pass started", len(trials))
		}
		for _, tr := range trials {
			task, err := b.Svc.Task(ps.rita, tr.TaskID)
			platformtest.Must(t, err)
			if tr.State != model.TrialAborted || task.Status != model.TaskAborted || task.Reason != "stopped by lena: enough" || task.OwnerID != userID(ps.rita) {
				t.Fatalf("trial %+v, task %s %q", tr, task.Status, task.Reason)
			}
		}
		_, err = b.Svc.StopStudy(ps.rita, st.ID, "")
		platformtest.WantError(t, err, platform.CodeConflict, "has already ended")
		// The controller leaves a stopped study alone.
		platformtest.Must(t, b.Svc.ReconcileStudies(context.Background()))
		if all, live := studyTasks(t, b); all != 3 || live != 1 {
			t.Fatalf("%d tasks, %d live, after a pass over a stopped study", all, live)
		}
	})
}
