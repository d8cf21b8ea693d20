package platform_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/platform/studies"
)

// A schedule of a study starts, once per period, a new study from the
// target's definition as its owner, with the schedule's parameters over
// the base task's fixed ones; a firing started before a pass died (the
// same key) is answered with the study it started, and a restarted
// service fires the next period once.
func TestAScheduleStartsAStudy(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		rita := b.User(t, "rita", model.RoleMember, "ml-research")
		base := enqueue(t, b, rita, "fraud-models", "1 A100", "", map[string]string{"lr": "0.1", "epochs": "5"})
		first, err := b.Svc.StartStudy(rita, studyInput(base.ID, nil))
		platformtest.Must(t, err)

		// The start is idempotent by key, as a schedule's firing needs.
		again, err := b.Svc.RerunStudy(rita, first.ID, map[string]string{"epochs": "7"}, "k-1")
		platformtest.Must(t, err)
		same, err := b.Svc.RerunStudy(rita, first.ID, map[string]string{"epochs": "7"}, "k-1")
		platformtest.Must(t, err)
		if same.ID != again.ID || again.ID == first.ID {
			t.Fatalf("two starts with one key made studies %s and %s", again.ID, same.ID)
		}
		_, err = b.Svc.StartStudy(rita, studyInput(base.ID, func(in *studies.StartInput) { in.IdempotencyKey = "k-1" }))
		platformtest.WantError(t, err, platform.CodeConflict, "was used for a different request")

		kind := model.ScheduleTargetStudy
		sc := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("weekly sweep"), TargetKind: &kind, TargetID: ptr(first.ID),
			Cron: ptr("*/5 * * * *"), Parameters: map[string]string{"epochs": "20"}})
		// A pass that died after starting the firing's study, before
		// claiming it: the next pass gets the same study back.
		due := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
		early, err := b.Svc.RerunStudy(rita, first.ID, sc.Parameters, "schedule-"+sc.ID+"-at:"+strconv.FormatInt(due.UnixMicro(), 10))
		platformtest.Must(t, err)
		b.Clock.Set(due.Add(time.Second))
		if res := tick(t, b.Svc); res.Fired != 1 {
			t.Fatalf("fired %d when due, want 1", res.Fired)
		}
		restarted := platform.New(platform.Options{Store: b.Store, Auth: b.Auth, Now: b.Clock.Now, Logger: b.Logger, Vault: b.Vault})
		if res := tick(t, restarted); res.Fired != 0 {
			t.Fatalf("a second replica fired %d more in the same period", res.Fired)
		}
		got, err := b.Svc.Schedule(rita, sc.ID)
		platformtest.Must(t, err)
		if got.LastRunID != early.ID || got.LastResult != "started" {
			t.Fatalf("the firing started %q (%s), want the study %s its key already started", got.LastRunID, got.LastResult, early.ID)
		}
		list, err := b.Svc.Studies(rita, "")
		platformtest.Must(t, err)
		if len(list) != 3 {
			t.Fatalf("%d studies, want 3 (the first, k-1's and the firing's)", len(list))
		}
		st, err := b.Svc.Study(rita, early.ID)
		platformtest.Must(t, err)
		if st.OwnerID != first.OwnerID || st.BaseTaskID != base.ID || st.ComputeResourceID != first.ComputeResourceID ||
			st.Spec.Strategy != first.Spec.Strategy || st.Spec.Objective != first.Spec.Objective || st.Spec.Budget != first.Spec.Budget ||
			len(st.Spec.Space) != 1 || st.Spec.Parameters["epochs"] != "20" {
			t.Fatalf("the scheduled study %+v is not the first's definition with epochs 20", st)
		}
		// Its trials run with the fixed parameter and their searched one.
		trials, err := b.Store.ListStudyTrials(context.Background(), b.Tenant, st.ID)
		platformtest.Must(t, err)
		if len(trials) == 0 || trials[0].TaskID == "" {
			t.Fatalf("the scheduled study enqueued no trial: %+v", trials)
		}
		trial, err := b.Svc.Task(rita, trials[0].TaskID)
		platformtest.Must(t, err)
		if trial.Spec.Parameters["epochs"] != "20" || trial.Spec.Parameters["lr"] == "" || trial.Spec.Parameters["lr"] != trials[0].Params["lr"] {
			t.Fatalf("trial parameters %v, want epochs 20 and the trial's lr %s", trial.Spec.Parameters, trials[0].Params["lr"])
		}

		b.Clock.Set(time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC))
		if res := tick(t, restarted); res.Fired != 1 {
			t.Fatalf("fired %d in the next period after the restart, want 1", res.Fired)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("the old service fired %d more", res.Fired)
		}
		all, err := b.Store.ListStudies(context.Background(), b.Tenant, "")
		platformtest.Must(t, err)
		if len(all) != 4 {
			t.Fatalf("%d studies after two periods, want 4", len(all))
		}
	}, platformtest.WithClock(scheduleStart))
}

// A schedule of a study is refused for a study its creator cannot see,
// a parameter the study searches and a trigger field of another event;
// one whose owner lost the study's compute resource is refused at
// creation and, already made, pauses with the reason at its firing.
func TestStudyScheduleRefusals(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		// bo's study runs in a project of no group on vision's compute
		// resource, so leaving vision loses the compute resource only.
		base := enqueue(t, b, ps.both, "shared-eval", "1 GPU", "vision", map[string]string{"lr": "0.1", "epochs": "5"})
		st, err := b.Svc.StartStudy(ps.both, studyInput(base.ID, nil))
		platformtest.Must(t, err)
		kind := model.ScheduleTargetStudy
		in := func(name string, params map[string]string) platform.ScheduleInput {
			return platform.ScheduleInput{Name: ptr(name), TargetKind: &kind, TargetID: ptr(st.ID), Cron: ptr("@daily"), Parameters: params}
		}
		_, err = b.Svc.CreateSchedule(ps.rita, in("steal", nil)) // not in vision, the study's group
		platformtest.WantError(t, err, platform.CodeNotFound, "no study")
		_, err = b.Svc.CreateSchedule(ps.both, in("fix lr", map[string]string{"lr": "0.5"}))
		platformtest.WantError(t, err, platform.CodeInvalid, "parameter lr is searched by the study, so it cannot be fixed")
		trig := in("on a tag", nil)
		trig.Cron, trig.Trigger = nil, &model.ScheduleTrigger{Event: model.TriggerArtifactPublished, Artifact: "model.pt", Tag: "nightly"}
		_, err = b.Svc.CreateSchedule(ps.both, trig)
		platformtest.WantError(t, err, platform.CodeInvalid, "the artifact.published trigger takes artifact, project, not tag: leave tag out")
		if list, err := b.Svc.Schedules(ps.both); err != nil || len(list) != 0 {
			t.Fatalf("refused schedules left %d (%v)", len(list), err)
		}

		sc := createSchedule(t, b, ps.both, in("daily sweep", map[string]string{"epochs": "9"}))
		platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "vision", "bo"))
		// A request of bo's now (signed in afresh) is refused.
		_, err = b.Svc.CreateSchedule(b.Key(t, "bo", ""), in("another", nil))
		platformtest.WantError(t, err, platform.CodeNotFound, "no compute resource")
		before, err := b.Store.ListStudies(context.Background(), b.Tenant, "")
		platformtest.Must(t, err)
		b.Clock.Set(time.Date(2026, 1, 2, 0, 0, 1, 0, time.UTC))
		if res := tick(t, b.Svc); res.Paused != 1 || res.Fired != 0 {
			t.Fatalf("pass: %+v, want the schedule paused", res)
		}
		got, err := b.Store.GetSchedule(context.Background(), b.Tenant, sc.ID)
		platformtest.Must(t, err)
		if !got.Paused || !strings.Contains(got.PausedReason, "its owner can no longer start it: no compute resource") {
			t.Fatalf("paused %v, reason %q: want it to say the compute resource is closed to the owner", got.Paused, got.PausedReason)
		}
		after, err := b.Store.ListStudies(context.Background(), b.Tenant, "")
		platformtest.Must(t, err)
		if len(after) != len(before) {
			t.Fatalf("%d studies started for an owner without the compute resource", len(after)-len(before))
		}
	}, platformtest.WithClock(scheduleStart))
}
