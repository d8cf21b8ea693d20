package platform_test

import (
	"context"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// The project of a task that names none: the caller's groups' only
// project; with several, the default they set, while they may still use
// it; else a refusal that says how to name one.
func TestATaskThatNamesNoProjectGoesToTheCallersDefault(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		enqueue := func(ctx context.Context, group string) (*model.Task, error) {
			return b.Svc.EnqueueTask(ctx, platform.EnqueueInput{Name: "t", ComputeResource: "1 GPU", Group: group,
				Spec: model.TaskSpec{Command: []string{"true"}}})
		}
		projectOf := func(task *model.Task) string {
			pr, err := b.Svc.Project(b.Admin, task.ProjectID)
			platformtest.Must(t, err)
			return pr.Name
		}
		// Rita's group has one project (shared-eval is open to all).
		task, err := enqueue(ps.rita, "")
		platformtest.Must(t, err)
		if got := projectOf(task); got != "fraud-models" {
			t.Fatalf("rita's task is in project %s, want fraud-models", got)
		}

		// Bo is in two groups, with a project each.
		const say = "say which project the task belongs to: give the project field, or set your default project with 'klique project use NAME'"
		_, err = enqueue(ps.both, "vision")
		platformtest.WantError(t, err, platform.CodeInvalid, say)
		_, err = b.Svc.SetDefaultProject(ps.vic, "fraud-models")
		platformtest.WantError(t, err, platform.CodeNotFound, "no project 'fraud-models' you may use")
		if _, err := b.Svc.SetDefaultProject(ps.both, "vision-detect"); err != nil {
			t.Fatal(err)
		}
		both := b.Key(t, "bo", "")
		if pr, err := b.Svc.DefaultProject(both); err != nil || pr == nil || pr.Name != "vision-detect" {
			t.Fatalf("bo's default project: %v %v", pr, err)
		}
		task, err = enqueue(both, "vision")
		platformtest.Must(t, err)
		if got := projectOf(task); got != "vision-detect" {
			t.Fatalf("bo's task is in project %s, want his default vision-detect", got)
		}

		// Out of vision, the default no longer counts: his only project is
		// ml-research's.
		platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "vision", "bo"))
		task, err = enqueue(b.Key(t, "bo", ""), "")
		platformtest.Must(t, err)
		if got := projectOf(task); got != "fraud-models" {
			t.Fatalf("bo's task after leaving vision is in project %s, want fraud-models", got)
		}
	})
}
