package work

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// placement builds the ledger interval of placing tk on pool at start.
func placement(tk *model.Task, poolID string, start time.Time, mods ...func(*model.Placement)) *model.Placement {
	p := &model.Placement{TenantID: tk.TenantID, TaskID: tk.ID, UserID: tk.OwnerID, UserName: "owner",
		ProjectID: tk.ProjectID, ProjectName: "project", GroupID: tk.GroupID, GroupName: "group",
		PolicyID: tk.PolicyID, ProfileID: tk.ProfileID, ProfileName: "profile",
		ComputeResourceID: tk.ComputeResourceID, ComputeResourceName: "1 GPU", PoolID: poolID, PoolName: "pool",
		GPUClassID: "class", GPUClassName: "h100", Size: tk.Size.Total(), WeightMilli: 1000,
		PriceMicros: 2_000_000, Currency: "USD", StartedAt: start}
	for _, m := range mods {
		m(p)
	}
	return p
}

func placedReason(p *model.Placement) string { return "placed on pool " + p.PoolID }

func schedIDs(ts []store.SchedTask) []string {
	var ids []string
	for _, t := range ts {
		ids = append(ids, t.ID)
	}
	sort.Strings(ids)
	return ids
}

// Engine checks what the engine's loop reads and writes: schedulable work,
// placements and preemption, audit batches, estate versions, tenant locks,
// queue states, pauses and leases.
func Engine(t *testing.T, setup harness.Setup) {
	enginePlacement(t, setup)
	engineAuditAndLocks(t, setup)
	enginePreemption(t, setup)
	engineQueueStatesAndPauses(t, setup)
	engineLeases(t, setup)
}

// enginePlacement checks what the engine reads and writes each round: the
// schedulable work, and the placements it makes, in batches.
func enginePlacement(t *testing.T, setup harness.Setup) {
	setup.Run(t, "ListSchedulable returns held work and the first tasks of each queue, and nothing of another tenant", func(t *testing.T, b *harness.Bundle) {
		owner := b.User(t)
		q1, q2 := b.Queue(t), b.Queue(t)
		var q1Tasks, q2Tasks []*model.Task
		for i := 0; i < 5; i++ {
			q1Tasks = append(q1Tasks, b.Task(t, q1, owner))
			q2Tasks = append(q2Tasks, b.Task(t, q2, owner))
		}
		pool := b.Pool(t)
		_, err := b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, []*model.Placement{placement(q1Tasks[0], pool.ID, b.Now)}, placedReason)
		harness.Must(t, err)
		aborted := q2Tasks[0]
		aborted.Status = model.TaskAborted
		harness.Must(t, b.Store.UpdateTask(b.Ctx, aborted))
		theirs := otherQueue(t, b)
		b.Task(t, theirs, b.User(t, func(u *model.User) { u.TenantID = b.Other.ID }), func(tk *model.Task) {
			tk.TenantID, tk.ComputeResourceID, tk.PolicyID, tk.ProfileID, tk.GroupID = b.Other.ID, theirs.CR.ID, theirs.Policy.ID, theirs.Profile.ID, theirs.Group.ID
		})

		got, err := b.Store.ListSchedulable(b.Ctx, b.Tenant.ID, 2)
		harness.Must(t, err)
		want := []string{q1Tasks[0].ID, q1Tasks[1].ID, q1Tasks[2].ID, q2Tasks[1].ID, q2Tasks[2].ID}
		sort.Strings(want)
		harness.CheckEqual(t, "schedulable tasks", schedIDs(got), want)
		for _, st := range got {
			if st.ID == q1Tasks[0].ID {
				if st.Status != model.TaskPlaced || st.PoolID != pool.ID || !st.PlacedAt.Equal(b.Now.Truncate(time.Microsecond)) {
					t.Fatalf("held task read as %+v", st)
				}
			} else if st.Status != model.TaskQueued || st.PoolID != "" || st.Size != q1.Profile.Size {
				t.Fatalf("queued task read as %+v", st)
			}
		}
		held, err := b.Store.ListSchedulable(b.Ctx, b.Tenant.ID, 0)
		harness.Must(t, err)
		harness.CheckEqual(t, "held only", schedIDs(held), []string{q1Tasks[0].ID})
	})

	setup.Run(t, "PlaceTasks places queued tasks with their ledger interval and skips tasks no longer queued", func(t *testing.T, b *harness.Bundle) {
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		a, c := b.Task(t, q, owner), b.Task(t, q, owner)
		c.Status = model.TaskAborted
		harness.Must(t, b.Store.UpdateTask(b.Ctx, c))
		placed, err := b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, []*model.Placement{placement(a, pool.ID, b.Now), placement(c, pool.ID, b.Now)}, placedReason)
		harness.Must(t, err)
		harness.CheckEqual(t, "placed", placed, []string{a.ID})
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, a.ID)
		harness.Must(t, err)
		if got.Status != model.TaskPlaced || got.PoolID != pool.ID || got.Reason != "placed on pool "+pool.ID || got.PlacedAt == nil || got.QueueSeq != a.QueueSeq {
			t.Fatalf("placed task reads %+v", got)
		}
		open, err := b.Store.ListPlacements(b.Ctx, b.Tenant.ID, store.PlacementFilter{OpenOnly: true})
		harness.Must(t, err)
		if len(open) != 1 || open[0].TaskID != a.ID || open[0].EndedAt != nil || open[0].Size != a.Size.Total() || open[0].PriceMicros != 2_000_000 {
			t.Fatalf("open intervals %s", harness.Show(open))
		}
		// A placement for another tenant in this tenant's pass is refused.
		_, err = b.Store.PlaceTasks(b.Ctx, b.Other.ID, []*model.Placement{placement(a, pool.ID, b.Now)}, placedReason)
		if err == nil {
			t.Fatal("a placement of one tenant was written in another tenant's pass")
		}
	})

	setup.Run(t, "PlaceTasks places more tasks than one batch holds, on several pools", func(t *testing.T, b *harness.Bundle) {
		owner, q := b.User(t), b.Queue(t)
		p1, p2 := b.Pool(t), b.Pool(t)
		var ps []*model.Placement
		for i := 0; i < 450; i++ {
			pool := p1.ID
			if i%3 == 0 {
				pool = p2.ID
			}
			ps = append(ps, placement(b.Task(t, q, owner), pool, b.Now))
		}
		placed, err := b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, ps, placedReason)
		harness.Must(t, err)
		harness.CheckEqual(t, "placed", len(placed), 450)
		n, err := b.Store.CountTasks(b.Ctx, b.Tenant.ID, store.TaskFilter{PoolID: p2.ID, Statuses: []model.TaskStatus{model.TaskPlaced}})
		harness.Must(t, err)
		harness.CheckEqual(t, "placed on the second pool", n, 150)
		open, err := b.Store.ListPlacements(b.Ctx, b.Tenant.ID, store.PlacementFilter{OpenOnly: true})
		harness.Must(t, err)
		harness.CheckEqual(t, "open intervals", len(open), 450)
	})
}

// engineAuditAndLocks checks the engine's audit entries, the estate's
// version, and the tenant lock that keeps a round from overlapping a change.
func engineAuditAndLocks(t *testing.T, setup harness.Setup) {
	setup.Run(t, "InsertAudits writes entries in order with increasing sequence numbers", func(t *testing.T, b *harness.Bundle) {
		first := b.Audit(t)
		var es []*model.AuditEntry
		for i := 0; i < 410; i++ {
			es = append(es, &model.AuditEntry{TenantID: b.Tenant.ID, At: b.Now, ActorName: "engine", Channel: "engine",
				Action: "task.placed", ObjectKind: "task", ObjectID: fmt.Sprint(i), Detail: "placed"})
		}
		harness.Must(t, b.Store.InsertAudits(b.Ctx, es))
		for i, e := range es {
			if e.ID == "" || e.Seq <= first.Seq || (i > 0 && e.Seq <= es[i-1].Seq) {
				t.Fatalf("entry %d: id %q seq %d (previous %d)", i, e.ID, e.Seq, first.Seq)
			}
		}
		got, err := b.Store.ListAudit(b.Ctx, b.Tenant.ID, store.AuditFilter{}, store.Page{Limit: 2})
		harness.Must(t, err)
		harness.CheckEqual(t, "newest entry", got[0].ObjectID, "409")
		last := b.Audit(t)
		if last.Seq <= es[len(es)-1].Seq {
			t.Fatalf("an entry after the batch got seq %d, not after %d", last.Seq, es[len(es)-1].Seq)
		}
	})

	setup.Run(t, "EstateVersion starts at 0 and grows with each bump, per tenant", func(t *testing.T, b *harness.Bundle) {
		v, err := b.Store.EstateVersion(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "first version", v, int64(0))
		for want := int64(1); want <= 3; want++ {
			v, err = b.Store.BumpEstateVersion(b.Ctx, b.Tenant.ID)
			harness.Must(t, err)
			harness.CheckEqual(t, "bumped", v, want)
		}
		v, err = b.Store.EstateVersion(b.Ctx, b.Other.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "other tenant's version", v, int64(0))
		_, err = b.Store.BumpEstateVersion(b.Ctx, model.NewID())
		harness.WantErr(t, err, store.ErrNotFound)
	})

	t.Run("LockTenantShared holders go on together and the exclusive lock waits for them", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		if b.Store.Driver() == "sqlite" {
			t.Skip("SQLite runs write transactions one at a time; there is nothing to share")
		}
		sharedIn := make(chan struct{}, 2)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				harness.Must(t, b.Store.InTx(b.Ctx, func(q store.Queries) error {
					if err := q.LockTenantShared(b.Ctx, b.Tenant.ID); err != nil {
						return err
					}
					sharedIn <- struct{}{}
					<-release
					return nil
				}))
			}()
		}
		<-sharedIn
		<-sharedIn // both shared holders are in at once
		var exclusive atomic.Bool
		done := make(chan error, 1)
		starting, began := make(chan struct{}), make(chan struct{})
		go func() {
			close(starting)
			done <- b.Store.InTx(b.Ctx, func(q store.Queries) error {
				close(began)
				err := q.LockTenant(b.Ctx, b.Tenant.ID)
				exclusive.Store(true)
				return err
			})
		}()
		watchLock(b, starting, began)
		if exclusive.Load() {
			t.Fatal("the exclusive lock was taken while shared holders held it")
		}
		close(release)
		wg.Wait()
		harness.Must(t, <-done)
	})
}

// enginePreemption checks how a placement ends: preempted back to the
// queue in its old order, or its interval closed.
func enginePreemption(t *testing.T, setup harness.Setup) {
	setup.Run(t, "PreemptTasks requeues in the old order and closes the interval; a second placement opens a new one", func(t *testing.T, b *harness.Bundle) {
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		a := b.Task(t, q, owner)
		_, err := b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, []*model.Placement{placement(a, pool.ID, b.Now)}, placedReason)
		harness.Must(t, err)
		later := b.Now.Add(90 * time.Minute)
		done, err := b.Store.PreemptTasks(b.Ctx, b.Tenant.ID, []store.Preemption{{TaskID: a.ID, Reason: "preempted: reclaimed by group A"}}, later)
		harness.Must(t, err)
		harness.CheckEqual(t, "preempted", done, []string{a.ID})
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, a.ID)
		harness.Must(t, err)
		if got.Status != model.TaskQueued || got.PoolID != "" || got.PlacedAt != nil || got.QueueSeq != a.QueueSeq || got.Reason != "preempted: reclaimed by group A" {
			t.Fatalf("preempted task reads %+v", got)
		}
		// Preempting a queued task does nothing.
		done, err = b.Store.PreemptTasks(b.Ctx, b.Tenant.ID, []store.Preemption{{TaskID: a.ID, Reason: "again"}}, later)
		harness.Must(t, err)
		harness.CheckEqual(t, "preempted again", len(done), 0)
		_, err = b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, []*model.Placement{placement(a, pool.ID, later.Add(time.Hour))}, placedReason)
		harness.Must(t, err)
		all, err := b.Store.ListPlacements(b.Ctx, b.Tenant.ID, store.PlacementFilter{TaskID: a.ID})
		harness.Must(t, err)
		if len(all) != 2 || all[0].EndedAt == nil || !all[0].EndedAt.Equal(later.Truncate(time.Microsecond)) ||
			all[0].EndReason != "preempted: reclaimed by group A" || all[1].EndedAt != nil {
			t.Fatalf("intervals %s", harness.Show(all))
		}
	})

	setup.Run(t, "EndPlacement closes the open interval, never before it started, and is a no-op without one", func(t *testing.T, b *harness.Bundle) {
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		a := b.Task(t, q, owner)
		harness.Must(t, b.Store.EndPlacement(b.Ctx, b.Tenant.ID, a.ID, b.Now, "nothing open"))
		_, err := b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, []*model.Placement{placement(a, pool.ID, b.Now)}, placedReason)
		harness.Must(t, err)
		harness.Must(t, b.Store.EndPlacement(b.Ctx, b.Tenant.ID, a.ID, b.Now.Add(-time.Second), "aborted by ada"))
		all, err := b.Store.ListPlacements(b.Ctx, b.Tenant.ID, store.PlacementFilter{TaskID: a.ID})
		harness.Must(t, err)
		if len(all) != 1 || all[0].EndedAt == nil || !all[0].EndedAt.Equal(all[0].StartedAt) || all[0].EndReason != "aborted by ada" {
			t.Fatalf("intervals %s", harness.Show(all))
		}
	})
}

// engineQueueStatesAndPauses checks the queue states the engine keeps per
// compute resource, and its pauses, which budget hours leave out.
func engineQueueStatesAndPauses(t *testing.T, setup harness.Setup) {
	setup.Run(t, "queue states are put, replaced, listed and deleted per compute resource", func(t *testing.T, b *harness.Bundle) {
		until := b.Now.Add(time.Hour)
		s1 := &model.QueueState{TenantID: b.Tenant.ID, ComputeResourceID: "cr-1", TaskID: "t1", Constraint: "pools_full", Reason: "full", UpdatedAt: b.Now}
		s2 := &model.QueueState{TenantID: b.Tenant.ID, ComputeResourceID: "cr-2", TaskID: "t2", Constraint: "budget_used_up", Reason: "spent", Until: &until, UpdatedAt: b.Now}
		harness.Must(t, b.Store.PutQueueState(b.Ctx, s1))
		harness.Must(t, b.Store.PutQueueState(b.Ctx, s2))
		s1b := *s1
		s1b.TaskID, s1b.Constraint, s1b.Reason = "t3", "group_at_limit", "at limit"
		harness.Must(t, b.Store.PutQueueState(b.Ctx, &s1b))
		got, err := b.Store.ListQueueStates(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(got) != 2 || got[0].TaskID != "t3" || got[0].Constraint != "group_at_limit" || got[1].Until == nil || !got[1].Until.Equal(until.Truncate(time.Microsecond)) {
			t.Fatalf("states %s", harness.Show(got))
		}
		other, err := b.Store.ListQueueStates(b.Ctx, b.Other.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "other tenant's states", len(other), 0)
		one, err := b.Store.GetQueueState(b.Ctx, b.Tenant.ID, "cr-1")
		harness.Must(t, err)
		harness.CheckEqual(t, "cr-1's head", one.TaskID, "t3")
		_, err = b.Store.GetQueueState(b.Ctx, b.Other.ID, "cr-1")
		harness.WantErr(t, err, store.ErrNotFound)
		harness.Must(t, b.Store.DeleteQueueState(b.Ctx, b.Tenant.ID, "cr-1"))
		_, err = b.Store.GetQueueState(b.Ctx, b.Tenant.ID, "cr-1")
		harness.WantErr(t, err, store.ErrNotFound)
		got, err = b.Store.ListQueueStates(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "states left", len(got), 1)
	})

	setup.Run(t, "engine pauses open once, close, and list by overlap", func(t *testing.T, b *harness.Bundle) {
		harness.WantErr(t, b.Store.EndEnginePause(b.Ctx, b.Tenant.ID, b.Now), store.ErrNotFound)
		harness.Must(t, b.Store.StartEnginePause(b.Ctx, &model.EnginePause{TenantID: b.Tenant.ID, StartedAt: b.Now, ByUserID: "u", ByName: "ada"}))
		harness.WantErr(t, b.Store.StartEnginePause(b.Ctx, &model.EnginePause{TenantID: b.Tenant.ID, StartedAt: b.Now.Add(time.Minute), ByUserID: "u", ByName: "ada"}), store.ErrConflict)
		open, err := b.Store.ListEnginePauses(b.Ctx, b.Tenant.ID, b.Now.Add(-time.Hour), b.Now.Add(time.Hour))
		harness.Must(t, err)
		if len(open) != 1 || open[0].EndedAt != nil || open[0].ByName != "ada" {
			t.Fatalf("pauses %s", harness.Show(open))
		}
		harness.Must(t, b.Store.EndEnginePause(b.Ctx, b.Tenant.ID, b.Now.Add(30*time.Minute)))
		harness.Must(t, b.Store.StartEnginePause(b.Ctx, &model.EnginePause{TenantID: b.Tenant.ID, StartedAt: b.Now.Add(2 * time.Hour), ByUserID: "u", ByName: "ada"}))
		all, err := b.Store.ListEnginePauses(b.Ctx, b.Tenant.ID, b.Now.Add(-time.Hour), b.Now.Add(3*time.Hour))
		harness.Must(t, err)
		if len(all) != 2 || all[0].EndedAt == nil || all[1].EndedAt != nil {
			t.Fatalf("pauses %s", harness.Show(all))
		}
		before, err := b.Store.ListEnginePauses(b.Ctx, b.Tenant.ID, b.Now.Add(-3*time.Hour), b.Now.Add(-time.Hour))
		harness.Must(t, err)
		harness.CheckEqual(t, "pauses before", len(before), 0)
		others, err := b.Store.ListEnginePauses(b.Ctx, b.Other.ID, b.Now.Add(-time.Hour), b.Now.Add(3*time.Hour))
		harness.Must(t, err)
		harness.CheckEqual(t, "other tenant's pauses", len(others), 0)
	})
}

// engineLeases checks the lease that lets one replica run the engine.
func engineLeases(t *testing.T, setup harness.Setup) {
	setup.Run(t, "a lease has one holder until it expires or is released", func(t *testing.T, b *harness.Bundle) {
		ok, err := b.Store.AcquireLease(b.Ctx, "engine", "a", b.Now, 10*time.Second)
		harness.Must(t, err)
		harness.CheckEqual(t, "a takes the free lease", ok, true)
		ok, err = b.Store.AcquireLease(b.Ctx, "engine", "b", b.Now.Add(5*time.Second), 10*time.Second)
		harness.Must(t, err)
		harness.CheckEqual(t, "b while a holds it", ok, false)
		ok, err = b.Store.AcquireLease(b.Ctx, "engine", "a", b.Now.Add(8*time.Second), 10*time.Second)
		harness.Must(t, err)
		harness.CheckEqual(t, "a renews", ok, true)
		ok, err = b.Store.AcquireLease(b.Ctx, "engine", "b", b.Now.Add(17*time.Second), 10*time.Second)
		harness.Must(t, err)
		harness.CheckEqual(t, "b before a's renewal expires", ok, false)
		ok, err = b.Store.AcquireLease(b.Ctx, "engine", "b", b.Now.Add(18*time.Second), 10*time.Second)
		harness.Must(t, err)
		harness.CheckEqual(t, "b after a's lease expired", ok, true)
		harness.Must(t, b.Store.ReleaseLease(b.Ctx, "engine", "a")) // not a's any more: no effect
		ok, err = b.Store.AcquireLease(b.Ctx, "engine", "a", b.Now.Add(19*time.Second), 10*time.Second)
		harness.Must(t, err)
		harness.CheckEqual(t, "a while b holds it", ok, false)
		harness.Must(t, b.Store.ReleaseLease(b.Ctx, "engine", "b"))
		ok, err = b.Store.AcquireLease(b.Ctx, "engine", "a", b.Now.Add(19*time.Second), 10*time.Second)
		harness.Must(t, err)
		harness.CheckEqual(t, "a after b released it", ok, true)
	})

	t.Run("of many replicas racing for a free lease exactly one wins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ok, err := b.Store.AcquireLease(b.Ctx, "race", string(rune('a'+i)), b.Now, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					winners++
					mu.Unlock()
				}
			}(i)
		}
		wg.Wait()
		harness.CheckEqual(t, "winners", winners, 1)
	})
}

// Ledger checks the placement intervals that usage is summed from.
func Ledger(t *testing.T, setup harness.Setup) {
	ledgerSums(t, setup)
	ledgerGroupsAndLists(t, setup)
}

// ledgerBundle gives a test its own bundle with three intervals around a
// range [10:00, 14:00) of the day it returns:
//
//	a: 2 GPUs on pool p1 from 09:00 to 11:30   -> 1.5 h in range, 3 GPU-h
//	b: 0.5 GPU on pool p2 from 12:00, still open at 13:00 (now) -> 0.5 GPU-h
//	c: 8 GPUs on pool p1 from 14:00 to 15:00   -> outside the range
func ledgerBundle(t *testing.T, setup harness.Setup) (*harness.Bundle, time.Time) {
	b := setup(t)
	day := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	owner, q := b.User(t), b.Queue(t)
	mk := func(size model.Size, pool string, from, to time.Time, price int64, currency string, weight int64) {
		tk := b.Task(t, q, owner, func(tk *model.Task) { tk.Size = size })
		p := placement(tk, pool, from, func(p *model.Placement) {
			p.PoolName, p.PriceMicros, p.Currency, p.WeightMilli = pool, price, currency, weight
		})
		_, err := b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, []*model.Placement{p}, placedReason)
		harness.Must(t, err)
		if !to.IsZero() {
			harness.Must(t, b.Store.EndPlacement(b.Ctx, b.Tenant.ID, tk.ID, to, "completed"))
		}
	}
	mk(model.Size{Nodes: 1, PerNode: 2000}, "p1", at(9, 0), at(11, 30), 2_000_000, "USD", 2000)
	mk(model.Size{Nodes: 1, PerNode: 500}, "p2", at(12, 0), time.Time{}, 1_000_000, "EUR", 500)
	mk(model.Size{Nodes: 2, PerNode: 4000}, "p1", at(14, 0), at(15, 0), 2_000_000, "USD", 8000)
	return b, day
}

// ledgerSums checks SumUsage's hours: intervals cut at the range, open ones
// counted up to now, and the engine's pauses left out of budget hours.
func ledgerSums(t *testing.T, setup harness.Setup) {
	t.Run("SumUsage cuts intervals at the range and counts open ones up to now", func(t *testing.T) {
		t.Parallel()
		b, day := ledgerBundle(t, setup)
		rows, err := b.Store.SumUsage(b.Ctx, b.Tenant.ID, store.UsageQuery{From: day.Add(10 * time.Hour), To: day.Add(14 * time.Hour), Now: day.Add(13 * time.Hour)})
		harness.Must(t, err)
		if len(rows) != 1 {
			t.Fatalf("rows %s", harness.Show(rows))
		}
		r := rows[0]
		harness.CheckEqual(t, "GPU-hours (µ)", r.MicroGPUHours, int64(3_500_000))
		// Budget hours are hours × weight, per task: 1.5 h × 2 + 1 h × 0.5.
		harness.CheckEqual(t, "budget hours (µ)", r.MicroBudgetHours, int64(3_500_000))
		// Cost: 3 GPU-h × 2 + 0.5 GPU-h × 1, in two currencies.
		if r.Cost < 6.4999 || r.Cost > 6.5001 || r.Currency != "mixed" {
			t.Fatalf("cost %v %s, want 6.5 mixed", r.Cost, r.Currency)
		}
	})

	t.Run("SumUsage leaves the time the engine was disabled out of budget hours, as the engine charges them, not out of GPU-hours", func(t *testing.T) {
		t.Parallel()
		b, day := ledgerBundle(t, setup)
		at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
		pause := func(tenantID string, from, to time.Time) {
			p := &model.EnginePause{TenantID: tenantID, StartedAt: from, ByUserID: "admin", ByName: "admin"}
			if !to.IsZero() {
				p.EndedAt = &to
			}
			harness.Must(t, b.Store.StartEnginePause(b.Ctx, p))
		}
		pause(b.Tenant.ID, at(9, 30), at(10, 15))   // across the range's start: 15 min in a
		pause(b.Tenant.ID, at(10, 45), at(11, 0))   // 15 min in a
		pause(b.Tenant.ID, at(12, 45), time.Time{}) // still open at 13:00 (now): 15 min in b
		pause(b.Other.ID, at(10, 0), at(14, 0))     // another tenant's: nothing
		now := at(13, 0)
		rows, err := b.Store.SumUsage(b.Ctx, b.Tenant.ID, store.UsageQuery{From: at(10, 0), To: at(14, 0), Now: now})
		harness.Must(t, err)
		if len(rows) != 1 {
			t.Fatalf("rows %s", harness.Show(rows))
		}
		// GPU-hours as without pauses; budget hours: a 90 - 30 min × 2,
		// b 60 - 15 min × 0.5.
		harness.CheckEqual(t, "GPU-hours (µ)", rows[0].MicroGPUHours, int64(3_500_000))
		harness.CheckEqual(t, "budget hours (µ)", rows[0].MicroBudgetHours, int64(2_375_000))

		// From the start of a daily period to now, the ledger's budget
		// hours are what the engine charges the policy.
		intervals, err := b.Store.ListPlacements(b.Ctx, b.Tenant.ID, store.PlacementFilter{From: day, To: now})
		harness.Must(t, err)
		pauses, err := b.Store.ListEnginePauses(b.Ctx, b.Tenant.ID, day, now)
		harness.Must(t, err)
		pol := &model.ResourcePolicy{ID: intervals[0].PolicyID, Budget: &model.TimeBudget{MilliHours: 100_000, Period: model.PeriodDay}}
		charged := engine.BudgetUsed([]*model.ResourcePolicy{pol}, intervals, pauses, now)[pol.ID]
		rows, err = b.Store.SumUsage(b.Ctx, b.Tenant.ID, store.UsageQuery{From: day, To: now, Now: now})
		harness.Must(t, err)
		harness.CheckEqual(t, "budget hours since the period started (µ)", rows[0].MicroBudgetHours, charged)
		harness.CheckEqual(t, "what the engine charges (µ)", charged, int64(3_375_000))
	})
}

// ledgerGroupsAndLists checks SumUsage's groupings and empty answers, and
// ListPlacements.
func ledgerGroupsAndLists(t *testing.T, setup harness.Setup) {
	t.Run("SumUsage groups by dimension with ids and names", func(t *testing.T) {
		t.Parallel()
		b, day := ledgerBundle(t, setup)
		rows, err := b.Store.SumUsage(b.Ctx, b.Tenant.ID, store.UsageQuery{From: day, To: day.Add(24 * time.Hour), Now: day.Add(13 * time.Hour), By: []string{store.ByPool}})
		harness.Must(t, err)
		got := map[string]int64{}
		for _, r := range rows {
			if len(r.Keys) != 1 || r.Keys[0].Dimension != store.ByPool || r.Keys[0].Name != r.Keys[0].ID {
				t.Fatalf("row keys %s", harness.Show(r.Keys))
			}
			got[r.Keys[0].Name] = r.MicroGPUHours
		}
		// p1: 2 GPUs × 2.5 h + 8 GPUs × 1 h; p2: 0.5 GPU × 1 h up to now.
		harness.CheckEqual(t, "GPU-hours by pool", got, map[string]int64{"p1": 13_000_000, "p2": 500_000})
		_, err = b.Store.SumUsage(b.Ctx, b.Tenant.ID, store.UsageQuery{From: day, To: day.Add(time.Hour), Now: day, By: []string{"planet"}})
		if err == nil {
			t.Fatal("an unknown dimension was accepted")
		}
		// GPU work has no model: grouped by one, it is under an empty key,
		// never dropped.
		rows, err = b.Store.SumUsage(b.Ctx, b.Tenant.ID, store.UsageQuery{From: day, To: day.Add(24 * time.Hour), Now: day.Add(13 * time.Hour), By: []string{store.ByModel, store.ByPool}})
		harness.Must(t, err)
		if len(rows) != 2 || rows[0].Keys[0] != (model.UsageKey{Dimension: store.ByModel}) || rows[0].Keys[1].Name != "p1" || rows[0].MicroGPUHours != 13_000_000 {
			t.Fatalf("by model and pool: %s", harness.Show(rows))
		}
	})

	t.Run("SumUsage over a range with no usage is empty, and another tenant sees none", func(t *testing.T) {
		t.Parallel()
		b, day := ledgerBundle(t, setup)
		rows, err := b.Store.SumUsage(b.Ctx, b.Tenant.ID, store.UsageQuery{From: day.Add(-48 * time.Hour), To: day.Add(-24 * time.Hour), Now: day.Add(13 * time.Hour)})
		harness.Must(t, err)
		harness.CheckEqual(t, "rows", len(rows), 0)
		rows, err = b.Store.SumUsage(b.Ctx, b.Other.ID, store.UsageQuery{From: day, To: day.Add(24 * time.Hour), Now: day.Add(13 * time.Hour)})
		harness.Must(t, err)
		harness.CheckEqual(t, "other tenant's rows", len(rows), 0)
	})

	t.Run("ListPlacements lists intervals overlapping a range, oldest first", func(t *testing.T) {
		t.Parallel()
		b, day := ledgerBundle(t, setup)
		got, err := b.Store.ListPlacements(b.Ctx, b.Tenant.ID, store.PlacementFilter{From: day.Add(11 * time.Hour), To: day.Add(14 * time.Hour)})
		harness.Must(t, err)
		if len(got) != 2 || got[0].PoolName != "p1" || got[1].PoolName != "p2" {
			t.Fatalf("intervals %s", harness.Show(got))
		}
	})
}
