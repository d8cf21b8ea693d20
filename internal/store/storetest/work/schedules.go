package work

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Schedules checks schedules, the conditional writes that make a firing
// happen once, their firings, and the finished-task reads triggers match.
func Schedules(t *testing.T, setup harness.Setup) {
	scheduleFirings(t, setup)
	triggerTaskReads(t, setup)
	triggerArtifactAndRunReads(t, setup)
}

// scheduleFirings checks a schedule's record and its firings: claimed once,
// only while due and not paused, and recorded once.
func scheduleFirings(t *testing.T, setup harness.Setup) {
	setup.Run(t, "a schedule round-trips, stays in its tenant, and its name is unique per owner", func(t *testing.T, b *harness.Bundle) {
		owner := b.User(t)
		next := b.At(5)
		sc := &model.Schedule{TenantID: b.Tenant.ID, OwnerID: owner.ID, Name: "nightly", TargetKind: model.ScheduleTargetTask,
			TargetID: "t1", Parameters: map[string]string{"lr": "0.1"}, Cron: "0 3 * * *", MissedRuns: model.MissedRunOnce,
			NextRunAt: &next, CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.Must(t, b.Store.CreateSchedule(b.Ctx, sc))
		got, err := b.Store.GetSchedule(b.Ctx, b.Tenant.ID, sc.ID)
		harness.Must(t, err)
		if got.Name != "nightly" || got.Parameters["lr"] != "0.1" || got.Trigger != nil || got.NextRunAt == nil || !got.NextRunAt.Equal(harness.Norm(next)) {
			t.Fatalf("schedule %s", harness.Show(got))
		}
		_, err = b.Store.GetSchedule(b.Ctx, b.Other.ID, sc.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		dup := &model.Schedule{TenantID: b.Tenant.ID, OwnerID: owner.ID, Name: "nightly", TargetKind: "task", TargetID: "t2",
			MissedRuns: model.MissedSkip, CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.WantErr(t, b.Store.CreateSchedule(b.Ctx, dup), store.ErrConflict)

		trig := &model.Schedule{TenantID: b.Tenant.ID, OwnerID: owner.ID, Name: "after", TargetKind: "task", TargetID: "t1",
			Trigger: &model.ScheduleTrigger{Event: model.TriggerTaskCompleted, ProjectID: "p", Tag: "x"}, MissedRuns: model.MissedRunOnce,
			CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.Must(t, b.Store.CreateSchedule(b.Ctx, trig))
		list, err := b.Store.ListSchedules(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(list) != 2 || list[0].Name != "after" || list[0].Trigger == nil || list[0].Trigger.Tag != "x" {
			t.Fatalf("list %s", harness.Show(list))
		}
		harness.Must(t, b.Store.DeleteSchedule(b.Ctx, b.Tenant.ID, trig.ID))
		harness.WantErr(t, b.Store.DeleteSchedule(b.Ctx, b.Other.ID, sc.ID), store.ErrNotFound)
	})

	setup.Run(t, "a firing is claimed once, only while due and not paused, and recorded once", func(t *testing.T, b *harness.Bundle) {
		owner := b.User(t)
		due, next := b.At(5), b.At(10)
		sc := &model.Schedule{TenantID: b.Tenant.ID, OwnerID: owner.ID, Name: "m", TargetKind: "task", TargetID: "t",
			Cron: "*/5 * * * *", MissedRuns: model.MissedRunOnce, NextRunAt: &due, CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.Must(t, b.Store.CreateSchedule(b.Ctx, sc))
		claim := *sc
		claim.NextRunAt, claim.LastRunAt, claim.LastRunID, claim.LastResult = &next, &due, "task-1", "started"
		won, err := b.Store.ClaimScheduleFiring(b.Ctx, &claim, due)
		harness.Must(t, err)
		again, err := b.Store.ClaimScheduleFiring(b.Ctx, &claim, due)
		harness.Must(t, err)
		if !won || again {
			t.Fatalf("claims: %v then %v, want true then false", won, again)
		}
		run := &model.ScheduleRun{TenantID: b.Tenant.ID, ScheduleID: sc.ID, Key: "at:1", TargetKind: "task", RunID: "task-1", At: b.Now}
		first, err := b.Store.RecordScheduleRun(b.Ctx, run)
		harness.Must(t, err)
		second, err := b.Store.RecordScheduleRun(b.Ctx, run)
		harness.Must(t, err)
		if !first || second {
			t.Fatalf("records: %v then %v, want true then false", first, second)
		}
		byRun, err := b.Store.ScheduleRunsOf(b.Ctx, b.Tenant.ID, []string{"task-1", "none"})
		harness.Must(t, err)
		if len(byRun) != 1 || byRun["task-1"].ScheduleID != sc.ID {
			t.Fatalf("runs of task-1: %s", harness.Show(byRun))
		}
		_, err = b.Store.GetScheduleRun(b.Ctx, b.Tenant.ID, sc.ID, "at:2")
		harness.WantErr(t, err, store.ErrNotFound)

		paused, err := b.Store.PauseScheduleIf(b.Ctx, b.Tenant.ID, sc.ID, "owner disabled", b.At(6))
		harness.Must(t, err)
		pausedAgain, err := b.Store.PauseScheduleIf(b.Ctx, b.Tenant.ID, sc.ID, "other", b.At(6))
		harness.Must(t, err)
		if !paused || pausedAgain {
			t.Fatalf("pauses: %v then %v", paused, pausedAgain)
		}
		got, err := b.Store.GetSchedule(b.Ctx, b.Tenant.ID, sc.ID)
		harness.Must(t, err)
		if !got.Paused || got.PausedReason != "owner disabled" || got.NextRunAt != nil || got.LastRunID != "task-1" {
			t.Fatalf("after pause %s", harness.Show(got))
		}
		active, err := b.Store.ListActiveSchedules(b.Ctx)
		harness.Must(t, err)
		for _, a := range active {
			if a.ID == sc.ID {
				t.Fatal("a paused schedule is listed as active")
			}
		}
	})
}

// triggerTaskReads checks a trigger's check, which moves on only from where
// it was, and the finished tasks a trigger reads.
func triggerTaskReads(t *testing.T, setup harness.Setup) {
	setup.Run(t, "the check of a trigger moves on only from where it was", func(t *testing.T, b *harness.Bundle) {
		owner := b.User(t)
		sc := &model.Schedule{TenantID: b.Tenant.ID, OwnerID: owner.ID, Name: "tr", TargetKind: "task", TargetID: "t",
			Trigger: &model.ScheduleTrigger{Event: model.TriggerTaskCompleted, ProjectID: "p", Tag: "x"}, MissedRuns: model.MissedRunOnce,
			CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.Must(t, b.Store.CreateSchedule(b.Ctx, sc))
		ok, err := b.Store.AdvanceScheduleCheck(b.Ctx, b.Tenant.ID, sc.ID, nil, b.At(1))
		harness.Must(t, err)
		stale, err := b.Store.AdvanceScheduleCheck(b.Ctx, b.Tenant.ID, sc.ID, nil, b.At(2))
		harness.Must(t, err)
		at1 := b.At(1)
		moved, err := b.Store.AdvanceScheduleCheck(b.Ctx, b.Tenant.ID, sc.ID, &at1, b.At(2))
		harness.Must(t, err)
		if !ok || stale || !moved {
			t.Fatalf("advances: %v %v %v, want true false true", ok, stale, moved)
		}
		harness.Must(t, b.Store.NoteScheduleRun(b.Ctx, b.Tenant.ID, sc.ID, b.At(2), "task-9", "started", ""))
		got, err := b.Store.GetSchedule(b.Ctx, b.Tenant.ID, sc.ID)
		harness.Must(t, err)
		if got.CheckedAt == nil || !got.CheckedAt.Equal(harness.Norm(b.At(2))) || got.LastRunID != "task-9" {
			t.Fatalf("after the check %s", harness.Show(got))
		}
	})

	setup.Run(t, "finished tasks are listed by project, tag and status, with LIKE's wildcards taken literally", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		owner := b.User(t)
		pr := b.Project(t)
		finish := func(tags []string, status model.TaskStatus, at time.Time) *model.Task {
			return b.Task(t, q, owner, func(tk *model.Task) {
				tk.ProjectID, tk.Tags, tk.Status, tk.FinishedAt = pr.ID, tags, status, &at
			})
		}
		want := finish([]string{"a", "train_v2"}, model.TaskCompleted, b.At(2))
		finish([]string{"trainXv2"}, model.TaskCompleted, b.At(2))
		finish([]string{"train_v2"}, model.TaskFailed, b.At(2))
		finish([]string{"train_v2"}, model.TaskCompleted, b.At(9))
		got, err := b.Store.ListFinishedTasks(b.Ctx, b.Tenant.ID, pr.ID, "train_v2", model.TaskCompleted, b.At(1), b.At(5), 10)
		harness.Must(t, err)
		if len(got) != 1 || got[0].ID != want.ID || len(got[0].Tags) != 2 {
			t.Fatalf("finished %s, want task %s with its tags", harness.Show(got), want.ID)
		}
		none, err := b.Store.ListFinishedTasks(b.Ctx, b.Other.ID, pr.ID, "train_v2", model.TaskCompleted, b.At(0), b.At(10), 10)
		harness.Must(t, err)
		if len(none) != 0 {
			t.Fatalf("another tenant's read found %d", len(none))
		}
	})
}

// triggerArtifactAndRunReads checks the published artifacts and finished
// pipeline runs a trigger reads, and what it sees of them.
func triggerArtifactAndRunReads(t *testing.T, setup harness.Setup) {
	setup.Run(t, "published artifacts are listed by name, window, project and the tasks' groups", func(t *testing.T, b *harness.Bundle) {
		q, other := b.Queue(t), b.Queue(t)
		owner, stranger := b.User(t), b.User(t)
		pr := b.Project(t)
		publish := func(task *model.Task, name string, at time.Time) *model.Artifact {
			a := &model.Artifact{TenantID: b.Tenant.ID, TaskID: task.ID, Name: name, Pointer: "s3://b/" + name, CreatedAt: at}
			harness.Must(t, b.Store.CreateArtifact(b.Ctx, a))
			return a
		}
		mine := b.Task(t, q, owner, func(tk *model.Task) { tk.ProjectID = pr.ID })
		elsewhere := b.Task(t, q, owner)
		theirs := b.Task(t, other, stranger, func(tk *model.Task) { tk.ProjectID = pr.ID })
		first := publish(mine, "model", b.At(2))
		second := publish(elsewhere, "model", b.At(3))
		publish(mine, "metrics", b.At(2))
		publish(theirs, "model", b.At(3))
		publish(b.Task(t, q, owner), "model", b.At(9))
		list := func(tenantID string, f store.PublishedArtifactFilter) []string {
			got, err := b.Store.ListPublishedArtifacts(b.Ctx, tenantID, f, b.At(1), b.At(5), 10)
			harness.Must(t, err)
			return harness.Names(got, func(a *model.Artifact) string { return a.ID })
		}
		groups := []string{q.Group.ID}
		harness.CheckEqual(t, "the owner's group's models", list(b.Tenant.ID, store.PublishedArtifactFilter{Name: "model",
			RestrictToGroups: true, GroupIDs: groups, VisibleToUserID: owner.ID}), []string{first.ID, second.ID})
		harness.CheckEqual(t, "of the project", list(b.Tenant.ID, store.PublishedArtifactFilter{Name: "model", ProjectID: pr.ID,
			RestrictToGroups: true, GroupIDs: groups}), []string{first.ID})
		harness.CheckEqual(t, "unrestricted (an admin)", len(list(b.Tenant.ID, store.PublishedArtifactFilter{Name: "model"})), 3)
		harness.CheckEqual(t, "a user in no group sees their own only", list(b.Tenant.ID, store.PublishedArtifactFilter{Name: "model",
			RestrictToGroups: true, VisibleToUserID: owner.ID}), []string{first.ID, second.ID})
		harness.CheckEqual(t, "another tenant", len(list(b.Other.ID, store.PublishedArtifactFilter{Name: "model"})), 0)
		got, err := b.Store.ListPublishedArtifacts(b.Ctx, b.Tenant.ID, store.PublishedArtifactFilter{Name: "model"}, b.At(1), b.At(5), 1)
		harness.Must(t, err)
		if len(got) != 1 || got[0].ID != first.ID || !got[0].CreatedAt.Equal(harness.Norm(b.At(2))) {
			t.Fatalf("the first of the window %s, want %s at %v", harness.Show(got), first.ID, b.At(2))
		}
	})

	setup.Run(t, "finished pipeline runs are listed by end time, name, project, state and group", func(t *testing.T, b *harness.Bundle) {
		run := func(name, project, group string, state model.PipelineRunState, at time.Time) *model.PipelineRun {
			r := &model.PipelineRun{TenantID: b.Tenant.ID, ProjectID: project, GroupID: group, OwnerID: "u1", Name: name,
				Definition: model.PipelineDefinition{Name: name}, State: model.PipelineRunRunning, CreatedAt: b.Now, UpdatedAt: b.Now}
			harness.Must(t, b.Store.CreatePipelineRun(b.Ctx, r))
			if state.Final() {
				ok, err := b.Store.SetPipelineRunState(b.Ctx, b.Tenant.ID, r.ID, []model.PipelineRunState{model.PipelineRunRunning}, state, "done", at)
				harness.Must(t, err)
				if !ok {
					t.Fatalf("run %s did not end", r.ID)
				}
			}
			return r
		}
		late := run("nightly", "p1", "g1", model.PipelineRunFailed, b.At(4))
		early := run("nightly", "p1", "g1", model.PipelineRunCompleted, b.At(2))
		run("nightly", "p1", "g1", model.PipelineRunRunning, b.At(2))
		run("nightly", "p2", "g1", model.PipelineRunCompleted, b.At(2))
		run("weekly", "p1", "g1", model.PipelineRunCompleted, b.At(2))
		run("nightly", "p1", "g1", model.PipelineRunCompleted, b.At(7))
		hidden := run("nightly", "p1", "g2", model.PipelineRunAborted, b.At(3))
		list := func(tenantID string, f store.PipelineRunFilter) []string {
			got, err := b.Store.ListFinishedPipelineRuns(b.Ctx, tenantID, f, b.At(1), b.At(5), 10)
			harness.Must(t, err)
			return harness.Names(got, func(r *model.PipelineRun) string { return r.ID })
		}
		harness.CheckEqual(t, "nightly of p1", list(b.Tenant.ID, store.PipelineRunFilter{ProjectID: "p1", Name: "nightly"}),
			[]string{early.ID, hidden.ID, late.ID})
		harness.CheckEqual(t, "in group g1", list(b.Tenant.ID, store.PipelineRunFilter{ProjectID: "p1", Name: "nightly",
			RestrictToGroups: true, GroupIDs: []string{"g1"}}), []string{early.ID, late.ID})
		harness.CheckEqual(t, "completed only", list(b.Tenant.ID, store.PipelineRunFilter{ProjectID: "p1", Name: "nightly",
			States: []model.PipelineRunState{model.PipelineRunCompleted}}), []string{early.ID})
		harness.CheckEqual(t, "another tenant", len(list(b.Other.ID, store.PipelineRunFilter{ProjectID: "p1", Name: "nightly"})), 0)
	})
}
