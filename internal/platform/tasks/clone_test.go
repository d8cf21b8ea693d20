package tasks_test

import (
	"slices"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/tasks"
)

// A clone is the original with its parameters changed, enqueued by the
// caller through the same checks; the original stays as it was.
func TestCloneRules(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	mo := w.as(t, "mo", model.RoleMember, "ml")
	vic := w.as(t, "vic", model.RoleMember, "vision")
	orig, err := w.tasks.EnqueueTask(rita, tasks.EnqueueInput{Name: "sweep", Project: "ml-proj", ComputeResource: "wide",
		Tags: []string{"exp"}, Spec: model.TaskSpec{Command: []string{"python", "t.py"}, Parameters: map[string]string{"gpus": "2", "lr": "0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	clone, err := w.tasks.CloneTask(mo, orig.ID, tasks.CloneInput{ParameterOverrides: map[string]string{"lr": "0.01"}})
	if err != nil {
		t.Fatal(err)
	}
	if clone.ClonedFromID != orig.ID || clone.Spec.Parameters["lr"] != "0.01" || clone.Spec.Parameters["gpus"] != "2" ||
		clone.Size.String() != "2" || !slices.Equal(clone.Tags, []string{"exp"}) || clone.OwnerID == orig.OwnerID {
		t.Errorf("the clone: %+v", clone)
	}
	if again, _ := w.tasks.Task(rita, orig.ID); again.Spec.Parameters["lr"] != "0.1" {
		t.Errorf("cloning changed the original: %v", again.Spec.Parameters)
	}
	// The clone's size is checked again: the group's limit is 6.
	_, err = w.tasks.CloneTask(rita, orig.ID, tasks.CloneInput{ParameterOverrides: map[string]string{"gpus": "7"}})
	wantError(t, "a clone over the limit", err, kernel.CodeInvalid, "limit of 6")
	_, err = w.tasks.CloneTask(vic, orig.ID, tasks.CloneInput{})
	wantError(t, "another group's task", err, kernel.CodeNotFound)
	if _, err := w.tasks.CheckClone(mo, orig.ID); err != nil {
		t.Errorf("CheckClone for a member of the group: %v", err)
	}
	if _, err := w.tasks.CheckClone(vic, orig.ID); kernel.ErrorCode(err) != kernel.CodeNotFound {
		t.Errorf("CheckClone for another group: %v", err)
	}
	if n := w.audits(t, "task.enqueued"); n != 2 {
		t.Errorf("%d tasks enqueued; want the original and one clone", n)
	}
}

// Comparing runs: two to ten distinct runs the caller sees, parameters
// that differ marked.
func TestCompareRules(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	vic := w.as(t, "vic", model.RoleMember, "vision")
	a, err := w.enqueue(rita, "ml-proj", "wide", "", "1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.enqueue(rita, "ml-proj", "wide", "", "2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.tasks.CompareTasks(rita, []string{a.ID})
	wantError(t, "one run", err, kernel.CodeInvalid, "compare two to ten runs: 1 given")
	_, err = w.tasks.CompareTasks(rita, []string{a.ID, " " + a.ID})
	wantError(t, "a run twice", err, kernel.CodeInvalid, "is listed twice")
	_, err = w.tasks.CompareTasks(vic, []string{a.ID, b.ID})
	wantError(t, "runs another group's", err, kernel.CodeNotFound)
	c, err := w.tasks.CompareTasks(rita, []string{a.ID, b.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Parameters) != 1 || c.Parameters[0].Name != "gpus" || !c.Parameters[0].Differs || !slices.Equal(c.Parameters[0].Values, []string{"1", "2"}) {
		t.Errorf("parameters compared: %+v", c.Parameters)
	}
	if c.Code.Differs {
		t.Errorf("the same command reads as different code: %+v", c.Code)
	}
}

func TestMetricDirectionAndSummary(t *testing.T) {
	for metric, want := range map[string]string{"loss": "min", "val/loss": "min", "eval_error_rate": "min", "step-time": "min",
		"accuracy": "max", "f1": "max", "reward": "max", "lossless_ratio": "max"} {
		if got := tasks.Direction(metric); got != want {
			t.Errorf("Direction(%q) = %s, want %s", metric, got, want)
		}
	}
	points := []model.MetricPoint{{Seq: 1, Step: 1, Value: 0.9}, {Seq: 2, Step: 3, Value: 0.5}, {Seq: 3, Step: 2, Value: 0.2}, {Seq: 4, Step: 3, Value: 0.4}}
	final, best, ok := tasks.Summarize(points, "min")
	if !ok || final.Value != 0.4 || final.Step != 3 || best.Value != 0.2 || best.Step != 2 {
		t.Errorf("min: final %+v, best %+v", final, best)
	}
	if _, best, _ := tasks.Summarize(points, "max"); best.Value != 0.9 {
		t.Errorf("max: best %+v", best)
	}
	if _, _, ok := tasks.Summarize(nil, "min"); ok {
		t.Error("no points summarised")
	}
}
