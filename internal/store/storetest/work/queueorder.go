package work

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// queuedOrder is the ids of a compute resource's queued tasks in queue order.
func queuedOrder(t *testing.T, b *harness.Bundle, crID string) []string {
	t.Helper()
	ts, err := b.Store.ListQueued(b.Ctx, b.Tenant.ID, crID, 0)
	harness.Must(t, err)
	return taskIDs(ts...)
}

// taskQueueMoves checks a team lead's queue order: the project priority
// ranks a group's tasks, and a move changes one task's place atomically.
func taskQueueMoves(t *testing.T, setup harness.Setup) {
	setup.Run(t, "SetProjectPriorities ranks the group's tasks; ListQueued, CountQueuedAhead and ListSchedulable follow", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		owner := b.User(t)
		p1, p2 := b.Project(t), b.Project(t)
		in := func(p *model.Project) func(*model.Task) { return func(tk *model.Task) { tk.ProjectID = p.ID } }
		t1, t2, t3, t4 := b.Task(t, q, owner, in(p1)), b.Task(t, q, owner, in(p2)), b.Task(t, q, owner), b.Task(t, q, owner, in(p1))
		harness.CheckEqual(t, "rank before any priority", t1.QueueRank, model.QueueRankUnlisted)
		harness.CheckEqual(t, "order before any move", t1.QueueOrder, t1.QueueSeq)
		harness.CheckEqual(t, "queue before", queuedOrder(t, b, q.CR.ID), taskIDs(t1, t2, t3, t4))

		harness.Must(t, b.Store.SetProjectPriorities(b.Ctx, b.Tenant.ID, q.Group.ID, []string{p2.ID, p1.ID}))
		got, err := b.Store.ProjectPriorities(b.Ctx, b.Tenant.ID, q.Group.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "priority", got, []string{p2.ID, p1.ID})
		harness.CheckEqual(t, "queue after", queuedOrder(t, b, q.CR.ID), taskIDs(t2, t1, t4, t3))
		t5 := b.Task(t, q, owner, in(p2))
		harness.CheckEqual(t, "rank of a task made after", t5.QueueRank, 0)
		harness.CheckEqual(t, "queue with a new task", queuedOrder(t, b, q.CR.ID), taskIDs(t2, t5, t1, t4, t3))
		cur, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, t4.ID)
		harness.Must(t, err)
		n, err := b.Store.CountQueuedAhead(b.Ctx, b.Tenant.ID, q.CR.ID, store.PlaceOf(cur))
		harness.Must(t, err)
		harness.CheckEqual(t, "ahead of t4", n, 3)
		heads, err := b.Store.ListSchedulable(b.Ctx, b.Tenant.ID, 2)
		harness.Must(t, err)
		var ids []string
		for _, h := range heads {
			if h.ComputeResourceID == q.CR.ID {
				ids = append(ids, h.ID)
			}
		}
		harness.CheckEqual(t, "queue heads", ids, taskIDs(t2, t5))

		t.Log("a project of no tenant's, or another tenant's group, changes nothing")
		harness.WantErr(t, b.Store.SetProjectPriorities(b.Ctx, b.Tenant.ID, q.Group.ID, []string{p1.ID, model.NewID()}), store.ErrNotFound)
		harness.WantErr(t, b.Store.SetProjectPriorities(b.Ctx, b.Other.ID, q.Group.ID, []string{p1.ID}), store.ErrNotFound)
		got, err = b.Store.ProjectPriorities(b.Ctx, b.Tenant.ID, q.Group.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "priority after the refusals", got, []string{p2.ID, p1.ID})
		harness.CheckEqual(t, "queue after the refusals", queuedOrder(t, b, q.CR.ID), taskIDs(t2, t5, t1, t4, t3))

		harness.Must(t, b.Store.SetProjectPriorities(b.Ctx, b.Tenant.ID, q.Group.ID, nil))
		harness.CheckEqual(t, "queue once cleared", queuedOrder(t, b, q.CR.ID), taskIDs(t1, t2, t3, t4, t5))
	})

	setup.Run(t, "MoveQueuedTask moves next to a task, to the front and the back, and refuses what is not queued", func(t *testing.T, b *harness.Bundle) {
		q, other := b.Queue(t), b.Queue(t)
		owner := b.User(t)
		t1, t2, t3, t4 := b.Task(t, q, owner), b.Task(t, q, owner), b.Task(t, q, owner), b.Task(t, q, owner)
		elsewhere := b.Task(t, other, owner)
		running := b.Task(t, q, owner, func(tk *model.Task) { tk.Status = model.TaskRunning })
		move := func(m store.QueueMove, from, to int) {
			t.Helper()
			f, tt, err := b.Store.MoveQueuedTask(b.Ctx, b.Tenant.ID, m)
			harness.Must(t, err)
			harness.CheckEqual(t, "from, to", [2]int{f, tt}, [2]int{from, to})
		}
		move(store.QueueMove{TaskID: t4.ID, AnchorID: t2.ID, Ahead: true}, 4, 2)
		harness.CheckEqual(t, "after ahead of", queuedOrder(t, b, q.CR.ID), taskIDs(t1, t4, t2, t3))
		move(store.QueueMove{TaskID: t1.ID, AnchorID: t2.ID}, 1, 3)
		harness.CheckEqual(t, "after behind", queuedOrder(t, b, q.CR.ID), taskIDs(t4, t2, t1, t3))
		move(store.QueueMove{TaskID: t3.ID, Ahead: true}, 4, 1)
		harness.CheckEqual(t, "after to the front", queuedOrder(t, b, q.CR.ID), taskIDs(t3, t4, t2, t1))
		move(store.QueueMove{TaskID: t3.ID}, 1, 4)
		harness.CheckEqual(t, "after to the back", queuedOrder(t, b, q.CR.ID), taskIDs(t4, t2, t1, t3))
		for i := 0; i < 40; i++ { // no room left between neighbours: the queue makes some
			move(store.QueueMove{TaskID: t1.ID, AnchorID: t2.ID, Ahead: true}, 3, 2)
			move(store.QueueMove{TaskID: t2.ID, AnchorID: t1.ID, Ahead: true}, 3, 2)
		}
		harness.CheckEqual(t, "after back and forth", queuedOrder(t, b, q.CR.ID), taskIDs(t4, t2, t1, t3))
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, t2.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "queue sequence number kept", got.QueueSeq, t2.QueueSeq)

		for _, c := range []struct {
			name string
			m    store.QueueMove
			err  error
		}{
			{"a task not queued", store.QueueMove{TaskID: running.ID, Ahead: true}, store.ErrConflict},
			{"next to a task not queued", store.QueueMove{TaskID: t1.ID, AnchorID: running.ID}, store.ErrConflict},
			{"next to a task of another compute resource", store.QueueMove{TaskID: t1.ID, AnchorID: elsewhere.ID}, store.ErrConflict},
			{"next to itself", store.QueueMove{TaskID: t1.ID, AnchorID: t1.ID}, store.ErrConflict},
			{"an unknown task", store.QueueMove{TaskID: model.NewID(), Ahead: true}, store.ErrNotFound},
		} {
			_, _, err := b.Store.MoveQueuedTask(b.Ctx, b.Tenant.ID, c.m)
			harness.WantErr(t, err, c.err)
			harness.CheckEqual(t, c.name+": queue", queuedOrder(t, b, q.CR.ID), taskIDs(t4, t2, t1, t3))
		}
		_, _, err = b.Store.MoveQueuedTask(b.Ctx, b.Other.ID, store.QueueMove{TaskID: t1.ID, Ahead: true})
		harness.WantErr(t, err, store.ErrNotFound)
		harness.CheckEqual(t, "another tenant's move: queue", queuedOrder(t, b, q.CR.ID), taskIDs(t4, t2, t1, t3))
	})
}
