package work

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

func taskID(t *model.Task) string { return t.ID }

func taskIDs(ts ...*model.Task) []string { return harness.Names(ts, taskID) }

// Tasks checks tasks: enqueueing with queue sequence numbers, updates over
// their life, filtered listing and counting.
func Tasks(t *testing.T, setup harness.Setup) {
	taskCreation(t, setup)
	taskUpdatesAndRefusals(t, setup)
	taskPages(t, setup)
	taskFilters(t, setup)
	taskQueueOrder(t, setup)
	taskQueueMoves(t, setup)
}

// taskCreation checks that a task is stored as enqueued: every field, what
// is unset, and its queue sequence number.
func taskCreation(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateTask then GetTask returns every field", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		owner := b.User(t)
		p := b.Project(t)
		pool := b.Pool(t)
		in := &model.Task{
			ID: model.NewID(), TenantID: b.Tenant.ID, ProjectID: p.ID, OwnerID: owner.ID, ComputeResourceID: q.CR.ID,
			PolicyID: q.Policy.ID, ProfileID: q.Profile.ID, GroupID: q.Group.ID, Name: "train",
			Spec: model.TaskSpec{
				Command: []string{"python", "-m", "train"}, Repository: "https://git.example.com/r.git",
				Commit: "abc123", Diff: "--- a\n+++ b\n", EntryPoint: "train.py", WorkingDir: "src",
				Packages: []string{"torch==2.5"}, Image: "nvcr.io/pytorch:24.10",
				Parameters: map[string]string{"lr": "0.001", "gpus": "16"}, Env: map[string]string{"WANDB_MODE": "off"},
			},
			Size: model.Size{Nodes: 2, PerNode: model.GPUs(8)}, Status: model.TaskRunning, Reason: "claimed by worker w1",
			PoolID: pool.ID, ClonedFromID: model.NewID(), CreatedAt: b.At(1), UpdatedAt: b.At(3),
			PlacedAt: harness.Ptr(b.At(2)), FinishedAt: harness.Ptr(b.At(4)),
		}
		harness.Must(t, b.Store.CreateTask(b.Ctx, in))
		if in.QueueSeq <= 0 {
			t.Fatalf("QueueSeq = %d, want one assigned", in.QueueSeq)
		}
		want := *in
		want.CreatedAt, want.UpdatedAt = harness.Norm(in.CreatedAt), harness.Norm(in.UpdatedAt)
		want.PlacedAt, want.FinishedAt = harness.NormPtr(in.PlacedAt), harness.NormPtr(in.FinishedAt)
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, in.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "GetTask", got, &want)
	})

	setup.Run(t, "CreateTask stores no project, unset times and an empty spec", func(t *testing.T, b *harness.Bundle) {
		in := b.Task(t, b.Queue(t), b.User(t), func(tk *model.Task) { tk.Spec = model.TaskSpec{} })
		want := *in
		want.CreatedAt, want.UpdatedAt = harness.Norm(in.CreatedAt), harness.Norm(in.UpdatedAt)
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, in.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "GetTask", got, &want)
	})

	setup.Run(t, "CreateTask assigns increasing queue sequence numbers and keeps a given one, which new ones follow", func(t *testing.T, b *harness.Bundle) {
		q, owner := b.Queue(t), b.User(t)
		t1 := b.Task(t, q, owner)
		t2 := b.Task(t, q, owner)
		if !(t1.QueueSeq > 0 && t2.QueueSeq > t1.QueueSeq) {
			t.Fatalf("QueueSeq %d then %d, want increasing from above 0", t1.QueueSeq, t2.QueueSeq)
		}
		given := t2.QueueSeq + 1000
		t3 := b.Task(t, q, owner, func(tk *model.Task) { tk.QueueSeq = given })
		harness.CheckEqual(t, "given QueueSeq", t3.QueueSeq, given)
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, t3.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "stored QueueSeq", got.QueueSeq, given)
		t4 := b.Task(t, q, owner)
		if t4.QueueSeq <= given {
			t.Fatalf("QueueSeq after a given %d is %d, want more", given, t4.QueueSeq)
		}
		// Another tenant's tasks draw from the same counter.
		theirOwner := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		theirQ := otherQueue(t, b)
		t5 := b.Task(t, theirQ, theirOwner, func(tk *model.Task) { tk.TenantID = b.Other.ID })
		if t5.QueueSeq <= t4.QueueSeq {
			t.Fatalf("QueueSeq in another tenant %d, want more than %d", t5.QueueSeq, t4.QueueSeq)
		}
	})
}

// taskUpdatesAndRefusals checks what a task's life writes, and the writes
// and reads refused: a taken sequence number, a missing owner, project or
// task, another tenant's task.
func taskUpdatesAndRefusals(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateTask returns ErrConflict for a queue sequence number taken in the tenant", func(t *testing.T, b *harness.Bundle) {
		q, owner := b.Queue(t), b.User(t)
		t1 := b.Task(t, q, owner)
		dup := &model.Task{TenantID: b.Tenant.ID, OwnerID: owner.ID, ComputeResourceID: q.CR.ID, Name: "dup",
			Status: model.TaskQueued, QueueSeq: t1.QueueSeq}
		harness.WantErr(t, b.Store.CreateTask(b.Ctx, dup), store.ErrConflict)
		harness.CheckEqual(t, "given QueueSeq after failure", dup.QueueSeq, t1.QueueSeq)
	})

	setup.Run(t, "CreateTask returns ErrNotFound for a missing owner or project, and undoes what it assigned", func(t *testing.T, b *harness.Bundle) {
		q, owner := b.Queue(t), b.User(t)
		theirs := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		for i, tk := range []*model.Task{
			{TenantID: b.Tenant.ID, OwnerID: model.NewID(), ComputeResourceID: q.CR.ID},
			{TenantID: b.Tenant.ID, OwnerID: theirs.ID, ComputeResourceID: q.CR.ID},
			{TenantID: b.Tenant.ID, OwnerID: owner.ID, ComputeResourceID: q.CR.ID, ProjectID: model.NewID()},
		} {
			tk.Name, tk.Status = "t", model.TaskQueued
			harness.WantErr(t, b.Store.CreateTask(b.Ctx, tk), store.ErrNotFound)
			if tk.ID != "" || tk.QueueSeq != 0 {
				t.Fatalf("case %d: ID %q and QueueSeq %d left after a failed create", i, tk.ID, tk.QueueSeq)
			}
		}
		n, err := b.Store.CountTasks(b.Ctx, b.Tenant.ID, store.TaskFilter{})
		harness.Must(t, err)
		harness.CheckEqual(t, "tasks", n, 0)
	})

	setup.Run(t, "UpdateTask writes what changes over a task's life and keeps what was fixed at enqueue", func(t *testing.T, b *harness.Bundle) {
		q, owner := b.Queue(t), b.User(t)
		tk := b.Task(t, q, owner)
		pool := b.Pool(t)
		upd := *tk
		upd.Name = "renamed"
		upd.Spec = model.TaskSpec{Image: "img:2", Parameters: map[string]string{"size": "0.5"}}
		upd.Size = model.Size{Nodes: 1, PerNode: 500}
		upd.Status = model.TaskCompleted
		upd.Reason = "exit 0"
		upd.PoolID = pool.ID
		upd.UpdatedAt = b.At(9)
		upd.PlacedAt = harness.Ptr(b.At(7))
		upd.FinishedAt = harness.Ptr(b.At(8))
		// Fixed fields: changes to them are ignored.
		upd.OwnerID = b.User(t).ID
		upd.QueueSeq = tk.QueueSeq + 50
		upd.CreatedAt = b.At(100)
		upd.ClonedFromID = "changed"
		harness.Must(t, b.Store.UpdateTask(b.Ctx, &upd))

		want := *tk
		want.Name, want.Spec, want.Size, want.Status, want.Reason, want.PoolID = upd.Name, upd.Spec, upd.Size, upd.Status, upd.Reason, upd.PoolID
		want.CreatedAt, want.UpdatedAt = harness.Norm(tk.CreatedAt), harness.Norm(upd.UpdatedAt)
		want.PlacedAt, want.FinishedAt = harness.NormPtr(upd.PlacedAt), harness.NormPtr(upd.FinishedAt)
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "after UpdateTask", got, &want)

		// Times can be cleared again (a preempted task goes back to queued).
		upd.PlacedAt, upd.FinishedAt, upd.PoolID, upd.Status = nil, nil, "", model.TaskQueued
		harness.Must(t, b.Store.UpdateTask(b.Ctx, &upd))
		got, err = b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID)
		harness.Must(t, err)
		if got.PlacedAt != nil || got.FinishedAt != nil || got.PoolID != "" || got.Status != model.TaskQueued {
			t.Fatalf("after requeue: %s", harness.Show(got))
		}
	})

	setup.Run(t, "UpdateTask returns ErrNotFound for a missing task and another tenant's task", func(t *testing.T, b *harness.Bundle) {
		tk := b.Task(t, b.Queue(t), b.User(t))
		missing := *tk
		missing.ID = model.NewID()
		harness.WantErr(t, b.Store.UpdateTask(b.Ctx, &missing), store.ErrNotFound)
		wrongTenant := *tk
		wrongTenant.TenantID = b.Other.ID
		wrongTenant.Status = model.TaskAborted
		harness.WantErr(t, b.Store.UpdateTask(b.Ctx, &wrongTenant), store.ErrNotFound)
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "Status", got.Status, model.TaskQueued)
	})

	setup.Run(t, "GetTask returns ErrNotFound for a missing task and another tenant's task", func(t *testing.T, b *harness.Bundle) {
		tk := b.Task(t, b.Queue(t), b.User(t))
		_, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, model.NewID())
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.GetTask(b.Ctx, b.Other.ID, tk.ID)
		harness.WantErr(t, err, store.ErrNotFound)
	})
}

// taskPages checks ListTasks's order and pages.
func taskPages(t *testing.T, setup harness.Setup) {
	setup.Run(t, "ListTasks lists in queue order, newest first on request, and pages join up", func(t *testing.T, b *harness.Bundle) {
		q, owner := b.Queue(t), b.User(t)
		var want []*model.Task
		for range 7 {
			want = append(want, b.Task(t, q, owner))
		}
		theirQ := otherQueue(t, b)
		theirOwner := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		b.Task(t, theirQ, theirOwner, func(tk *model.Task) { tk.TenantID = b.Other.ID })

		oldest := taskIDs(want...)
		newest := reversed(oldest)
		for _, newestFirst := range []bool{false, true} {
			wantIDs := oldest
			if newestFirst {
				wantIDs = newest
			}
			all, err := b.Store.ListTasks(b.Ctx, b.Tenant.ID, store.TaskFilter{}, store.Page{}, newestFirst)
			harness.Must(t, err)
			harness.CheckEqual(t, fmt.Sprintf("whole list, newest first %v", newestFirst), taskIDs(all...), wantIDs)
			for _, limit := range []int{1, 2, 3, 7, 8} {
				var got []string
				after := ""
				for pages := 0; ; pages++ {
					if pages > 9 {
						t.Fatalf("limit %d: paging does not end", limit)
					}
					page, err := b.Store.ListTasks(b.Ctx, b.Tenant.ID, store.TaskFilter{}, store.Page{After: after, Limit: limit}, newestFirst)
					harness.Must(t, err)
					if len(page) > limit {
						t.Fatalf("limit %d: page of %d", limit, len(page))
					}
					if len(page) == 0 {
						break
					}
					got = append(got, taskIDs(page...)...)
					after = strconv.FormatInt(page[len(page)-1].QueueSeq, 10)
				}
				harness.CheckEqual(t, fmt.Sprintf("pages of %d joined, newest first %v", limit, newestFirst), got, wantIDs)
			}
		}
	})

	setup.Run(t, "ListTasks returns an error for a page key that is not a number", func(t *testing.T, b *harness.Bundle) {
		_, err := b.Store.ListTasks(b.Ctx, b.Tenant.ID, store.TaskFilter{}, store.Page{After: "abc"}, false)
		if err == nil {
			t.Fatal("no error for page key \"abc\"")
		}
	})
}

// taskFilters checks what ListTasks and CountTasks keep: by status,
// compute resource, project, owner and groups, and only the tenant's.
func taskFilters(t *testing.T, setup harness.Setup) {
	setup.Run(t, "ListTasks and CountTasks filter by status, compute resource, project and owner", func(t *testing.T, b *harness.Bundle) {
		q1, q2 := b.Queue(t), b.Queue(t)
		alice, bob := b.User(t), b.User(t)
		p := b.Project(t)
		t1 := b.Task(t, q1, alice)
		t2 := b.Task(t, q1, bob, func(tk *model.Task) { tk.Status = model.TaskRunning; tk.ProjectID = p.ID })
		t3 := b.Task(t, q2, alice, func(tk *model.Task) { tk.Status = model.TaskFailed; tk.ProjectID = p.ID })
		t4 := b.Task(t, q2, bob)
		for _, c := range []struct {
			name string
			f    store.TaskFilter
			want []*model.Task
		}{
			{"no filter", store.TaskFilter{}, []*model.Task{t1, t2, t3, t4}},
			{"one status", store.TaskFilter{Statuses: []model.TaskStatus{model.TaskQueued}}, []*model.Task{t1, t4}},
			{"two statuses", store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning, model.TaskFailed}}, []*model.Task{t2, t3}},
			{"compute resource", store.TaskFilter{ComputeResourceID: q2.CR.ID}, []*model.Task{t3, t4}},
			{"project", store.TaskFilter{ProjectID: p.ID}, []*model.Task{t2, t3}},
			{"owner", store.TaskFilter{OwnerID: alice.ID}, []*model.Task{t1, t3}},
			{"owner and status", store.TaskFilter{OwnerID: bob.ID, Statuses: []model.TaskStatus{model.TaskQueued}}, []*model.Task{t4}},
			{"nothing matches", store.TaskFilter{ComputeResourceID: q1.CR.ID, Statuses: []model.TaskStatus{model.TaskFailed}}, nil},
		} {
			checkTaskFilter(t, b, c.name, c.f, c.want)
		}
	})

	setup.Run(t, "ListTasks and CountTasks with groups keep the groups' tasks and the visible user's own", func(t *testing.T, b *harness.Bundle) {
		q1, q2, q3 := b.Queue(t), b.Queue(t), b.Queue(t)
		alice, bob := b.User(t), b.User(t)
		a1 := b.Task(t, q1, bob)
		a2 := b.Task(t, q2, bob)
		a3 := b.Task(t, q3, alice)
		a4 := b.Task(t, q3, bob, func(tk *model.Task) { tk.Status = model.TaskRunning })
		g1, g2, g3 := q1.Group.ID, q2.Group.ID, q3.Group.ID
		for _, c := range []struct {
			name string
			f    store.TaskFilter
			want []*model.Task
		}{
			{"a group and the user", store.TaskFilter{GroupIDs: []string{g1}, VisibleToUserID: alice.ID}, []*model.Task{a1, a3}},
			{"two groups", store.TaskFilter{GroupIDs: []string{g1, g2}}, []*model.Task{a1, a2}},
			{"restricted to groups", store.TaskFilter{GroupIDs: []string{g2}, RestrictToGroups: true}, []*model.Task{a2}},
			{"restricted, no groups, the user", store.TaskFilter{RestrictToGroups: true, VisibleToUserID: alice.ID}, []*model.Task{a3}},
			{"restricted, no groups, no user", store.TaskFilter{RestrictToGroups: true}, nil},
			{"the user alone does not filter", store.TaskFilter{VisibleToUserID: alice.ID}, []*model.Task{a1, a2, a3, a4}},
			{"groups and status", store.TaskFilter{GroupIDs: []string{g3}, VisibleToUserID: bob.ID,
				Statuses: []model.TaskStatus{model.TaskQueued}}, []*model.Task{a1, a2, a3}},
			{"groups and owner", store.TaskFilter{GroupIDs: []string{g1, g3}, OwnerID: alice.ID}, []*model.Task{a3}},
		} {
			checkTaskFilter(t, b, c.name, c.f, c.want)
		}
	})

	setup.Run(t, "CountQueuedByGroup counts each group's queued tasks, the tenant's only", func(t *testing.T, b *harness.Bundle) {
		q1, q2, q3 := b.Queue(t), b.Queue(t), b.Queue(t)
		owner := b.User(t)
		b.Task(t, q1, owner)
		b.Task(t, q1, owner)
		b.Task(t, q1, owner, func(tk *model.Task) { tk.Status = model.TaskRunning })
		b.Task(t, q2, owner)
		b.Task(t, q3, owner, func(tk *model.Task) { tk.Status = model.TaskFailed })
		theirQ := otherQueue(t, b)
		theirOwner := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		b.Task(t, theirQ, theirOwner, func(tk *model.Task) { tk.TenantID = b.Other.ID })
		got, err := b.Store.CountQueuedByGroup(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "queued by group", got, map[string]int{q1.Group.ID: 2, q2.Group.ID: 1})
	})

	setup.Run(t, "ListTasks and CountTasks see only the tenant's tasks", func(t *testing.T, b *harness.Bundle) {
		mine := b.Task(t, b.Queue(t), b.User(t))
		theirQ := otherQueue(t, b)
		theirOwner := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		theirs := b.Task(t, theirQ, theirOwner, func(tk *model.Task) { tk.TenantID = b.Other.ID })
		checkTaskFilter(t, b, "tenant", store.TaskFilter{}, []*model.Task{mine})
		checkTaskFilter(t, b, "another tenant's queue", store.TaskFilter{ComputeResourceID: theirQ.CR.ID}, nil)
		got, err := b.Store.ListTasks(b.Ctx, b.Other.ID, store.TaskFilter{}, store.Page{}, false)
		harness.Must(t, err)
		harness.CheckEqual(t, "other tenant's list", taskIDs(got...), []string{theirs.ID})
	})
}

// taskQueueOrder checks the queue's order: the tasks ahead of one, and
// sequence numbers unique and increasing under concurrent enqueues.
func taskQueueOrder(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CountQueuedAhead counts the queued tasks of the compute resource before a sequence number", func(t *testing.T, b *harness.Bundle) {
		q1, q2 := b.Queue(t), b.Queue(t)
		owner := b.User(t)
		t1 := b.Task(t, q1, owner)
		b.Task(t, q1, owner, func(tk *model.Task) { tk.Status = model.TaskRunning }) // not queued
		t3 := b.Task(t, q1, owner)
		b.Task(t, q2, owner) // another queue
		t5 := b.Task(t, q1, owner)
		for _, c := range []struct {
			seq  int64
			want int
		}{
			{t1.QueueSeq, 0},
			{t3.QueueSeq, 1},
			{t5.QueueSeq, 2},
			{t5.QueueSeq + 1, 3},
		} {
			n, err := b.Store.CountQueuedAhead(b.Ctx, b.Tenant.ID, q1.CR.ID, store.QueuePlace{Rank: model.QueueRankUnlisted, Order: c.seq, Seq: c.seq})
			harness.Must(t, err)
			harness.CheckEqual(t, fmt.Sprintf("ahead of %d", c.seq), n, c.want)
		}
		n, err := b.Store.CountQueuedAhead(b.Ctx, b.Other.ID, q1.CR.ID, store.QueuePlace{Rank: model.QueueRankUnlisted, Order: t5.QueueSeq + 1, Seq: t5.QueueSeq + 1})
		harness.Must(t, err)
		harness.CheckEqual(t, "ahead, seen from another tenant", n, 0)
	})

	t.Run("QueueSeq is unique and increasing under 32 transactions enqueueing at once", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		q, owner := b.Queue(t), b.User(t)
		const workers = 32
		var wg sync.WaitGroup
		seqs := make([][2]int64, workers)
		errs := make([]error, workers)
		for i := range workers {
			wg.Go(func() {
				errs[i] = b.Store.InTx(b.Ctx, func(tx store.Queries) error {
					for j := range 2 {
						tk := &model.Task{TenantID: b.Tenant.ID, OwnerID: owner.ID, ComputeResourceID: q.CR.ID,
							GroupID: q.Group.ID, Name: fmt.Sprintf("w%d-%d", i, j), Status: model.TaskQueued}
						if err := tx.CreateTask(b.Ctx, tk); err != nil {
							return err
						}
						seqs[i][j] = tk.QueueSeq
					}
					return nil
				})
			})
		}
		wg.Wait()
		harness.Must(t, errors.Join(errs...))
		seen := map[int64]bool{}
		for i, s := range seqs {
			if s[1] <= s[0] {
				t.Fatalf("worker %d: QueueSeq %d then %d in one transaction", i, s[0], s[1])
			}
			for _, v := range s {
				if seen[v] {
					t.Fatalf("QueueSeq %d handed out twice", v)
				}
				seen[v] = true
			}
		}
		all, err := b.Store.ListTasks(b.Ctx, b.Tenant.ID, store.TaskFilter{}, store.Page{}, false)
		harness.Must(t, err)
		harness.CheckEqual(t, "tasks stored", len(all), 2*workers)
		for i := 1; i < len(all); i++ {
			if all[i].QueueSeq <= all[i-1].QueueSeq {
				t.Fatalf("list not in strictly increasing QueueSeq order at %d", i)
			}
		}
	})
}

// otherQueue builds a queue in the second tenant.
func otherQueue(t *testing.T, b *harness.Bundle) *harness.Queue {
	t.Helper()
	g := b.Group(t, func(x *model.Group) { x.TenantID = b.Other.ID })
	pol := b.Policy(t, g.ID, func(x *model.ResourcePolicy) { x.TenantID = b.Other.ID })
	prof := b.Profile(t, func(x *model.Profile) { x.TenantID = b.Other.ID })
	cr := b.ComputeResource(t, pol.ID, prof.ID, func(x *model.ComputeResource) { x.TenantID = b.Other.ID })
	return &harness.Queue{Group: g, Policy: pol, Profile: prof, CR: cr}
}

// checkTaskFilter checks that ListTasks (both orders) and CountTasks agree
// with the expected tasks, given in queue order.
func checkTaskFilter(t *testing.T, b *harness.Bundle, name string, f store.TaskFilter, want []*model.Task) {
	t.Helper()
	wantIDs := taskIDs(want...)
	got, err := b.Store.ListTasks(b.Ctx, b.Tenant.ID, f, store.Page{}, false)
	harness.Must(t, err)
	harness.CheckEqual(t, name+": ListTasks", taskIDs(got...), wantIDs)
	got, err = b.Store.ListTasks(b.Ctx, b.Tenant.ID, f, store.Page{}, true)
	harness.Must(t, err)
	harness.CheckEqual(t, name+": ListTasks newest first", taskIDs(got...), reversed(wantIDs))
	n, err := b.Store.CountTasks(b.Ctx, b.Tenant.ID, f)
	harness.Must(t, err)
	harness.CheckEqual(t, name+": CountTasks", n, len(want))
}

// reversed returns a reversed copy of s.
func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
