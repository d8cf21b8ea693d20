package tasks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/tasks"
)

// wantError fails unless err has code and says every word.
func wantError(t *testing.T, what string, err error, code kernel.Code, words ...string) {
	t.Helper()
	if kernel.ErrorCode(err) != code {
		t.Errorf("%s: %v (code %s), want %s", what, err, kernel.ErrorCode(err), code)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// The pool rules of enqueue: work over the group's limit, multi-node work
// no pool of the profile can run, and work larger than the profile's
// largest pool are refused; work for a closed profile waits.
func TestEnqueueRefusesWorkNoPoolCanTake(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	cases := []struct {
		name, cr, gpus string
		code           kernel.Code
		words          []string
	}{
		{"within everything", "wide", "4", "", nil},
		{"the profile's default size", "flex", "", "", nil},
		{"over the group's limit", "wide", "7", kernel.CodeInvalid, []string{"asks for 7 GPUs", "group ml's limit of 6"}},
		{"larger than any pool", "flex", "5", kernel.CodeInvalid, []string{"the largest, metal, declares 4 GPUs", "ask for at most 4"}},
		{"multi-node on bare metal", "flex", "2x2", kernel.CodeInvalid, []string{"multi-node", "metal is bare_metal"}},
		{"multi-node on kubernetes", "wide", "2x2", "", nil},
		{"a size that is no size", "wide", "lots", kernel.CodeInvalid, []string{"parameter gpus"}},
		{"a closed profile waits", "shut", "", "", nil},
	}
	for _, c := range cases {
		task, err := w.enqueue(rita, "ml-proj", c.cr, "", c.gpus)
		if c.code == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			} else if task.Status != model.TaskQueued {
				t.Errorf("%s: status %s", c.name, task.Status)
			}
			continue
		}
		wantError(t, c.name, err, c.code, c.words...)
	}
	if n := w.audits(t, "task.enqueued"); n != 4 {
		t.Errorf("%d tasks enqueued; want the 4 accepted", n)
	}
}

// Which compute resource and project a name means, and who may use them.
func TestEnqueueResolvesComputeResourceAndProject(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	bo := w.as(t, "bo", model.RoleMember, "ml", "vision")
	vic := w.as(t, "vic", model.RoleMember, "vision")
	viewer := w.as(t, "val", model.RoleViewer, "ml")

	task, err := w.enqueue(rita, "ml-proj", "1 GPU", "", "")
	if err != nil || task.ComputeResourceID != w.computeResource(t, "ml", "1 GPU") || task.GroupID != w.e.GroupByName("ml").ID {
		t.Fatalf("rita's '1 GPU' is ml's: %+v, %v", task, err)
	}
	_, err = w.enqueue(bo, "open", "1 GPU", "", "")
	wantError(t, "a name two of the caller's groups have", err, kernel.CodeInvalid, "exists for groups ml, vision", "say which group")
	if task, err := w.enqueue(bo, "open", "1 GPU", "vision", ""); err != nil || task.GroupID != w.e.GroupByName("vision").ID {
		t.Errorf("the group named picks the compute resource: %+v, %v", task, err)
	}
	_, err = w.enqueue(bo, "ml-proj", "1 GPU", "vision", "")
	wantError(t, "a project of another group", err, kernel.CodeForbidden, "project 'ml-proj' belongs to group ml", "use a compute resource of group ml")
	_, err = w.enqueue(vic, "open", "flex", "", "")
	wantError(t, "another group's compute resource by name", err, kernel.CodeForbidden, "not open to group vision")
	_, err = w.enqueue(vic, "open", w.computeResource(t, "ml", "flex"), "", "")
	wantError(t, "another group's compute resource by id", err, kernel.CodeNotFound, "no compute resource")
	if err != nil && strings.Contains(err.Error(), "flex") {
		t.Errorf("a refusal by id names the other group's compute resource: %v", err)
	}
	_, err = w.enqueue(vic, "open", "1 GPU", "ml", "")
	wantError(t, "a group the caller is not in", err, kernel.CodeForbidden, "you are not in group ml")
	_, err = w.enqueue(vic, "ml-proj", "1 GPU", "", "")
	wantError(t, "a project of a group the caller is not in", err, kernel.CodeNotFound, "no project 'ml-proj'")
	// Without a project: the caller's groups' only project, or a refusal
	// whose reason a client can act on.
	if task, err := w.enqueue(rita, "", "1 GPU", "", ""); err != nil || task.ProjectID != w.e.ProjectByName("ml-proj").ID {
		t.Errorf("rita's only group project is her default: %+v, %v", task, err)
	}
	_, err = w.enqueue(bo, "", "1 GPU", "ml", "")
	wantError(t, "no project and two group projects", err, kernel.CodeInvalid, "say which project")
	if pe, ok := err.(*kernel.Error); !ok || pe.Reason != kernel.ReasonProjectRequired {
		t.Errorf("the refusal's reason: %#v", err)
	}
	_, err = w.enqueue(rita, "ml-proj", " ", "", "")
	wantError(t, "no compute resource", err, kernel.CodeInvalid, "say which compute resource")
	_, err = w.enqueue(viewer, "ml-proj", "1 GPU", "", "")
	wantError(t, "a viewer", err, kernel.CodeForbidden, "a viewer cannot enqueue tasks")
	_, err = w.tasks.EnqueueTask(rita, tasks.EnqueueInput{Name: "train", Project: "ml-proj", ComputeResource: "1 GPU",
		Spec: model.TaskSpec{Command: []string{"x"}}, Tags: []string{"bad tag"}})
	wantError(t, "a bad tag", err, kernel.CodeInvalid, "task 'train'", "bad tag")
	_, err = w.tasks.EnqueueTask(rita, tasks.EnqueueInput{Name: "train", Project: "ml-proj", ComputeResource: "1 GPU",
		Spec: model.TaskSpec{Command: []string{"x"}, Inputs: []model.ArtifactInput{{Name: "data", TaskID: "r1", Artifact: "out"}}}})
	wantError(t, "inputs with no input check wired", err, kernel.CodeUnavailable, "cannot check task inputs")
	if n := w.audits(t, "task.enqueued"); n != 3 {
		t.Errorf("%d tasks enqueued; want the 3 accepted", n)
	}
}

// CheckEnqueue applies enqueue's rules and writes nothing.
func TestCheckEnqueueWritesNothing(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	in := tasks.EnqueueInput{Name: "train", Project: "ml-proj", ComputeResource: "wide", Spec: model.TaskSpec{Command: []string{"x"}, Parameters: map[string]string{"gpus": "3"}}}
	task, err := w.tasks.CheckEnqueue(rita, in)
	if err != nil || task.Size.String() != "3" {
		t.Fatalf("CheckEnqueue = %+v, %v", task, err)
	}
	in.Spec.Parameters["gpus"] = "7"
	_, err = w.tasks.CheckEnqueue(rita, in)
	wantError(t, "over the limit", err, kernel.CodeInvalid, "limit of 6")
	if n := w.audits(t, "task.enqueued"); n != 0 {
		t.Errorf("CheckEnqueue wrote %d tasks", n)
	}
}

// A task's place in line counts the waiting tasks ahead of it in its
// compute resource, and moves up when one ahead leaves.
func TestPlaceInLine(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	var line []*model.Task
	for range 3 {
		task, err := w.enqueue(rita, "ml-proj", "1 GPU", "", "")
		if err != nil {
			t.Fatal(err)
		}
		line = append(line, task)
	}
	other, err := w.enqueue(rita, "ml-proj", "wide", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for i, task := range append(line, other) {
		want := []int{1, 2, 3, 1}[i]
		if pos, err := w.tasks.TaskPosition(rita, task); err != nil || pos != want {
			t.Errorf("task %d is at %d (%v); want %d", i, pos, err, want)
		}
	}
	why, err := w.tasks.TaskReason(rita, line[2])
	if err != nil || !strings.HasPrefix(why, "position 3: waiting behind") {
		t.Errorf("why the third waits: %q, %v", why, err)
	}
	if _, err := w.tasks.AbortTask(rita, line[0].ID, "not needed"); err != nil {
		t.Fatal(err)
	}
	if pos, _ := w.tasks.TaskPosition(rita, line[2]); pos != 2 {
		t.Errorf("after the head left, the third is at %d; want 2", pos)
	}
	ended, _ := w.tasks.Task(rita, line[0].ID)
	if pos, _ := w.tasks.TaskPosition(rita, ended); pos != 0 {
		t.Errorf("an aborted task is at %d; want 0", pos)
	}
	if why, _ := w.tasks.TaskReason(rita, ended); why != "aborted by rita: not needed" {
		t.Errorf("an aborted task's reason: %q", why)
	}
}

// Who may abort a task, and that an ended task cannot be aborted again.
func TestAbortRules(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	mo := w.as(t, "mo", model.RoleMember, "ml")
	lena := w.as(t, "lena", model.RoleMember, "lead:ml")
	vic := w.as(t, "vic", model.RoleMember, "vision")
	task, err := w.enqueue(rita, "ml-proj", "1 GPU", "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.tasks.AbortTask(mo, task.ID, "")
	wantError(t, "another member", err, kernel.CodeForbidden, "only the task's owner, a lead of its group or an admin")
	_, err = w.tasks.AbortTask(vic, task.ID, "")
	wantError(t, "another group's member", err, kernel.CodeNotFound, "no task")
	_, err = w.tasks.AbortTask(rita, task.ID, strings.Repeat("r", 501))
	wantError(t, "a long reason", err, kernel.CodeInvalid, "longer than 500")
	got, err := w.tasks.AbortTask(lena, task.ID, "")
	if err != nil || got.Status != model.TaskAborted || got.Reason != "aborted by lena" || got.FinishedAt == nil {
		t.Fatalf("the group's lead aborts: %+v, %v", got, err)
	}
	_, err = w.tasks.AbortTask(rita, task.ID, "")
	wantError(t, "an ended task", err, kernel.CodeConflict, "has already ended (aborted)")
	if n := w.audits(t, "task.aborted"); n != 1 {
		t.Errorf("%d abort entries; want 1", n)
	}
}

// Why a placed task waits depends on its pool's workers, which the fleet
// knows (here, a stand-in).
func TestWhyAPlacedTaskWaits(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	task, err := w.enqueue(rita, "ml-proj", "1 GPU", "", "")
	if err != nil {
		t.Fatal(err)
	}
	placedAt := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	task.Status, task.PoolID, task.PlacedAt = model.TaskPlaced, w.e.PoolByName("metal").ID, &placedAt
	lastSeen := placedAt.Add(-time.Hour)
	cases := []struct {
		name   string
		pw     *tasks.PoolWorkers // nil: the pool is gone
		reason string
		want   string // a prefix, or with "…" the words in it
	}{
		{"a worker online", &tasks.PoolWorkers{PoolName: "metal", Online: 1}, "placed on pool metal; waiting for its worker", "placed on pool metal; waiting for its worker"},
		{"the pool is gone", nil, "what the engine said", "what the engine said"},
		{"no worker, with a claim timeout", &tasks.PoolWorkers{PoolName: "metal", LastSeen: lastSeen, ClaimTimeout: 10 * time.Minute}, "",
			"…unless one claims it by 2025-03-01 12:10:00 UTC, it goes back to the front of its compute resource"},
		{"autoscaled, the autoscaler's word kept", &tasks.PoolWorkers{PoolName: "metal", Autoscaled: true}, "placed on pool metal; waiting for a node: quota reached",
			"…; waiting for a node: quota reached"},
		{"autoscaled, another reason", &tasks.PoolWorkers{PoolName: "metal", Autoscaled: true}, "scale-up failed", "…; its autoscaler: scale-up failed"},
		{"autoscaled, nothing said", &tasks.PoolWorkers{PoolName: "metal", Autoscaled: true}, "", "…it waits for the pool's autoscaler to bring one"},
	}
	for _, c := range cases {
		w.tasks = tasks.New(w.k, tasks.Deps{PoolWorkers: func(_ context.Context, tenantID, poolID string) (tasks.PoolWorkers, bool, error) {
			if tenantID != "t1" || poolID != task.PoolID {
				t.Errorf("asked about pool %s of %s", poolID, tenantID)
			}
			if c.pw == nil {
				return tasks.PoolWorkers{}, false, nil
			}
			return *c.pw, true, nil
		}})
		task.Reason = c.reason
		why, err := w.tasks.TaskReason(rita, task)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if words, ok := strings.CutPrefix(c.want, "…"); ok {
			if !strings.HasPrefix(why, "placed on pool metal; ") || !strings.Contains(why, words) {
				t.Errorf("%s: %q; want it to say %q", c.name, why, words)
			}
		} else if why != c.want {
			t.Errorf("%s: %q; want %q", c.name, why, c.want)
		}
	}
}

// A retry with the same idempotency key answers with the first task.
func TestEnqueueRetryAnswersTheFirstTask(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	in := tasks.EnqueueInput{Name: "train", Project: "ml-proj", ComputeResource: "1 GPU", Spec: model.TaskSpec{Command: []string{"x"}}, IdempotencyKey: "k1"}
	first, err := w.tasks.EnqueueTask(rita, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.tasks.EnqueueTask(rita, in)
	if err != nil || again.ID != first.ID {
		t.Errorf("the retry made %v (%v); want %s", again, err, first.ID)
	}
	in.Name = "other"
	_, err = w.tasks.EnqueueTask(rita, in)
	wantError(t, "the key reused", err, kernel.CodeConflict, "was used for a different request")
	if n := w.audits(t, "task.enqueued"); n != 1 {
		t.Errorf("%d tasks enqueued; want 1", n)
	}
}
