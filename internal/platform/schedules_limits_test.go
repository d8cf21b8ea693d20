package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// Issue 39 defect 9: sub-minute and runaway schedules.

// A schedule that would fire more often than the minimum interval (a
// minute, by default) is refused with what to write instead, on create
// and on update: @every below it, zero or negative, and a cron with
// seconds. A tenant admin may raise the tenant's minimum, not lower it
// below the server's; a schedule saved before that fires no more and is
// paused with the reason.
func TestASubMinuteScheduleIsRefused(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		create := func(name, cron string) (*model.Schedule, error) {
			return b.Svc.CreateSchedule(rita, platform.ScheduleInput{Name: ptr(name), TargetID: ptr(orig.ID), Cron: ptr(cron)})
		}
		for _, cron := range []string{"@every 1s", "@every 1ms", "@every 59s"} {
			_, err := create("fast", cron)
			platformtest.WantError(t, err, platform.CodeInvalid, "fires every", "at least 1m")
		}
		for _, cron := range []string{"@every 0s", "@every -1s"} {
			_, err := create("never", cron)
			platformtest.WantError(t, err, platform.CodeInvalid, "a positive interval", "at least 1m")
		}
		_, err := create("seconds", "*/10 * * * * *")
		platformtest.WantError(t, err, platform.CodeInvalid, "seconds are not supported")
		every := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("every minute"), TargetID: ptr(orig.ID), Cron: ptr("* * * * *")})
		createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("@every 1m"), TargetID: ptr(orig.ID), Cron: ptr("@every 1m")})
		_, err = b.Svc.UpdateSchedule(rita, every.ID, platform.ScheduleInput{Cron: ptr("@every 30s")})
		platformtest.WantError(t, err, platform.CodeInvalid, "fires every 30s", "at least 1m")

		// The tenant's admin raises the minimum to 5 minutes; a member
		// may not, and no one may go below the server's.
		_, err = b.Svc.SetScheduleMinimumInterval(rita, "5m")
		platformtest.WantError(t, err, platform.CodeForbidden, "admin")
		_, err = b.Svc.SetScheduleMinimumInterval(b.Admin, "30s")
		platformtest.WantError(t, err, platform.CodeInvalid, "at least 1m")
		_, err = b.Svc.SetScheduleMinimumInterval(b.Admin, "soon")
		platformtest.WantError(t, err, platform.CodeInvalid, "a duration")
		got, err := b.Svc.SetScheduleMinimumInterval(b.Admin, "5m")
		platformtest.Must(t, err)
		if got != 5*time.Minute {
			t.Fatalf("the minimum reads %s after setting 5m", got)
		}
		_, err = create("each minute", "* * * * *")
		platformtest.WantError(t, err, platform.CodeInvalid, "fires every 1m", "at least 5m")
		// 23:59 and 00:00 are a minute apart.
		_, err = create("around midnight", "0,59 0,23 * * *")
		platformtest.WantError(t, err, platform.CodeInvalid, "fires every 1m", "at least 5m")
		createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("every 5 minutes"), TargetID: ptr(orig.ID), Cron: ptr("*/5 * * * *")})
		createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("nightly"), TargetID: ptr(orig.ID), Cron: ptr("@daily")})

		// The schedule saved under the old minimum is paused, with why.
		b.Clock.Add(2 * time.Minute)
		res := tick(t, b.Svc)
		if res.Paused != 2 {
			t.Fatalf("the pass paused %d, want 2 (every minute, @every 1m)", res.Paused)
		}
		got2, err := b.Svc.Schedule(rita, every.ID)
		platformtest.Must(t, err)
		if !got2.Paused || !containsAll(got2.PausedReason, "fires every 1m", "at least 5m") {
			t.Fatalf("every minute: paused %v (%q), want paused with the minimum", got2.Paused, got2.PausedReason)
		}
		// Back to the server's minimum.
		if got, err = b.Svc.SetScheduleMinimumInterval(b.Admin, ""); err != nil || got != time.Minute {
			t.Fatalf("reset: %s %v, want 1m", got, err)
		}
		if got, err := b.Svc.ScheduleMinimumInterval(rita); err != nil || got != time.Minute {
			t.Fatalf("the minimum reads %s %v, want 1m", got, err)
		}
	}, platformtest.WithClock(scheduleStart))
}

// A user may own at most so many schedules, and a project hold at most so
// many, counted whoever owns them; the refusal says which cap and how to
// make room. A deleted schedule frees its place.
func TestSchedulesPerUserAndProjectAreCapped(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		sam := b.User(t, "sam", model.RoleMember, "ml-research")
		sams := enqueue(t, b, sam, "fraud-models", "1 A100", "", nil)
		evals := enqueue(t, b, rita, "shared-eval", "1 GPU", "ml-research", nil)
		mk := func(ctx context.Context, name, target string) (*model.Schedule, error) {
			return b.Svc.CreateSchedule(ctx, platform.ScheduleInput{Name: ptr(name), TargetID: ptr(target), Cron: ptr("@hourly")})
		}
		first, err := mk(rita, "r1", orig.ID)
		platformtest.Must(t, err)
		platformtest.Must(t, errOnly(mk(rita, "r2", orig.ID)))
		_, err = mk(rita, "r3", evals.ID)
		platformtest.WantError(t, err, platform.CodeInvalid, "you have 2 schedules", "at most 2", "delete one")
		platformtest.Must(t, errOnly(mk(sam, "s1", sams.ID)))
		_, err = mk(sam, "s2", sams.ID)
		platformtest.WantError(t, err, platform.CodeInvalid, "project fraud-models has 3 schedules", "at most 3")
		// Another project has room.
		platformtest.Must(t, errOnly(mk(sam, "s2", evals.ID)))
		// Moving a schedule into the full project is refused too.
		s2, err := b.Svc.Schedules(sam)
		platformtest.Must(t, err)
		var moving *model.Schedule
		for _, sc := range s2 {
			if sc.Name == "s2" {
				moving = sc
			}
		}
		_, err = b.Svc.UpdateSchedule(sam, moving.ID, platform.ScheduleInput{TargetID: ptr(sams.ID)})
		platformtest.WantError(t, err, platform.CodeInvalid, "project fraud-models has 3 schedules")
		platformtest.Must(t, errOnly(b.Svc.DeleteSchedule(rita, first.ID)))
		platformtest.Must(t, errOnly(mk(rita, "r3", evals.ID)))
	}, platformtest.WithClock(scheduleStart),
		platformtest.WithScheduleLimits(platform.ScheduleLimits{PerUser: 2, PerProject: 3}))
}

// A task.completed trigger whose target's clones keep its tag feeds
// itself: each clone that completes fires it again. It starts at most so
// many runs an hour; past the cap a firing is refused and the schedule
// says why, and an hour later it fires again.
func TestATriggerThatFeedsItselfStopsAtItsCap(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		rita := b.User(t, "rita", model.RoleMember, "ml-research")
		loop := func() *model.Task {
			task, err := b.Svc.EnqueueTask(rita, platform.EnqueueInput{Name: "train", Project: "fraud-models", ComputeResource: "1 A100",
				Spec: model.TaskSpec{Command: []string{"python", "train.py"}}, Tags: []string{"loop"}})
			platformtest.Must(t, err)
			return task
		}
		orig := loop()
		platformtest.Must(t, errOnly(b.Svc.AbortTask(rita, orig.ID, "a template")))
		sc := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("feeds itself"), TargetID: ptr(orig.ID),
			Trigger: &model.ScheduleTrigger{Event: model.TriggerTaskCompleted, ProjectID: "fraud-models", Tag: "loop"}})
		b.Clock.Add(time.Minute)
		next := loop()
		fired := 0
		for i := 0; i < 10; i++ {
			finishTask(t, b, next, agentapi.StateCompleted)
			res := tick(t, b.Svc)
			fired += res.Fired
			if res.Fired == 0 {
				break
			}
			clones := clonesOf(t, b, orig)
			next = clones[len(clones)-1]
			for _, c := range clones {
				if c.CreatedAt.After(next.CreatedAt) {
					next = c
				}
			}
		}
		if fired != 3 {
			t.Fatalf("the trigger fired %d times, want 3 (its cap per hour)", fired)
		}
		got, err := b.Svc.Schedule(rita, sc.ID)
		platformtest.Must(t, err)
		if got.LastResult != "refused" || !containsAll(got.LastError, "3 runs in the last hour", "at most 3") {
			t.Fatalf("after the cap: last result %q, error %q: want refused, with the cap", got.LastResult, got.LastError)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("a second pass fired %d", res.Fired)
		}
		// An hour later, a tagged task that completes fires it again.
		b.Clock.Add(time.Hour)
		finishTask(t, b, loop(), agentapi.StateCompleted)
		if res := tick(t, b.Svc); res.Fired != 1 {
			t.Fatalf("an hour later the trigger fired %d, want 1", res.Fired)
		}
		if n := len(clonesOf(t, b, orig)); n != 4 {
			t.Fatalf("%d runs started, want 4", n)
		}
	}, platformtest.WithClock(scheduleStart),
		platformtest.WithScheduleLimits(platform.ScheduleLimits{RunsPerHour: 3}))
}

// containsAll reports whether s holds every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
