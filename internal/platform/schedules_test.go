package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

// scheduleStart is the clock's start in the schedule tests: 30 seconds
// past midnight UTC, so an hourly schedule's first firing is at 01:00.
var scheduleStart = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)

// scheduleBundle is the example estate with rita (ml-research) and a
// task of hers to clone.
func scheduleBundle(t *testing.T, b *testBundle) (context.Context, *model.Task) {
	t.Helper()
	b.ApplyExample(t)
	rita := b.User(t, "rita", model.RoleMember, "ml-research")
	task := enqueue(t, b, rita, "fraud-models", "1 A100", "", map[string]string{"lr": "0.1"})
	return rita, task
}

func createSchedule(t *testing.T, b *testBundle, ctx context.Context, in platform.ScheduleInput) *model.Schedule {
	t.Helper()
	sc, err := b.Svc.CreateSchedule(ctx, in)
	if err != nil {
		t.Fatalf("create schedule: %v (code %s)", err, platform.ErrorCode(err))
	}
	return sc
}

func tick(t *testing.T, svc *platform.Service) platform.ScheduleTickResult {
	t.Helper()
	res, err := svc.TickSchedules(context.Background())
	if err != nil {
		t.Fatalf("schedules pass: %v", err)
	}
	return res
}

// clonesOf counts the tasks cloned from a task.
func clonesOf(t *testing.T, b *testBundle, orig *model.Task) []*model.Task {
	t.Helper()
	all, err := b.Store.ListTasks(context.Background(), b.Tenant, store.TaskFilter{}, model.Page{Limit: 1000}, false)
	platformtest.Must(t, err)
	var out []*model.Task
	for _, task := range all {
		if task.ClonedFromID == orig.ID {
			out = append(out, task)
		}
	}
	return out
}

// A cron schedule fires once per period, as its owner, with its
// parameters over the task's, and again after a restart of the service.
func TestCronScheduleFiresOncePerPeriod(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		sc := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("every 5 minutes"), TargetID: ptr(orig.ID),
			Cron: ptr("*/5 * * * *"), Parameters: map[string]string{"lr": "0.2"}})
		if want := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC); sc.NextRunAt == nil || !sc.NextRunAt.Equal(want) {
			t.Fatalf("next run %v, want %v", sc.NextRunAt, want)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("fired %d before it was due", res.Fired)
		}
		b.Clock.Set(time.Date(2026, 1, 1, 0, 5, 1, 0, time.UTC))
		if res := tick(t, b.Svc); res.Fired != 1 {
			t.Fatalf("fired %d when due, want 1", res.Fired)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("fired %d more in the same period", res.Fired)
		}
		clones := clonesOf(t, b, orig)
		if len(clones) != 1 || clones[0].OwnerID != orig.OwnerID || clones[0].Spec.Parameters["lr"] != "0.2" {
			t.Fatalf("clones %+v: want one, rita's, with lr 0.2", clones)
		}
		got, err := b.Svc.Schedule(rita, sc.ID)
		platformtest.Must(t, err)
		if got.LastRunID != clones[0].ID || got.LastResult != "started" || got.NextRunAt == nil ||
			!got.NextRunAt.Equal(time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)) {
			t.Fatalf("schedule after firing: last run %q (%s), next %v", got.LastRunID, got.LastResult, got.NextRunAt)
		}
		// The task says which schedule made it.
		run, of, err := b.Svc.ScheduleOfRun(rita, clones[0].ID)
		platformtest.Must(t, err)
		if run == nil || of == nil || of.ID != sc.ID {
			t.Fatalf("schedule of the clone: %+v %+v", run, of)
		}
		// A restart: a new service over the same store fires the next
		// period once.
		restarted := platform.New(platform.Options{Store: b.Store, Auth: b.Auth, Now: b.Clock.Now, Logger: b.Logger, Vault: b.Vault})
		b.Clock.Set(time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC))
		if res := tick(t, restarted); res.Fired != 1 {
			t.Fatalf("fired %d after the restart, want 1", res.Fired)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("the old service fired %d more", res.Fired)
		}
		if n := len(clonesOf(t, b, orig)); n != 2 {
			t.Fatalf("%d clones after two periods, want 2", n)
		}
	}, platformtest.WithClock(scheduleStart))
}

// After downtime, run-once makes one run for all the firings missed, and
// skip makes none; both wait for the next firing after now.
func TestMissedRunPolicies(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		once := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("hourly once"), TargetID: ptr(orig.ID), Cron: ptr("@hourly")})
		skip := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("hourly skip"), TargetID: ptr(orig.ID),
			Cron: ptr("0 * * * *"), MissedRuns: ptr(model.MissedSkip)})
		// Down from 00:00:30 to 05:30: five firings missed.
		b.Clock.Set(time.Date(2026, 1, 1, 5, 30, 0, 0, time.UTC))
		res := tick(t, b.Svc)
		if res.Fired != 1 || res.Skipped != 1 {
			t.Fatalf("pass after downtime: %+v, want 1 fired (run-once) and 1 skipped", res)
		}
		if n := len(clonesOf(t, b, orig)); n != 1 {
			t.Fatalf("%d runs after downtime, want 1", n)
		}
		next := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
		for _, id := range []string{once.ID, skip.ID} {
			sc, err := b.Svc.Schedule(rita, id)
			platformtest.Must(t, err)
			if sc.NextRunAt == nil || !sc.NextRunAt.Equal(next) {
				t.Errorf("%s: next run %v, want %v", sc.Name, sc.NextRunAt, next)
			}
			if sc.Name == "hourly skip" && !strings.Contains(sc.LastResult, "skipped") {
				t.Errorf("skip's last result %q does not say it skipped", sc.LastResult)
			}
		}
		if res := tick(t, b.Svc); res.Fired+res.Skipped != 0 {
			t.Fatalf("a second pass did %+v", res)
		}
		// On time, skip fires like any schedule.
		b.Clock.Set(next.Add(2 * time.Second))
		if res := tick(t, b.Svc); res.Fired != 2 {
			t.Fatalf("on time: %+v, want both fired", res)
		}
	}, platformtest.WithClock(scheduleStart))
}

// A schedule whose owner lost access pauses with the reason, and starts
// nothing; resuming is refused while the owner still lacks it.
func TestScheduleOfOwnerWhoLostAccessPauses(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		sc := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("nightly"), TargetID: ptr(orig.ID), Cron: ptr("@daily")})
		platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "ml-research", "rita"))
		b.Clock.Set(time.Date(2026, 1, 2, 0, 0, 1, 0, time.UTC))
		if res := tick(t, b.Svc); res.Paused != 1 || res.Fired != 0 {
			t.Fatalf("pass: %+v, want the schedule paused", res)
		}
		got, err := b.Svc.Schedule(rita, sc.ID)
		platformtest.Must(t, err)
		if !got.Paused || !strings.Contains(got.PausedReason, "owner can no longer start it") || got.NextRunAt != nil {
			t.Fatalf("paused %v, reason %q, next %v", got.Paused, got.PausedReason, got.NextRunAt)
		}
		if n := len(clonesOf(t, b, orig)); n != 0 {
			t.Fatalf("%d runs started for an owner without access", n)
		}
		_, err = b.Svc.ResumeSchedule(rita, sc.ID)
		if err == nil {
			t.Fatal("resumed a schedule whose owner still lacks access")
		}
		// A disabled owner: the schedule says so.
		platformtest.Must(t, errOnly(b.Svc.SetGroupMember(b.Admin, "ml-research", "rita", model.GroupRoleMember)))
		_, err = b.Svc.ResumeSchedule(rita, sc.ID)
		platformtest.Must(t, err)
		_, err = b.Svc.UpdateUser(b.Admin, "rita", platform.UserInput{Disabled: ptr(true)})
		platformtest.Must(t, err)
		b.Clock.Set(time.Date(2026, 1, 3, 0, 0, 1, 0, time.UTC))
		if res := tick(t, b.Svc); res.Paused != 1 {
			t.Fatalf("pass with the owner disabled: %+v", res)
		}
		got, err = b.Store.GetSchedule(context.Background(), b.Tenant, sc.ID)
		platformtest.Must(t, err)
		if !got.Paused || !strings.Contains(got.PausedReason, "user disabled") {
			t.Fatalf("paused %v, reason %q: want it to say the user is disabled", got.Paused, got.PausedReason)
		}
	}, platformtest.WithClock(scheduleStart))
}

func errOnly[T any](_ T, err error) error { return err }

// A trigger fires once when a task of the project completes with the tag
// (through the worker's report), and not for untagged or failed tasks.
func TestTagTriggerFiresWhenATaggedTaskCompletes(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		// The task to clone waits no more, so the worker claims the ones
		// this test runs.
		platformtest.Must(t, errOnly(b.Svc.AbortTask(rita, orig.ID, "a template")))
		sc := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("evaluate after training"), TargetID: ptr(orig.ID),
			Trigger: &model.ScheduleTrigger{Event: model.TriggerTaskCompleted, ProjectID: "fraud-models", Tag: "train_v2"}})
		if sc.Trigger.ProjectID == "fraud-models" || sc.Trigger.ProjectID == "" {
			t.Fatalf("the trigger's project is kept as %q, not resolved to an id", sc.Trigger.ProjectID)
		}
		run := func(tags []string, state string) *model.Task {
			task, err := b.Svc.EnqueueTask(rita, platform.EnqueueInput{Name: "train", Project: "fraud-models", ComputeResource: "1 A100",
				Spec: model.TaskSpec{Command: []string{"python", "train.py"}}, Tags: tags})
			platformtest.Must(t, err)
			finishTask(t, b, task, state)
			return task
		}
		b.Clock.Add(time.Minute)
		run([]string{"train-v2"}, agentapi.StateCompleted) // not the tag: '_' is no wildcard
		run([]string{"train_v2"}, agentapi.StateFailed)
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("fired %d for tasks that did not complete with the tag", res.Fired)
		}
		done := run([]string{"nightly", "train_v2"}, agentapi.StateCompleted)
		if res := tick(t, b.Svc); res.Fired != 1 {
			t.Fatalf("fired %d for the tagged task, want 1", res.Fired)
		}
		// Seen again (within the look-back), it does not fire again, also
		// from another service after a restart.
		b.Clock.Add(time.Minute)
		restarted := platform.New(platform.Options{Store: b.Store, Auth: b.Auth, Now: b.Clock.Now, Logger: b.Logger, Vault: b.Vault})
		if res := tick(t, restarted); res.Fired != 0 {
			t.Fatalf("fired %d more for the same task", res.Fired)
		}
		runs, err := b.Svc.ScheduleRuns(rita, sc.ID, 10)
		platformtest.Must(t, err)
		if len(runs) != 1 || runs[0].Key != "task:"+done.ID {
			t.Fatalf("runs %+v, want one for task %s", runs, done.ID)
		}
		if n := len(clonesOf(t, b, orig)); n != 1 {
			t.Fatalf("%d runs started, want 1", n)
		}
	}, platformtest.WithClock(scheduleStart))
}

// finishTask places a queued task, has a worker claim it and report its
// end in state, through the worker protocol.
func finishTask(t *testing.T, b *testBundle, task *model.Task, state string) {
	t.Helper()
	eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test", Now: b.Clock.Now}
	_, err := eng.PassAll(context.Background())
	platformtest.Must(t, err)
	_, secret, err := b.Svc.CreateWorkerCredential(b.Admin, "bare-metal", "w-"+task.ID)
	platformtest.Must(t, err)
	wk, err := b.Svc.AuthenticateWorker(context.Background(), secret)
	platformtest.Must(t, err)
	wctx := identity.WithWorker(context.Background(), wk)
	reg, err := b.Svc.RegisterWorker(wctx, agentapi.RegisterRequest{Hostname: "h-" + task.ID, GPUs: []agentapi.GPU{{Index: 0}}})
	platformtest.Must(t, err)
	a, err := b.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 1, WaitSeconds: 1})
	platformtest.Must(t, err)
	if a == nil || a.TaskID != task.ID {
		t.Fatalf("claimed %+v, want task %s", a, task.ID)
	}
	code := 0
	if state != agentapi.StateCompleted {
		code = 1
	}
	platformtest.Must(t, b.Svc.FinishTask(wctx, a.TaskID, agentapi.FinishRequest{Attempt: a.Attempt, State: state, ExitCode: code}))
	b.Clock.Add(time.Second)
}

// Tags are trimmed and deduplicated at enqueue, kept on clone, and a tag
// with a space is refused with what to use.
func TestTaskTagsAreKeptOnClone(t *testing.T) {
	b := &testBundle{platformtest.SQLite(t)}
	b.ApplyExample(t)
	rita := b.User(t, "rita", model.RoleMember, "ml-research")
	in := platform.EnqueueInput{Name: "train", Project: "fraud-models", ComputeResource: "1 A100",
		Spec: model.TaskSpec{Command: []string{"python", "train.py"}}, Tags: []string{" nightly ", "nightly", "v2"}}
	task, err := b.Svc.EnqueueTask(rita, in)
	platformtest.Must(t, err)
	if strings.Join(task.Tags, ",") != "nightly,v2" {
		t.Fatalf("tags %q, want [nightly v2]", task.Tags)
	}
	clone, err := b.Svc.CloneTask(rita, task.ID, platform.CloneInput{})
	platformtest.Must(t, err)
	if got, _ := b.Svc.Task(rita, clone.ID); strings.Join(got.Tags, ",") != "nightly,v2" {
		t.Fatalf("the clone's tags %q", got.Tags)
	}
	in.Tags = []string{"not ok"}
	_, err = b.Svc.EnqueueTask(rita, in)
	platformtest.WantError(t, err, platform.CodeInvalid, "tag", "letters, digits")
}
