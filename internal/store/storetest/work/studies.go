package work

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Studies checks hyperparameter searches: a study round-trips in its
// tenant, the controller's versioned write refuses a stale version, and a
// trial number is taken once.
func Studies(t *testing.T, setup harness.Setup) {
	spec := model.StudySpec{Strategy: model.StrategyRandom, Seed: 7, Objective: "accuracy", Direction: "max", MaxConcurrent: 2,
		Budget: model.StudyBudget{Trials: 8, GPUHours: 1.5},
		Space:  []model.SearchParam{{Name: "lr", Kind: model.ParamLogUniform, Lo: 1e-4, Hi: 1e-1}, {Name: "opt", Kind: model.ParamChoice, Values: []string{"sgd", "adam"}}}}

	setup.Run(t, "a study and its trials round-trip, stay in their tenant, and a stale write is a conflict", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		owner := b.User(t)
		pr := b.Project(t)
		base := b.Task(t, q, owner)
		s := &model.Study{TenantID: b.Tenant.ID, ProjectID: pr.ID, OwnerID: owner.ID, GroupID: q.Group.ID, ComputeResourceID: q.CR.ID,
			Name: "sweep", BaseTaskID: base.ID, Spec: spec, State: model.StudyRunning, CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.Must(t, b.Store.CreateStudy(b.Ctx, s))
		got, err := b.Store.GetStudy(b.Ctx, b.Tenant.ID, s.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "spec", got.Spec, spec)
		_, err = b.Store.GetStudy(b.Ctx, b.Other.ID, s.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		running, err := b.Store.ListRunningStudies(b.Ctx)
		harness.Must(t, err)
		if !containsStudy(running, s.ID) {
			t.Fatalf("running studies miss %s", s.ID)
		}

		trial := &model.StudyTrial{TenantID: b.Tenant.ID, StudyID: s.ID, Number: 0, Params: map[string]string{"lr": "0.01"}, State: model.TrialPending, CreatedAt: b.Now}
		harness.Must(t, b.Store.CreateStudyTrial(b.Ctx, trial))
		harness.WantErr(t, b.Store.CreateStudyTrial(b.Ctx, &model.StudyTrial{TenantID: b.Tenant.ID, StudyID: s.ID, Number: 0, State: model.TrialPending, CreatedAt: b.Now}), store.ErrConflict)
		task := b.Task(t, q, owner)
		ok, err := b.Store.SetStudyTrialTask(b.Ctx, b.Tenant.ID, s.ID, 0, task.ID)
		harness.Must(t, err)
		again, err := b.Store.SetStudyTrialTask(b.Ctx, b.Tenant.ID, s.ID, 0, task.ID)
		harness.Must(t, err)
		if !ok || again {
			t.Fatalf("linking a trial: first %v (want true), second %v (want false)", ok, again)
		}
		byTask, err := b.Store.GetStudyTrialByTask(b.Ctx, b.Tenant.ID, task.ID)
		harness.Must(t, err)
		if byTask.StudyID != s.ID || byTask.Number != 0 || byTask.State != model.TrialRunning || byTask.Params["lr"] != "0.01" {
			t.Fatalf("trial by task %s", harness.Show(byTask))
		}
		_, err = b.Store.GetStudyTrialByTask(b.Ctx, b.Other.ID, task.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		v := 0.93
		byTask.State, byTask.Objective, byTask.ObjectiveStep, byTask.Rung, byTask.Reason, byTask.EndedAt = model.TrialStoppedEarly, &v, 3, 1, "stopped early", harness.Ptr(b.At(2))
		harness.Must(t, b.Store.UpdateStudyTrial(b.Ctx, byTask))
		trials, err := b.Store.ListStudyTrials(b.Ctx, b.Tenant.ID, s.ID)
		harness.Must(t, err)
		if len(trials) != 1 || trials[0].Objective == nil || *trials[0].Objective != 0.93 || trials[0].Rung != 1 || trials[0].EndedAt == nil {
			t.Fatalf("trials %s", harness.Show(trials))
		}

		stale := *got
		got.State, got.BestTaskID, got.Reason, got.UpdatedAt = model.StudyCompleted, task.ID, "done", b.At(3)
		harness.Must(t, b.Store.UpdateStudy(b.Ctx, got))
		if got.Version != 1 {
			t.Fatalf("version after a write: %d, want 1", got.Version)
		}
		stale.State = model.StudyStopped
		harness.WantErr(t, b.Store.UpdateStudy(b.Ctx, &stale), store.ErrConflict)
		list, err := b.Store.ListStudies(b.Ctx, b.Tenant.ID, pr.ID)
		harness.Must(t, err)
		if len(list) != 1 || list[0].State != model.StudyCompleted || list[0].BestTaskID != task.ID {
			t.Fatalf("list %s", harness.Show(list))
		}
		running, err = b.Store.ListRunningStudies(b.Ctx)
		harness.Must(t, err)
		if containsStudy(running, s.ID) {
			t.Fatalf("a completed study is listed as running")
		}
	})
}

func containsStudy(list []*model.Study, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}
