package artifacts_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/artifacts"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// An input is checked at enqueue as the enqueuer: a run they may read that
// has the artifact.
func TestCheckInputs(t *testing.T) {
	w := newWorld(t, 16)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	vic := w.as(t, "vic", model.RoleMember, "vision")
	run := w.run(t, rita)
	if _, err := w.arts.PublishArtifact(rita, run.ID, upload("data.csv", "a,b")); err != nil {
		t.Fatal(err)
	}
	check := func(ctx context.Context, in model.ArtifactInput) error {
		p, _ := kernel.Caller(ctx)
		return artifacts.CheckInputs(ctx, w.st, p, []model.ArtifactInput{in})
	}
	if err := check(rita, model.ArtifactInput{Name: "data", TaskID: run.ID, Artifact: "data.csv"}); err != nil {
		t.Errorf("the owner's own run: %v", err)
	}
	err := check(vic, model.ArtifactInput{Name: "data", TaskID: run.ID, Artifact: "data.csv"})
	wantError(t, "another group's run", err, kernel.CodeInvalid, "input data: no run", "that you may read")
	err = check(rita, model.ArtifactInput{Name: "data", TaskID: "nosuch", Artifact: "data.csv"})
	wantError(t, "no such run", err, kernel.CodeInvalid, "no run 'nosuch'")
	err = check(rita, model.ArtifactInput{Name: "data", TaskID: run.ID, Artifact: "other.csv"})
	wantError(t, "no such artifact", err, kernel.CodeInvalid, "has no artifact 'other.csv'", "'klique artifact ls "+run.ID+"'")
}

// When the worker fetches an input, the task's owner must still be able
// to read the run it comes from.
func TestWorkerOpenInput(t *testing.T) {
	w := newWorld(t, 16)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	src := w.run(t, rita)
	if _, err := w.arts.PublishArtifact(rita, src.ID, upload("data.csv", "a,b")); err != nil {
		t.Fatal(err)
	}
	consumer := w.run(t, rita)
	consumer.Spec.Inputs = []model.ArtifactInput{{Name: "data", TaskID: src.ID, Artifact: "data.csv"}}
	if err := w.st.UpdateTask(context.Background(), consumer); err != nil {
		t.Fatal(err)
	}
	w.holding(func(ctx context.Context, id string, attempt int) (*model.Task, error) {
		return w.st.GetTask(ctx, "t1", id)
	})
	a, rc, err := w.arts.WorkerOpenInput(context.Background(), consumer.ID, 1, "data")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if a.Name != "data.csv" || string(b) != "a,b" {
		t.Errorf("the input: %s = %q", a.Name, b)
	}
	_, _, err = w.arts.WorkerOpenInput(context.Background(), consumer.ID, 1, "nope")
	wantError(t, "an input the task does not have", err, kernel.CodeNotFound, "has no input 'nope'")
	// A run the owner may not read (since the enqueue, they left its group)
	// is not read for them.
	vic := w.as(t, "vic", model.RoleMember, "vision")
	theirs := w.run(t, vic)
	if _, err := w.arts.PublishArtifact(vic, theirs.ID, upload("data.csv", "c,d")); err != nil {
		t.Fatal(err)
	}
	consumer.Spec.Inputs = append(consumer.Spec.Inputs, model.ArtifactInput{Name: "theirs", TaskID: theirs.ID, Artifact: "data.csv"})
	if err := w.st.UpdateTask(context.Background(), consumer); err != nil {
		t.Fatal(err)
	}
	_, _, err = w.arts.WorkerOpenInput(context.Background(), consumer.ID, 1, "theirs")
	wantError(t, "a run the owner may not read", err, kernel.CodeForbidden, "may no longer read run")
}

// The artifact.published trigger: a valid name, and matches only of runs
// the schedule's owner may see.
func TestPublishedTrigger(t *testing.T) {
	w := newWorld(t, 16)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	vic := w.as(t, "vic", model.RoleMember, "vision")
	src := artifacts.NewPublishedTrigger(w.k)
	_, err := src.Validate(rita, model.ScheduleTrigger{Event: model.TriggerArtifactPublished, Artifact: "  "})
	wantError(t, "no name", err, kernel.CodeInvalid, "needs an artifact name")
	_, err = src.Validate(rita, model.ScheduleTrigger{Event: model.TriggerArtifactPublished, Artifact: "../x"})
	wantError(t, "a bad name", err, kernel.CodeInvalid, "the artifact.published trigger's artifact")
	trig, err := src.Validate(rita, model.ScheduleTrigger{Event: model.TriggerArtifactPublished, Artifact: " model.pt ", ProjectID: "ml-proj"})
	if err != nil || trig.Artifact != "model.pt" || trig.ProjectID != w.e.ProjectByName("ml-proj").ID {
		t.Fatalf("a good trigger is trimmed and names its project by id: %+v, %v", trig, err)
	}
	if _, err := src.Validate(vic, model.ScheduleTrigger{Event: model.TriggerArtifactPublished, Artifact: "m", ProjectID: "ml-proj"}); err == nil {
		t.Error("a trigger on a project the creator does not use was taken")
	}

	before := time.Now().Add(-time.Minute)
	run := w.run(t, rita)
	a, err := w.arts.PublishPointer(rita, run.ID, artifacts.Pointer{Name: "model.pt", URL: "s3://b/k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.arts.PublishPointer(rita, run.ID, artifacts.Pointer{Name: "other.pt", URL: "s3://b/o"}); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Minute)
	got, err := src.Matches(rita, "t1", trig, before, after, 10)
	if err != nil || len(got) != 1 || got[0].Key != "artifact:"+a.ID {
		t.Errorf("the owner's match: %+v, %v", got, err)
	}
	if got, err := src.Matches(vic, "t1", trig, before, after, 10); err != nil || len(got) != 0 {
		t.Errorf("another group's owner matches: %+v, %v", got, err)
	}
	if got, err := src.Matches(rita, "t2", trig, before, after, 10); err != nil || len(got) != 0 {
		t.Errorf("another tenant's matches: %+v, %v", got, err)
	}
}
