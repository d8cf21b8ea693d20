package platform_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()

	t.Run("a shared compute resource name resolves to the caller's group", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			for _, tc := range []struct {
				who     context.Context
				group   string
				project string
			}{
				{ps.rita, "ml-research", "fraud-models"},
				{ps.vic, "vision", "vision-detect"},
			} {
				task := enqueue(t, b, tc.who, tc.project, "1 GPU", "", map[string]string{"lr": "0.1"})
				cr := b.computeResource(t, tc.group, "1 GPU")
				project, err := b.Svc.Project(b.Admin, tc.project)
				platformtest.Must(t, err)
				group, err := b.Svc.Group(b.Admin, tc.group)
				platformtest.Must(t, err)
				if task.ComputeResourceID != cr.ID || task.PolicyID != cr.PolicyID || task.ProfileID != cr.ProfileID || task.GroupID != group.ID ||
					task.ProjectID != project.ID || task.OwnerID != userID(tc.who) || task.TenantID != b.Tenant {
					t.Fatalf("task %+v, want on %s's \"1 GPU\" %+v in %s", task, tc.group, cr, tc.project)
				}
				if task.Status != model.TaskQueued || task.Size != (model.Size{Nodes: 1, PerNode: 1000}) || task.QueueSeq <= 0 ||
					task.Reason != "waiting for the engine to place it" || task.ClonedFromID != "" || task.Spec.Parameters["lr"] != "0.1" {
					t.Fatalf("task %+v", task)
				}
				got, err := b.Svc.Task(tc.who, task.ID)
				platformtest.Must(t, err)
				if got.QueueSeq != task.QueueSeq || got.Name != "train" || !slices.Equal(got.Spec.Command, []string{"python", "train.py"}) {
					t.Fatalf("task read back as %+v", got)
				}
				last := b.AuditLog(t)[0]
				want := "enqueued on compute resource '1 GPU' of group " + tc.group + ", size 1, in project " + tc.project
				if last.Action != "task.enqueued" || last.ObjectID != task.ID || last.ActorID != userID(tc.who) || last.Detail != want || last.Channel != "cli" {
					t.Fatalf("audit entry %+v, want detail %q", last, want)
				}
			}
		})
	})

	t.Run("a caller in two groups with the name says which group", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			try := func(ctx context.Context, group string) (*model.Task, error) {
				return b.Svc.EnqueueTask(ctx, platform.EnqueueInput{Name: "t", Project: "shared-eval", ComputeResource: "1 GPU", Group: group,
					Spec: model.TaskSpec{Command: []string{"true"}}})
			}
			_, err := try(ps.both, "")
			platformtest.WantError(t, err, platform.CodeInvalid, "the compute resource '1 GPU' exists for groups ml-research, vision; say which group")
			_, err = try(b.Admin, "")
			platformtest.WantError(t, err, platform.CodeInvalid, "exists for groups ml-research, nlp, vision")
			task, err := try(ps.both, "vision")
			platformtest.Must(t, err)
			if task.ComputeResourceID != b.computeResource(t, "vision", "1 GPU").ID {
				t.Fatalf("Group vision sent the task to %s", task.ComputeResourceID)
			}
			_, err = try(ps.both, "nlp")
			platformtest.WantError(t, err, platform.CodeForbidden, "you are not in group nlp")
			_, err = try(ps.both, "ghosts")
			platformtest.WantError(t, err, platform.CodeNotFound, "no group 'ghosts'")
			task, err = try(b.Admin, "nlp")
			platformtest.Must(t, err)
			if task.ComputeResourceID != b.computeResource(t, "nlp", "1 GPU").ID {
				t.Fatalf("the admin's Group nlp sent the task to %s", task.ComputeResourceID)
			}
			// A group that lacks the name is told so.
			_, err = b.Svc.EnqueueTask(b.Admin, platform.EnqueueInput{Name: "t", Project: "shared-eval", ComputeResource: "multi-node training", Group: "nlp",
				Spec: model.TaskSpec{Command: []string{"true"}}})
			platformtest.WantError(t, err, platform.CodeNotFound, "group nlp has no compute resource 'multi-node training'")
		})
	})

	t.Run("a task's size is read from its parameter and refused above the group's limit", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			_, err := b.Svc.CreateProfile(b.Admin, platform.ProfileInput{Name: ptr("flex"), Size: ptr("1"), SizeParameter: ptr("gpus"), Pools: []string{"slurm-a100", "onprem-k8s"}})
			platformtest.Must(t, err)
			_, err = b.Svc.ConnectProfile(b.Admin, platform.ConnectInput{Policy: "nlp", Profile: "flex", Name: ptr("flexible")})
			platformtest.Must(t, err)
			nina := b.User(t, "nina", model.RoleMember, "nlp")
			for _, tc := range []struct {
				params map[string]string
				want   model.Size
			}{
				{nil, model.Size{Nodes: 1, PerNode: 1000}},
				{map[string]string{"gpus": " "}, model.Size{Nodes: 1, PerNode: 1000}},
				{map[string]string{"gpus": "8"}, model.Size{Nodes: 1, PerNode: 8000}},
				{map[string]string{"gpus": "0.25"}, model.Size{Nodes: 1, PerNode: 250}},
				{map[string]string{"gpus": "2x8"}, model.Size{Nodes: 2, PerNode: 8000}},
				{map[string]string{"other": "64"}, model.Size{Nodes: 1, PerNode: 1000}},
			} {
				task := enqueue(t, b, nina, "shared-eval", "flexible", "", tc.params)
				if task.Size != tc.want {
					t.Errorf("parameters %v: size %s, want %s", tc.params, task.Size, tc.want)
				}
			}
			before := len(b.AuditLog(t))
			_, err = b.Svc.EnqueueTask(nina, platform.EnqueueInput{Name: "big", Project: "shared-eval", ComputeResource: "flexible",
				Spec: model.TaskSpec{Command: []string{"true"}, Parameters: map[string]string{"gpus": "4x8"}}})
			platformtest.WantError(t, err, platform.CodeInvalid, "task 'big' asks for 32 GPUs, more than group nlp's limit of 16 GPUs; ask for fewer")
			_, err = b.Svc.EnqueueTask(nina, platform.EnqueueInput{Name: "odd", Project: "shared-eval", ComputeResource: "flexible",
				Spec: model.TaskSpec{Command: []string{"true"}, Parameters: map[string]string{"gpus": "0.3"}}})
			platformtest.WantError(t, err, platform.CodeInvalid, "task 'odd': parameter gpus: GPU size 0.3 is not an allowed fraction")
			if n := len(b.AuditLog(t)); n != before {
				t.Fatalf("refused enqueues wrote %d audit entries", n-before)
			}
			// A profile without a size parameter ignores the parameter.
			task := enqueue(t, b, nina, "shared-eval", "1 GPU", "", map[string]string{"gpus": "64"})
			if task.Size.Total() != model.GPUs(1) {
				t.Fatalf("\"1 GPU\" took the size %s from a parameter", task.Size)
			}
		})
	})

	t.Run("a task larger than every pool of its profile is refused at enqueue and at clone, naming the largest pool", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			// bare-metal declares 16 GPUs, well under ml-research's limit of 48.
			_, err := b.Svc.CreateProfile(b.Admin, platform.ProfileInput{Name: ptr("flex"), Size: ptr("1"), SizeParameter: ptr("gpus"), Pools: []string{"bare-metal"}})
			platformtest.Must(t, err)
			_, err = b.Svc.ConnectProfile(b.Admin, platform.ConnectInput{Policy: "ml-research", Profile: "flex"})
			platformtest.Must(t, err)
			before := len(b.AuditLog(t))
			for _, gpus := range []string{"24", "32"} {
				_, err = b.Svc.EnqueueTask(b.Admin, platform.EnqueueInput{Name: "big", Project: "shared-eval", ComputeResource: "flex", Group: "ml-research",
					Spec: model.TaskSpec{Command: []string{"true"}, Parameters: map[string]string{"gpus": gpus}}})
				platformtest.WantError(t, err, platform.CodeInvalid, "task 'big' asks for ", " GPUs, more than any pool of profile flex declares: the largest, bare-metal, declares 16 GPUs; ask for at most 16")
			}
			if n := len(b.AuditLog(t)); n != before {
				t.Fatalf("refused enqueues wrote %d audit entries", n-before)
			}
			orig := enqueue(t, b, b.Admin, "shared-eval", "flex", "ml-research", map[string]string{"gpus": "16"})
			_, err = b.Svc.CloneTask(b.Admin, orig.ID, platform.CloneInput{ParameterOverrides: map[string]string{"gpus": "17"}})
			platformtest.WantError(t, err, platform.CodeInvalid, "asks for 17 GPUs, more than any pool of profile flex declares: the largest, bare-metal, declares 16 GPUs")
		})
	})

	t.Run("a multi-node size read from a parameter is refused at enqueue and at clone when no pool of the profile's order can run it", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			// Estate validation refuses a fixed 2x4 profile on a bare-metal
			// pool; a size parameter must not reach it either.
			_, err := b.Svc.CreateProfile(b.Admin, platform.ProfileInput{Name: ptr("flex"), Size: ptr("1"), SizeParameter: ptr("gpus"), Pools: []string{"bare-metal"}})
			platformtest.Must(t, err)
			_, err = b.Svc.ConnectProfile(b.Admin, platform.ConnectInput{Policy: "ml-research", Profile: "flex"})
			platformtest.Must(t, err)
			before := len(b.AuditLog(t))
			_, err = b.Svc.EnqueueTask(b.Admin, platform.EnqueueInput{Name: "gang", Project: "shared-eval", ComputeResource: "flex", Group: "ml-research",
				Spec: model.TaskSpec{Command: []string{"true"}, Parameters: map[string]string{"gpus": "2x4"}}})
			platformtest.WantError(t, err, platform.CodeInvalid, "task 'gang' asks for 2x4 GPUs, and no pool of profile flex can run multi-node work (2x4): bare-metal is bare_metal, "+
				"and multi-node work needs a kubernetes, neocloud, slurm, pbs or lsf pool; ask for one node, or ask an admin to add such a pool to the profile")
			if n := len(b.AuditLog(t)); n != before {
				t.Fatalf("a refused enqueue wrote %d audit entries", n-before)
			}
			orig := enqueue(t, b, b.Admin, "shared-eval", "flex", "ml-research", map[string]string{"gpus": "8"})
			_, err = b.Svc.CloneTask(b.Admin, orig.ID, platform.CloneInput{ParameterOverrides: map[string]string{"gpus": "2x4"}})
			platformtest.WantError(t, err, platform.CodeInvalid, "no pool of profile flex can run multi-node work (2x4)")

			// With a Kubernetes pool after bare-metal in the order, the gang
			// is accepted: the engine skips bare-metal for it.
			_, err = b.Svc.UpdateProfile(b.Admin, "flex", platform.ProfileInput{Pools: []string{"bare-metal", "onprem-k8s"}})
			platformtest.Must(t, err)
			if task := enqueue(t, b, b.Admin, "shared-eval", "flex", "ml-research", map[string]string{"gpus": "2x4"}); task.Size.Total() != model.GPUs(8) || !task.Size.MultiNode() {
				t.Fatalf("size %s, want 2x4", task.Size)
			}
		})
	})

	t.Run("a bad task spec is refused with every problem", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			_, err := b.Svc.EnqueueTask(b.Admin, platform.EnqueueInput{Name: " ", Project: "shared-eval", ComputeResource: "1 GPU", Group: "nlp",
				Spec: model.TaskSpec{Commit: "abc", Env: map[string]string{"1X": "y"}}})
			platformtest.WantError(t, err, platform.CodeInvalid, "name is empty", "say what to run", "a commit needs the repository", `environment variable name "1X"`)
			if pe, ok := err.(*platform.Error); !ok || len(pe.Problems) != 4 {
				t.Fatalf("error %#v: want 4 problems", err)
			}
			ts, err := b.Svc.Tasks(b.Admin, platform.TaskListFilter{}, store.Page{})
			platformtest.Must(t, err)
			if len(ts) != 0 {
				t.Fatalf("a refused task was written: %v", ts)
			}
		})
	})

	t.Run("a caller without identity is refused", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			_, err := b.Svc.EnqueueTask(context.Background(), platform.EnqueueInput{Name: "t"})
			platformtest.WantError(t, err, platform.CodeUnauthenticated, "sign in first")
			_, err = b.Svc.CreatePool(context.Background(), platform.PoolInput{})
			platformtest.WantError(t, err, platform.CodeUnauthenticated)
		})
	})
}

func TestQueue(t *testing.T) {
	t.Parallel()

	t.Run("queue positions count from 1 and close up after an abort", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			var tasks []*model.Task
			for range 4 {
				tasks = append(tasks, enqueue(t, b, b.Admin, "shared-eval", "1 GPU", "nlp", nil))
			}
			// Another queue does not count.
			enqueue(t, b, b.Admin, "shared-eval", "1 GPU", "vision", nil)
			positions := func() []int {
				var out []int
				for _, task := range tasks {
					got, err := b.Svc.Task(b.Admin, task.ID)
					platformtest.Must(t, err)
					n, err := b.Svc.TaskPosition(b.Admin, got)
					platformtest.Must(t, err)
					out = append(out, n)
				}
				return out
			}
			if got := positions(); !slices.Equal(got, []int{1, 2, 3, 4}) {
				t.Fatalf("positions %v, want [1 2 3 4]", got)
			}
			for i := 1; i < len(tasks); i++ {
				if tasks[i].QueueSeq <= tasks[i-1].QueueSeq {
					t.Fatalf("queue sequence numbers %d then %d", tasks[i-1].QueueSeq, tasks[i].QueueSeq)
				}
			}
			_, err := b.Svc.AbortTask(b.Admin, tasks[1].ID, "")
			platformtest.Must(t, err)
			if got := positions(); !slices.Equal(got, []int{1, 0, 2, 3}) {
				t.Fatalf("positions after aborting the second %v, want [1 0 2 3]", got)
			}
			n, err := b.Svc.QueuedTasks(b.Admin, tasks[0].ComputeResourceID)
			platformtest.Must(t, err)
			if n != 3 {
				t.Fatalf("QueuedTasks = %d, want 3", n)
			}
		})
	})

	t.Run("aborting a task that has ended is a conflict", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			task := enqueue(t, b, b.Admin, "shared-eval", "1 GPU", "nlp", nil)
			first, err := b.Svc.AbortTask(b.Admin, task.ID, "")
			platformtest.Must(t, err)
			if first.Reason != "aborted by admin" {
				t.Fatalf("reason %q", first.Reason)
			}
			before := len(b.AuditLog(t))
			_, err = b.Svc.AbortTask(b.Admin, task.ID, "again")
			platformtest.WantError(t, err, platform.CodeConflict, "task 'train' has already ended (aborted)")
			if n := len(b.AuditLog(t)); n != before {
				t.Fatalf("a refused abort wrote %d audit entries", n-before)
			}
			got, err := b.Svc.Task(b.Admin, task.ID)
			platformtest.Must(t, err)
			if got.Reason != "aborted by admin" || got.FinishedAt == nil || !got.FinishedAt.Equal(*first.FinishedAt) {
				t.Fatalf("the second abort changed the task: %+v", got)
			}
			_, err = b.Svc.AbortTask(b.Admin, "no-such-task", "")
			platformtest.WantError(t, err, platform.CodeNotFound, "no task 'no-such-task'")
			_, err = b.Svc.AbortTask(b.Admin, task.ID, strings.Repeat("r", 501))
			platformtest.WantError(t, err, platform.CodeInvalid, "the reason is longer than 500 characters")
		})
	})

	t.Run("task lists page newest first", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			var want []int64
			for range 5 {
				want = append([]int64{enqueue(t, b, b.Admin, "shared-eval", "1 GPU", "nlp", nil).QueueSeq}, want...)
			}
			var got []int64
			page := store.Page{Limit: 2}
			for {
				ts, err := b.Svc.Tasks(b.Admin, platform.TaskListFilter{}, page)
				platformtest.Must(t, err)
				if len(ts) == 0 {
					break
				}
				for _, task := range ts {
					got = append(got, task.QueueSeq)
				}
				page.After = strconv.FormatInt(ts[len(ts)-1].QueueSeq, 10)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages gave %v, want %v", got, want)
			}
			_, err := b.Svc.Tasks(b.Admin, platform.TaskListFilter{}, store.Page{After: "x"})
			platformtest.WantError(t, err, platform.CodeInvalid, "the page cursor is not valid")
			// The audit trail is paged by sequence number too: a cursor it
			// did not give is bad input, not an internal error.
			_, err = b.Svc.AuditLog(b.Admin, platform.AuditFilter{}, store.Page{After: "x"})
			platformtest.WantError(t, err, platform.CodeInvalid, "the page cursor is not valid")
			_, err = b.Svc.Tasks(b.Admin, platform.TaskListFilter{Statuses: []model.TaskStatus{"lost"}}, store.Page{})
			platformtest.WantError(t, err, platform.CodeInvalid, `status "lost" is not known`)
		})
	})
}

func TestCloneTask(t *testing.T) {
	t.Parallel()

	t.Run("a clone with parameter overrides keeps the rest and records where it came from", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			orig, err := b.Svc.EnqueueTask(ps.rita, platform.EnqueueInput{Name: "sweep", Project: "fraud-models", ComputeResource: "half GPU",
				Spec: model.TaskSpec{Command: []string{"python", "train.py"}, Image: "pytorch:2", Packages: []string{"numpy"},
					Parameters: map[string]string{"lr": "0.1", "epochs": "3"}, Env: map[string]string{"SEED": "1"}}})
			platformtest.Must(t, err)
			_, err = b.Svc.AbortTask(ps.rita, orig.ID, "")
			platformtest.Must(t, err)

			clone, err := b.Svc.CloneTask(ps.both, orig.ID, platform.CloneInput{ParameterOverrides: map[string]string{"lr": "0.01", "batch": "64"}})
			platformtest.Must(t, err)
			if want := map[string]string{"lr": "0.01", "epochs": "3", "batch": "64"}; !maps.Equal(clone.Spec.Parameters, want) {
				t.Errorf("clone parameters %v, want %v", clone.Spec.Parameters, want)
			}
			if !slices.Equal(clone.Spec.Command, orig.Spec.Command) || clone.Spec.Image != "pytorch:2" || !slices.Equal(clone.Spec.Packages, []string{"numpy"}) ||
				!maps.Equal(clone.Spec.Env, orig.Spec.Env) {
				t.Errorf("clone spec %+v, want the original's %+v", clone.Spec, orig.Spec)
			}
			if clone.ClonedFromID != orig.ID || clone.OwnerID != userID(ps.both) || clone.Name != "sweep" || clone.Status != model.TaskQueued ||
				clone.ComputeResourceID != orig.ComputeResourceID || clone.ProjectID != orig.ProjectID || clone.QueueSeq <= orig.QueueSeq || clone.ID == orig.ID {
				t.Errorf("clone %+v of %+v", clone, orig)
			}
			got, err := b.Svc.Task(ps.rita, clone.ID)
			platformtest.Must(t, err)
			if got.ClonedFromID != orig.ID || got.Spec.Parameters["lr"] != "0.01" {
				t.Errorf("clone read back as %+v", got)
			}
			again, err := b.Svc.Task(ps.rita, orig.ID)
			platformtest.Must(t, err)
			if again.Spec.Parameters["lr"] != "0.1" || len(again.Spec.Parameters) != 2 || again.Status != model.TaskAborted {
				t.Errorf("cloning changed the original: %+v", again)
			}
			last := b.AuditLog(t)[0]
			if last.Action != "task.enqueued" || !strings.HasSuffix(last.Detail, ", cloned from task 'sweep' ("+orig.ID+")") {
				t.Errorf("audit entry %+v", last)
			}
		})
	})

	t.Run("a clone can move to another compute resource and take a new name", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			orig := enqueue(t, b, ps.both, "shared-eval", "1 GPU", "vision", nil)
			clone, err := b.Svc.CloneTask(ps.both, orig.ID, platform.CloneInput{Name: "retry", ComputeResource: "1 GPU", Group: "ml-research", Project: "fraud-models"})
			platformtest.Must(t, err)
			if clone.Name != "retry" || clone.ComputeResourceID != b.computeResource(t, "ml-research", "1 GPU").ID || clone.ClonedFromID != orig.ID {
				t.Fatalf("clone %+v", clone)
			}
		})
	})

	t.Run("a clone onto a compute resource the caller may not use is refused", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			orig := enqueue(t, b, ps.rita, "shared-eval", "1 GPU", "", nil)
			before := len(b.AuditLog(t))
			visionEight := b.computeResource(t, "vision", "8 GPUs").ID
			_, err := b.Svc.CloneTask(ps.rita, orig.ID, platform.CloneInput{ComputeResource: visionEight})
			platformtest.WantError(t, err, platform.CodeNotFound, "no compute resource '"+visionEight+"' is open to you")
			_, err = b.Svc.CloneTask(ps.rita, orig.ID, platform.CloneInput{ComputeResource: "1 GPU", Group: "nlp"})
			platformtest.WantError(t, err, platform.CodeForbidden, "you are not in group nlp")
			// Someone who cannot see the task cannot clone it.
			_, err = b.Svc.CloneTask(ps.vic, orig.ID, platform.CloneInput{})
			platformtest.WantError(t, err, platform.CodeNotFound, "no task '"+orig.ID+"'")
			// A member who left the group may not clone onto its queue.
			if n := len(b.AuditLog(t)) - before; n != 0 {
				t.Fatalf("refused clones wrote %d audit entries", n)
			}
			platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "ml-research", "rita"))
			_, err = b.Svc.CloneTask(b.Key(t, "rita", ""), orig.ID, platform.CloneInput{})
			platformtest.WantError(t, err, platform.CodeForbidden, "the compute resource '1 GPU' is not open to you")
		})
	})

	t.Run("a clone whose size parameter goes over the limit is refused", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			_, err := b.Svc.CreateProfile(b.Admin, platform.ProfileInput{Name: ptr("flex"), Size: ptr("1"), SizeParameter: ptr("gpus"), Pools: []string{"onprem-k8s"}})
			platformtest.Must(t, err)
			_, err = b.Svc.ConnectProfile(b.Admin, platform.ConnectInput{Policy: "nlp", Profile: "flex"})
			platformtest.Must(t, err)
			orig := enqueue(t, b, b.Admin, "shared-eval", "flex", "nlp", map[string]string{"gpus": "4"})
			_, err = b.Svc.CloneTask(b.Admin, orig.ID, platform.CloneInput{ParameterOverrides: map[string]string{"gpus": "17"}})
			platformtest.WantError(t, err, platform.CodeInvalid, "asks for 17 GPUs, more than group nlp's limit of 16 GPUs")
			clone, err := b.Svc.CloneTask(b.Admin, orig.ID, platform.CloneInput{ParameterOverrides: map[string]string{"gpus": "16"}})
			platformtest.Must(t, err)
			if clone.Size.Total() != model.GPUs(16) {
				t.Fatalf("clone size %s, want 16", clone.Size)
			}
		})
	})
}
