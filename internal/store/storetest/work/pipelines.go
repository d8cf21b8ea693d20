package work

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Pipelines checks pipeline runs and their steps: conditional writes (the
// pipeline controller's only way to move a step), the step cache lookup
// and the link from a task to its step.
func Pipelines(t *testing.T, setup harness.Setup) {
	pipelineRunsAndSteps(t, setup)
	pipelineCacheAndLinks(t, setup)
}

// newPipelineRun is a pending run of a two-step pipeline (prepare, then
// train, retried twice) of the bundle's tenant.
func newPipelineRun(b *harness.Bundle, name string) *model.PipelineRun {
	def := model.PipelineDefinition{Name: name, Params: map[string]string{"lr": "0.1"},
		Steps: []model.PipelineStepDef{{Name: "prepare", ComputeResource: "1 GPU", Spec: model.TaskSpec{Command: []string{"echo"}}},
			{Name: "train", ComputeResource: "1 GPU", DependsOn: []string{"prepare"}, Retry: 2}}}
	return &model.PipelineRun{TenantID: b.Tenant.ID, ProjectID: "p1", GroupID: "g1", OwnerID: "u1", Name: name, Definition: def,
		Params: map[string]string{"lr": "0.1"}, State: model.PipelineRunPending, CreatedAt: b.Now, UpdatedAt: b.Now,
		Steps: []*model.PipelineStep{{Name: "prepare", Position: 0, State: model.StepPending, UpdatedAt: b.Now},
			{Name: "train", Position: 1, State: model.StepPending, UpdatedAt: b.Now}}}
}

// pipelineRunsAndSteps checks a run with its steps, and that a step moves
// only from the state and attempt it was read in (the controller's
// conditional writes).
func pipelineRunsAndSteps(t *testing.T, setup harness.Setup) {
	setup.Run(t, "a run round-trips with its steps and stays in its tenant", func(t *testing.T, b *harness.Bundle) {
		r := newPipelineRun(b, "fraud")
		harness.Must(t, b.Store.CreatePipelineRun(b.Ctx, r))
		got, err := b.Store.GetPipelineRun(b.Ctx, b.Tenant.ID, r.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "definition", got.Definition, r.Definition)
		if len(got.Steps) != 2 || got.Steps[1].Name != "train" || got.Steps[0].TaskIDs == nil || got.State != model.PipelineRunPending {
			t.Fatalf("run %s", harness.Show(got))
		}
		_, err = b.Store.GetPipelineRun(b.Ctx, b.Other.ID, r.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		active, err := b.Store.ListActivePipelineRuns(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "active", active, []string{r.ID})
		other, err := b.Store.ListActivePipelineRuns(b.Ctx, b.Other.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "active in another tenant", len(other), 0)
	})

	setup.Run(t, "a step moves only from the state and attempt it was read in", func(t *testing.T, b *harness.Bundle) {
		r := newPipelineRun(b, "fraud")
		harness.Must(t, b.Store.CreatePipelineRun(b.Ctx, r))
		st := *r.Steps[0]
		st.State, st.TaskID, st.TaskIDs, st.Attempts, st.UpdatedAt = model.StepQueued, "t1", []string{"t1"}, 1, b.At(1)
		ok, err := b.Store.UpdatePipelineStep(b.Ctx, b.Tenant.ID, &st, model.StepPending, 0)
		harness.Must(t, err)
		if !ok {
			t.Fatal("the first move did not apply")
		}
		// A second controller that read the step as pending loses.
		st2 := *r.Steps[0]
		st2.State, st2.TaskID, st2.Attempts = model.StepQueued, "t2", 1
		ok, err = b.Store.UpdatePipelineStep(b.Ctx, b.Tenant.ID, &st2, model.StepPending, 0)
		harness.Must(t, err)
		if ok {
			t.Fatal("a move from a stale state applied")
		}
		ok, err = b.Store.UpdatePipelineStep(b.Ctx, b.Other.ID, &st, model.StepQueued, 1)
		harness.Must(t, err)
		if ok {
			t.Fatal("a move in another tenant applied")
		}
		got, err := b.Store.GetPipelineRun(b.Ctx, b.Tenant.ID, r.ID)
		harness.Must(t, err)
		if got.Steps[0].TaskID != "t1" || got.Steps[0].Attempts != 1 || len(got.Steps[0].TaskIDs) != 1 {
			t.Fatalf("step %s", harness.Show(got.Steps[0]))
		}

		moved, err := b.Store.SetPipelineRunState(b.Ctx, b.Tenant.ID, r.ID, []model.PipelineRunState{model.PipelineRunPending}, model.PipelineRunRunning, "running", b.At(2))
		harness.Must(t, err)
		again, err := b.Store.SetPipelineRunState(b.Ctx, b.Tenant.ID, r.ID, []model.PipelineRunState{model.PipelineRunPending}, model.PipelineRunAborted, "x", b.At(2))
		harness.Must(t, err)
		if !moved || again {
			t.Fatalf("run state moves: %v then %v", moved, again)
		}
		done, err := b.Store.SetPipelineRunState(b.Ctx, b.Tenant.ID, r.ID, []model.PipelineRunState{model.PipelineRunRunning}, model.PipelineRunCompleted, "done", b.At(3))
		harness.Must(t, err)
		got, err = b.Store.GetPipelineRun(b.Ctx, b.Tenant.ID, r.ID)
		harness.Must(t, err)
		if !done || got.State != model.PipelineRunCompleted || got.FinishedAt == nil || !got.FinishedAt.Equal(harness.Norm(b.At(3))) {
			t.Fatalf("run %s", harness.Show(got))
		}
	})
}

// pipelineCacheAndLinks checks the step cache's lookup and a task's link
// to its step.
func pipelineCacheAndLinks(t *testing.T, setup harness.Setup) {
	setup.Run(t, "the cache finds a completed step of the same pipeline, name and key", func(t *testing.T, b *harness.Bundle) {
		first, second, otherName := newPipelineRun(b, "fraud"), newPipelineRun(b, "fraud"), newPipelineRun(b, "vision")
		for _, r := range []*model.PipelineRun{first, second, otherName} {
			harness.Must(t, b.Store.CreatePipelineRun(b.Ctx, r))
		}
		done := func(r *model.PipelineRun, key string) {
			at := b.At(1)
			st := *r.Steps[0]
			st.State, st.TaskID, st.CacheKey, st.FinishedAt = model.StepCompleted, "task-of-"+r.ID, key, &at
			if ok, err := b.Store.UpdatePipelineStep(b.Ctx, b.Tenant.ID, &st, model.StepPending, 0); err != nil || !ok {
				t.Fatalf("complete a step: %v %v", ok, err)
			}
		}
		done(first, "k1")
		done(otherName, "k2")
		got, err := b.Store.FindCachedPipelineStep(b.Ctx, b.Tenant.ID, "p1", "fraud", "prepare", "k1", second.ID)
		harness.Must(t, err)
		if got.RunID != first.ID || got.TaskID != "task-of-"+first.ID {
			t.Fatalf("cached %s", harness.Show(got))
		}
		for _, miss := range [][]string{{"fraud", "prepare", "k2"}, {"fraud", "train", "k1"}, {"vision", "prepare", "k1"}} {
			_, err := b.Store.FindCachedPipelineStep(b.Ctx, b.Tenant.ID, "p1", miss[0], miss[1], miss[2], second.ID)
			harness.WantErr(t, err, store.ErrNotFound)
		}
		_, err = b.Store.FindCachedPipelineStep(b.Ctx, b.Tenant.ID, "p1", "fraud", "prepare", "k1", first.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.FindCachedPipelineStep(b.Ctx, b.Other.ID, "p1", "fraud", "prepare", "k1", second.ID)
		harness.WantErr(t, err, store.ErrNotFound)

		runs, err := b.Store.ListPipelineRuns(b.Ctx, b.Tenant.ID, store.PipelineRunFilter{Name: "fraud"}, store.Page{})
		harness.Must(t, err)
		if len(runs) != 2 || runs[0].ID != second.ID {
			t.Fatalf("runs of fraud, newest first: %s", harness.Show(runs))
		}
		hidden, err := b.Store.ListPipelineRuns(b.Ctx, b.Tenant.ID, store.PipelineRunFilter{RestrictToGroups: true, GroupIDs: []string{"g2"}}, store.Page{})
		harness.Must(t, err)
		harness.CheckEqual(t, "runs of another group", len(hidden), 0)
		page, err := b.Store.ListPipelineRuns(b.Ctx, b.Tenant.ID, store.PipelineRunFilter{}, store.Page{After: otherName.ID, Limit: 1})
		harness.Must(t, err)
		if len(page) != 1 || page[0].ID != second.ID {
			t.Fatalf("the page after the newest: %s", harness.Show(page))
		}
	})

	setup.Run(t, "a task's link to its step is recorded once", func(t *testing.T, b *harness.Bundle) {
		r := newPipelineRun(b, "fraud")
		harness.Must(t, b.Store.CreatePipelineRun(b.Ctx, r))
		l := &model.PipelineTaskLink{TenantID: b.Tenant.ID, TaskID: "t1", RunID: r.ID, Step: "train", Attempt: 2}
		harness.Must(t, b.Store.LinkPipelineTask(b.Ctx, l))
		harness.Must(t, b.Store.LinkPipelineTask(b.Ctx, l))
		got, err := b.Store.GetPipelineTaskLink(b.Ctx, b.Tenant.ID, "t1")
		harness.Must(t, err)
		harness.CheckEqual(t, "link", *got, *l)
		_, err = b.Store.GetPipelineTaskLink(b.Ctx, b.Other.ID, "t1")
		harness.WantErr(t, err, store.ErrNotFound)
	})
}
