package platform_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/platform/schedules"
)

// wakeups follows the events on the bus that wake the schedules pass
// (what the server's loop listens for).
func wakeups(t *testing.T, b *testBundle) func() []string {
	t.Helper()
	sub := b.Bus.Subscribe(256, func(e events.Event) bool { return schedules.Wakes(e.Kind) })
	t.Cleanup(sub.Close)
	return func() []string {
		var kinds []string
		for {
			select {
			case e := <-sub.C:
				kinds = append(kinds, e.Kind)
			case <-time.After(200 * time.Millisecond):
				return kinds
			}
		}
	}
}

// firingKeys lists a schedule's firings' keys, oldest first.
func firingKeys(t *testing.T, b *testBundle, ctx context.Context, id string) []string {
	t.Helper()
	runs, err := b.Svc.ScheduleRuns(ctx, id, 100)
	platformtest.Must(t, err)
	var keys []string
	for _, r := range runs {
		keys = append(keys, r.Key)
	}
	slices.Sort(keys)
	return keys
}

func sameKeys(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func sortedKeys(keys ...string) []string {
	slices.Sort(keys)
	return keys
}

// An artifact.published trigger fires once per artifact of its name
// published on a run its owner may see (of its project, when it names
// one): not for another name, another group's run or another tenant's,
// not twice on a second pass nor after a restart. Publishing wakes the
// pass.
func TestArtifactTriggerFiresOncePerPublishedArtifact(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		vic := b.User(t, "vic", model.RoleMember, "vision")
		trigger := func(project string) *model.ScheduleTrigger {
			return &model.ScheduleTrigger{Event: model.TriggerArtifactPublished, Artifact: "model.pt", ProjectID: project}
		}
		anywhere := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("score any model"), TargetID: ptr(orig.ID), Trigger: trigger("")})
		inProject := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("score fraud models"), TargetID: ptr(orig.ID), Trigger: trigger("fraud-models")})
		if inProject.Trigger.ProjectID == "fraud-models" || inProject.Trigger.ProjectID == "" {
			t.Fatalf("the trigger's project is kept as %q, not resolved to an id", inProject.Trigger.ProjectID)
		}
		_, err := b.Svc.CreateSchedule(rita, platform.ScheduleInput{Name: ptr("vision's"), TargetID: ptr(orig.ID), Trigger: trigger("vision-detect")})
		platformtest.WantError(t, err, platform.CodeNotFound, "no project 'vision-detect'")
		_, err = b.Svc.CreateSchedule(rita, platform.ScheduleInput{Name: ptr("nameless"), TargetID: ptr(orig.ID),
			Trigger: &model.ScheduleTrigger{Event: model.TriggerArtifactPublished}})
		platformtest.WantError(t, err, platform.CodeInvalid, "needs an artifact name")
		woken := wakeups(t, b)

		publish := func(ctx context.Context, task *model.Task, name string) *model.Artifact {
			t.Helper()
			a, err := b.Svc.PublishPointer(ctx, task.ID, platform.ArtifactPointer{Name: name, URL: "s3://bucket/" + task.ID + "/" + name})
			platformtest.Must(t, err)
			return a
		}
		b.Clock.Add(time.Minute)
		train := enqueue(t, b, rita, "fraud-models", "1 A100", "", nil)
		first := publish(rita, train, "model.pt")
		publish(rita, train, "metrics.json")
		publish(vic, enqueue(t, b, vic, "vision-detect", "1 GPU", "", nil), "model.pt")
		nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme", "root")
		platformtest.Must(t, err)
		acme := b.SignIn(t, nt.Secret)
		_, err = b.Svc.ApplyEstate(acme, platformtest.ExampleEstate(t), false)
		platformtest.Must(t, err)
		publish(acme, enqueue(t, b, acme, "fraud-models", "1 A100", "ml-research", nil), "model.pt")
		if kinds := woken(); !slices.Contains(kinds, model.TriggerArtifactPublished) {
			t.Fatalf("publishing woke the pass with %v, want %s among them", kinds, model.TriggerArtifactPublished)
		}
		if res := tick(t, b.Svc); res.Fired != 2 {
			t.Fatalf("fired %d for rita's model.pt, want 2 (one per schedule)", res.Fired)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("a second pass fired %d more", res.Fired)
		}
		// Another project's: only the schedule of any project fires.
		b.Clock.Add(time.Minute)
		eval := publish(rita, enqueue(t, b, rita, "shared-eval", "1 GPU", "ml-research", nil), "model.pt")
		if res := tick(t, b.Svc); res.Fired != 1 {
			t.Fatalf("fired %d for a model.pt of shared-eval, want 1", res.Fired)
		}
		b.Clock.Add(time.Minute)
		restarted := platform.New(platform.Options{Store: b.Store, Auth: b.Auth, Now: b.Clock.Now, Logger: b.Logger, Vault: b.Vault})
		if res := tick(t, restarted); res.Fired != 0 {
			t.Fatalf("after a restart the pass fired %d more", res.Fired)
		}
		sameKeys(t, "firings of any project's", firingKeys(t, b, rita, anywhere.ID), sortedKeys("artifact:"+first.ID, "artifact:"+eval.ID))
		sameKeys(t, "firings of fraud-models'", firingKeys(t, b, rita, inProject.ID), []string{"artifact:" + first.ID})
		if n := len(clonesOf(t, b, orig)); n != 3 {
			t.Fatalf("%d runs started, want 3", n)
		}
	}, platformtest.WithClock(scheduleStart), platformtest.WithEvents())
}

// A pipeline.finished trigger fires once per run of the named pipeline of
// its project that ends (in its state, when it names one): not for
// another pipeline's, not twice, not after a restart. A run's end wakes
// the pass.
func TestPipelineTriggerFiresOncePerFinishedRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, orig := scheduleBundle(t, b)
		// The task to clone waits no more, so the worker claims the step.
		platformtest.Must(t, errOnly(b.Svc.AbortTask(rita, orig.ID, "a template")))
		trigger := func(state string) *model.ScheduleTrigger {
			return &model.ScheduleTrigger{Event: model.TriggerPipelineFinished, ProjectID: "fraud-models", Pipeline: "nightly", State: state}
		}
		anyEnd := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("after nightly"), TargetID: ptr(orig.ID), Trigger: trigger("")})
		completed := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("after nightly completes"), TargetID: ptr(orig.ID),
			Trigger: trigger("Completed")})
		if completed.Trigger.State != "completed" || completed.Trigger.ProjectID == "fraud-models" {
			t.Fatalf("trigger %+v: want the state lower-cased and the project resolved to its id", completed.Trigger)
		}
		_, err := b.Svc.CreateSchedule(rita, platform.ScheduleInput{Name: ptr("running"), TargetID: ptr(orig.ID), Trigger: trigger("running")})
		platformtest.WantError(t, err, platform.CodeInvalid, `pipeline run state "running"`, "completed, failed or aborted")
		_, err = b.Svc.CreateSchedule(rita, platform.ScheduleInput{Name: ptr("no project"), TargetID: ptr(orig.ID),
			Trigger: &model.ScheduleTrigger{Event: model.TriggerPipelineFinished, Pipeline: "nightly"}})
		platformtest.WantError(t, err, platform.CodeInvalid, "needs a project")
		woken := wakeups(t, b)

		b.Clock.Add(time.Minute)
		start := func(name string) *model.PipelineRun {
			t.Helper()
			r, err := b.Svc.StartRun(rita, pipelines.RunInput{Definition: `name: ` + name + `
project: fraud-models
steps:
  - {name: train, computeResource: 1 A100, command: [python3, train.py]}
`})
			platformtest.Must(t, err)
			return r
		}
		done := start("nightly")
		aborted := start("nightly")
		platformtest.Must(t, errOnly(b.Svc.AbortPipelineRun(rita, aborted.ID, "not needed")))
		platformtest.Must(t, errOnly(b.Svc.AbortPipelineRun(rita, start("weekly").ID, "not needed")))
		ctx := context.Background()
		platformtest.Must(t, b.Svc.AdvancePipelines(ctx))
		run, err := b.Svc.PipelineRun(rita, done.ID)
		platformtest.Must(t, err)
		step, err := b.Svc.Task(rita, run.Steps[0].TaskID)
		platformtest.Must(t, err)
		finishTask(t, b, step, agentapi.StateCompleted)
		platformtest.Must(t, b.Svc.AdvancePipelines(ctx))
		if run, err = b.Svc.PipelineRun(rita, done.ID); err != nil || run.State != model.PipelineRunCompleted {
			t.Fatalf("the run is %s (%v), want completed", run.State, err)
		}
		if kinds := woken(); !slices.Contains(kinds, "pipeline_run.completed") || !slices.Contains(kinds, "pipeline_run.aborted") {
			t.Fatalf("the runs' ends woke the pass with %v, want pipeline_run.completed and .aborted", kinds)
		}
		if res := tick(t, b.Svc); res.Fired != 3 {
			t.Fatalf("fired %d, want 3 (two runs of nightly for any end, one completed)", res.Fired)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("a second pass fired %d more", res.Fired)
		}
		b.Clock.Add(time.Minute)
		restarted := platform.New(platform.Options{Store: b.Store, Auth: b.Auth, Now: b.Clock.Now, Logger: b.Logger, Vault: b.Vault})
		if res := tick(t, restarted); res.Fired != 0 {
			t.Fatalf("after a restart the pass fired %d more", res.Fired)
		}
		sameKeys(t, "firings on any end", firingKeys(t, b, rita, anyEnd.ID),
			sortedKeys("pipeline_run:"+done.ID, "pipeline_run:"+aborted.ID))
		sameKeys(t, "firings on completion", firingKeys(t, b, rita, completed.ID), []string{"pipeline_run:" + done.ID})
	}, platformtest.WithClock(scheduleStart), platformtest.WithEvents())
}
