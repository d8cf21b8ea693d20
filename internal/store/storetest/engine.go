package storetest

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
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

func exerciseEngine(t *testing.T, setup setupFunc) {
	t.Run("ListSchedulable returns held work and the first tasks of each queue, and nothing of another tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		owner := b.user(t)
		q1, q2 := b.queue(t), b.queue(t)
		var q1Tasks, q2Tasks []*model.Task
		for i := 0; i < 5; i++ {
			q1Tasks = append(q1Tasks, b.task(t, q1, owner))
			q2Tasks = append(q2Tasks, b.task(t, q2, owner))
		}
		pool := b.pool(t)
		_, err := b.store.PlaceTasks(b.ctx, b.tenant.ID, []*model.Placement{placement(q1Tasks[0], pool.ID, b.now)}, placedReason)
		must(t, err)
		aborted := q2Tasks[0]
		aborted.Status = model.TaskAborted
		must(t, b.store.UpdateTask(b.ctx, aborted))
		theirs := otherQueue(t, b)
		b.task(t, theirs, b.user(t, func(u *model.User) { u.TenantID = b.other.ID }), func(tk *model.Task) {
			tk.TenantID, tk.ComputeResourceID, tk.PolicyID, tk.ProfileID, tk.GroupID = b.other.ID, theirs.cr.ID, theirs.policy.ID, theirs.profile.ID, theirs.group.ID
		})

		got, err := b.store.ListSchedulable(b.ctx, b.tenant.ID, 2)
		must(t, err)
		want := []string{q1Tasks[0].ID, q1Tasks[1].ID, q1Tasks[2].ID, q2Tasks[1].ID, q2Tasks[2].ID}
		sort.Strings(want)
		checkEqual(t, "schedulable tasks", schedIDs(got), want)
		for _, st := range got {
			if st.ID == q1Tasks[0].ID {
				if st.Status != model.TaskPlaced || st.PoolID != pool.ID || !st.PlacedAt.Equal(b.now.Truncate(time.Microsecond)) {
					t.Fatalf("held task read as %+v", st)
				}
			} else if st.Status != model.TaskQueued || st.PoolID != "" || st.Size != q1.profile.Size {
				t.Fatalf("queued task read as %+v", st)
			}
		}
		held, err := b.store.ListSchedulable(b.ctx, b.tenant.ID, 0)
		must(t, err)
		checkEqual(t, "held only", schedIDs(held), []string{q1Tasks[0].ID})
	})

	t.Run("PlaceTasks places queued tasks with their ledger interval and skips tasks no longer queued", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		owner, q, pool := b.user(t), b.queue(t), b.pool(t)
		a, c := b.task(t, q, owner), b.task(t, q, owner)
		c.Status = model.TaskAborted
		must(t, b.store.UpdateTask(b.ctx, c))
		placed, err := b.store.PlaceTasks(b.ctx, b.tenant.ID, []*model.Placement{placement(a, pool.ID, b.now), placement(c, pool.ID, b.now)}, placedReason)
		must(t, err)
		checkEqual(t, "placed", placed, []string{a.ID})
		got, err := b.store.GetTask(b.ctx, b.tenant.ID, a.ID)
		must(t, err)
		if got.Status != model.TaskPlaced || got.PoolID != pool.ID || got.Reason != "placed on pool "+pool.ID || got.PlacedAt == nil || got.QueueSeq != a.QueueSeq {
			t.Fatalf("placed task reads %+v", got)
		}
		open, err := b.store.ListPlacements(b.ctx, b.tenant.ID, store.PlacementFilter{OpenOnly: true})
		must(t, err)
		if len(open) != 1 || open[0].TaskID != a.ID || open[0].EndedAt != nil || open[0].Size != a.Size.Total() || open[0].PriceMicros != 2_000_000 {
			t.Fatalf("open intervals %s", show(open))
		}
		// A placement for another tenant in this tenant's pass is refused.
		_, err = b.store.PlaceTasks(b.ctx, b.other.ID, []*model.Placement{placement(a, pool.ID, b.now)}, placedReason)
		if err == nil {
			t.Fatal("a placement of one tenant was written in another tenant's pass")
		}
	})

	t.Run("PlaceTasks places more tasks than one batch holds, on several pools", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		owner, q := b.user(t), b.queue(t)
		p1, p2 := b.pool(t), b.pool(t)
		var ps []*model.Placement
		for i := 0; i < 450; i++ {
			pool := p1.ID
			if i%3 == 0 {
				pool = p2.ID
			}
			ps = append(ps, placement(b.task(t, q, owner), pool, b.now))
		}
		placed, err := b.store.PlaceTasks(b.ctx, b.tenant.ID, ps, placedReason)
		must(t, err)
		checkEqual(t, "placed", len(placed), 450)
		n, err := b.store.CountTasks(b.ctx, b.tenant.ID, store.TaskFilter{PoolID: p2.ID, Statuses: []model.TaskStatus{model.TaskPlaced}})
		must(t, err)
		checkEqual(t, "placed on the second pool", n, 150)
		open, err := b.store.ListPlacements(b.ctx, b.tenant.ID, store.PlacementFilter{OpenOnly: true})
		must(t, err)
		checkEqual(t, "open intervals", len(open), 450)
	})

	t.Run("InsertAudits writes entries in order with increasing sequence numbers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.audit(t)
		var es []*model.AuditEntry
		for i := 0; i < 410; i++ {
			es = append(es, &model.AuditEntry{TenantID: b.tenant.ID, At: b.now, ActorName: "engine", Channel: "engine",
				Action: "task.placed", ObjectKind: "task", ObjectID: fmt.Sprint(i), Detail: "placed"})
		}
		must(t, b.store.InsertAudits(b.ctx, es))
		for i, e := range es {
			if e.ID == "" || e.Seq <= first.Seq || (i > 0 && e.Seq <= es[i-1].Seq) {
				t.Fatalf("entry %d: id %q seq %d (previous %d)", i, e.ID, e.Seq, first.Seq)
			}
		}
		got, err := b.store.ListAudit(b.ctx, b.tenant.ID, store.AuditFilter{}, store.Page{Limit: 2})
		must(t, err)
		checkEqual(t, "newest entry", got[0].ObjectID, "409")
		last := b.audit(t)
		if last.Seq <= es[len(es)-1].Seq {
			t.Fatalf("an entry after the batch got seq %d, not after %d", last.Seq, es[len(es)-1].Seq)
		}
	})

	t.Run("EstateVersion starts at 0 and grows with each bump, per tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		v, err := b.store.EstateVersion(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "first version", v, int64(0))
		for want := int64(1); want <= 3; want++ {
			v, err = b.store.BumpEstateVersion(b.ctx, b.tenant.ID)
			must(t, err)
			checkEqual(t, "bumped", v, want)
		}
		v, err = b.store.EstateVersion(b.ctx, b.other.ID)
		must(t, err)
		checkEqual(t, "other tenant's version", v, int64(0))
		_, err = b.store.BumpEstateVersion(b.ctx, model.NewID())
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("LockTenantShared holders go on together and the exclusive lock waits for them", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ownStore)
		if b.store.Driver() == "sqlite" {
			t.Skip("SQLite runs write transactions one at a time; there is nothing to share")
		}
		sharedIn := make(chan struct{}, 2)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				must(t, b.store.InTx(b.ctx, func(q store.Queries) error {
					if err := q.LockTenantShared(b.ctx, b.tenant.ID); err != nil {
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
			done <- b.store.InTx(b.ctx, func(q store.Queries) error {
				close(began)
				err := q.LockTenant(b.ctx, b.tenant.ID)
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
		must(t, <-done)
	})

	t.Run("PreemptTasks requeues in the old order and closes the interval; a second placement opens a new one", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		owner, q, pool := b.user(t), b.queue(t), b.pool(t)
		a := b.task(t, q, owner)
		_, err := b.store.PlaceTasks(b.ctx, b.tenant.ID, []*model.Placement{placement(a, pool.ID, b.now)}, placedReason)
		must(t, err)
		later := b.now.Add(90 * time.Minute)
		done, err := b.store.PreemptTasks(b.ctx, b.tenant.ID, []store.Preemption{{TaskID: a.ID, Reason: "preempted: reclaimed by group A"}}, later)
		must(t, err)
		checkEqual(t, "preempted", done, []string{a.ID})
		got, err := b.store.GetTask(b.ctx, b.tenant.ID, a.ID)
		must(t, err)
		if got.Status != model.TaskQueued || got.PoolID != "" || got.PlacedAt != nil || got.QueueSeq != a.QueueSeq || got.Reason != "preempted: reclaimed by group A" {
			t.Fatalf("preempted task reads %+v", got)
		}
		// Preempting a queued task does nothing.
		done, err = b.store.PreemptTasks(b.ctx, b.tenant.ID, []store.Preemption{{TaskID: a.ID, Reason: "again"}}, later)
		must(t, err)
		checkEqual(t, "preempted again", len(done), 0)
		_, err = b.store.PlaceTasks(b.ctx, b.tenant.ID, []*model.Placement{placement(a, pool.ID, later.Add(time.Hour))}, placedReason)
		must(t, err)
		all, err := b.store.ListPlacements(b.ctx, b.tenant.ID, store.PlacementFilter{TaskID: a.ID})
		must(t, err)
		if len(all) != 2 || all[0].EndedAt == nil || !all[0].EndedAt.Equal(later.Truncate(time.Microsecond)) ||
			all[0].EndReason != "preempted: reclaimed by group A" || all[1].EndedAt != nil {
			t.Fatalf("intervals %s", show(all))
		}
	})

	t.Run("EndPlacement closes the open interval, never before it started, and is a no-op without one", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		owner, q, pool := b.user(t), b.queue(t), b.pool(t)
		a := b.task(t, q, owner)
		must(t, b.store.EndPlacement(b.ctx, b.tenant.ID, a.ID, b.now, "nothing open"))
		_, err := b.store.PlaceTasks(b.ctx, b.tenant.ID, []*model.Placement{placement(a, pool.ID, b.now)}, placedReason)
		must(t, err)
		must(t, b.store.EndPlacement(b.ctx, b.tenant.ID, a.ID, b.now.Add(-time.Second), "aborted by ada"))
		all, err := b.store.ListPlacements(b.ctx, b.tenant.ID, store.PlacementFilter{TaskID: a.ID})
		must(t, err)
		if len(all) != 1 || all[0].EndedAt == nil || !all[0].EndedAt.Equal(all[0].StartedAt) || all[0].EndReason != "aborted by ada" {
			t.Fatalf("intervals %s", show(all))
		}
	})

	t.Run("queue states are put, replaced, listed and deleted per compute resource", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		until := b.now.Add(time.Hour)
		s1 := &model.QueueState{TenantID: b.tenant.ID, ComputeResourceID: "cr-1", TaskID: "t1", Constraint: "pools_full", Reason: "full", UpdatedAt: b.now}
		s2 := &model.QueueState{TenantID: b.tenant.ID, ComputeResourceID: "cr-2", TaskID: "t2", Constraint: "budget_used_up", Reason: "spent", Until: &until, UpdatedAt: b.now}
		must(t, b.store.PutQueueState(b.ctx, s1))
		must(t, b.store.PutQueueState(b.ctx, s2))
		s1b := *s1
		s1b.TaskID, s1b.Constraint, s1b.Reason = "t3", "group_at_limit", "at limit"
		must(t, b.store.PutQueueState(b.ctx, &s1b))
		got, err := b.store.ListQueueStates(b.ctx, b.tenant.ID)
		must(t, err)
		if len(got) != 2 || got[0].TaskID != "t3" || got[0].Constraint != "group_at_limit" || got[1].Until == nil || !got[1].Until.Equal(until.Truncate(time.Microsecond)) {
			t.Fatalf("states %s", show(got))
		}
		other, err := b.store.ListQueueStates(b.ctx, b.other.ID)
		must(t, err)
		checkEqual(t, "other tenant's states", len(other), 0)
		one, err := b.store.GetQueueState(b.ctx, b.tenant.ID, "cr-1")
		must(t, err)
		checkEqual(t, "cr-1's head", one.TaskID, "t3")
		_, err = b.store.GetQueueState(b.ctx, b.other.ID, "cr-1")
		wantErr(t, err, store.ErrNotFound)
		must(t, b.store.DeleteQueueState(b.ctx, b.tenant.ID, "cr-1"))
		_, err = b.store.GetQueueState(b.ctx, b.tenant.ID, "cr-1")
		wantErr(t, err, store.ErrNotFound)
		got, err = b.store.ListQueueStates(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "states left", len(got), 1)
	})

	t.Run("engine pauses open once, close, and list by overlap", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.EndEnginePause(b.ctx, b.tenant.ID, b.now), store.ErrNotFound)
		must(t, b.store.StartEnginePause(b.ctx, &model.EnginePause{TenantID: b.tenant.ID, StartedAt: b.now, ByUserID: "u", ByName: "ada"}))
		wantErr(t, b.store.StartEnginePause(b.ctx, &model.EnginePause{TenantID: b.tenant.ID, StartedAt: b.now.Add(time.Minute), ByUserID: "u", ByName: "ada"}), store.ErrConflict)
		open, err := b.store.ListEnginePauses(b.ctx, b.tenant.ID, b.now.Add(-time.Hour), b.now.Add(time.Hour))
		must(t, err)
		if len(open) != 1 || open[0].EndedAt != nil || open[0].ByName != "ada" {
			t.Fatalf("pauses %s", show(open))
		}
		must(t, b.store.EndEnginePause(b.ctx, b.tenant.ID, b.now.Add(30*time.Minute)))
		must(t, b.store.StartEnginePause(b.ctx, &model.EnginePause{TenantID: b.tenant.ID, StartedAt: b.now.Add(2 * time.Hour), ByUserID: "u", ByName: "ada"}))
		all, err := b.store.ListEnginePauses(b.ctx, b.tenant.ID, b.now.Add(-time.Hour), b.now.Add(3*time.Hour))
		must(t, err)
		if len(all) != 2 || all[0].EndedAt == nil || all[1].EndedAt != nil {
			t.Fatalf("pauses %s", show(all))
		}
		before, err := b.store.ListEnginePauses(b.ctx, b.tenant.ID, b.now.Add(-3*time.Hour), b.now.Add(-time.Hour))
		must(t, err)
		checkEqual(t, "pauses before", len(before), 0)
		others, err := b.store.ListEnginePauses(b.ctx, b.other.ID, b.now.Add(-time.Hour), b.now.Add(3*time.Hour))
		must(t, err)
		checkEqual(t, "other tenant's pauses", len(others), 0)
	})

	t.Run("a lease has one holder until it expires or is released", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ok, err := b.store.AcquireLease(b.ctx, "engine", "a", b.now, 10*time.Second)
		must(t, err)
		checkEqual(t, "a takes the free lease", ok, true)
		ok, err = b.store.AcquireLease(b.ctx, "engine", "b", b.now.Add(5*time.Second), 10*time.Second)
		must(t, err)
		checkEqual(t, "b while a holds it", ok, false)
		ok, err = b.store.AcquireLease(b.ctx, "engine", "a", b.now.Add(8*time.Second), 10*time.Second)
		must(t, err)
		checkEqual(t, "a renews", ok, true)
		ok, err = b.store.AcquireLease(b.ctx, "engine", "b", b.now.Add(17*time.Second), 10*time.Second)
		must(t, err)
		checkEqual(t, "b before a's renewal expires", ok, false)
		ok, err = b.store.AcquireLease(b.ctx, "engine", "b", b.now.Add(18*time.Second), 10*time.Second)
		must(t, err)
		checkEqual(t, "b after a's lease expired", ok, true)
		must(t, b.store.ReleaseLease(b.ctx, "engine", "a")) // not a's any more: no effect
		ok, err = b.store.AcquireLease(b.ctx, "engine", "a", b.now.Add(19*time.Second), 10*time.Second)
		must(t, err)
		checkEqual(t, "a while b holds it", ok, false)
		must(t, b.store.ReleaseLease(b.ctx, "engine", "b"))
		ok, err = b.store.AcquireLease(b.ctx, "engine", "a", b.now.Add(19*time.Second), 10*time.Second)
		must(t, err)
		checkEqual(t, "a after b released it", ok, true)
	})

	t.Run("of many replicas racing for a free lease exactly one wins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ownStore)
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ok, err := b.store.AcquireLease(b.ctx, "race", string(rune('a'+i)), b.now, time.Minute)
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
		checkEqual(t, "winners", winners, 1)
	})
}

func exerciseLedger(t *testing.T, setup setupFunc) {
	// Three intervals around a range [10:00, 14:00):
	//   a: 2 GPUs on pool p1 from 09:00 to 11:30   -> 1.5 h in range, 3 GPU-h
	//   b: 0.5 GPU on pool p2 from 12:00, still open at 13:00 (now) -> 0.5 GPU-h
	//   c: 8 GPUs on pool p1 from 14:00 to 15:00   -> outside the range
	ledger := func(t *testing.T) (*testBundle, time.Time) {
		b := setup(t)
		day := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
		at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
		owner, q := b.user(t), b.queue(t)
		mk := func(size model.Size, pool string, from, to time.Time, price int64, currency string, weight int64) {
			tk := b.task(t, q, owner, func(tk *model.Task) { tk.Size = size })
			p := placement(tk, pool, from, func(p *model.Placement) {
				p.PoolName, p.PriceMicros, p.Currency, p.WeightMilli = pool, price, currency, weight
			})
			_, err := b.store.PlaceTasks(b.ctx, b.tenant.ID, []*model.Placement{p}, placedReason)
			must(t, err)
			if !to.IsZero() {
				must(t, b.store.EndPlacement(b.ctx, b.tenant.ID, tk.ID, to, "completed"))
			}
		}
		mk(model.Size{Nodes: 1, PerNode: 2000}, "p1", at(9, 0), at(11, 30), 2_000_000, "USD", 2000)
		mk(model.Size{Nodes: 1, PerNode: 500}, "p2", at(12, 0), time.Time{}, 1_000_000, "EUR", 500)
		mk(model.Size{Nodes: 2, PerNode: 4000}, "p1", at(14, 0), at(15, 0), 2_000_000, "USD", 8000)
		return b, day
	}

	t.Run("SumUsage cuts intervals at the range and counts open ones up to now", func(t *testing.T) {
		t.Parallel()
		b, day := ledger(t)
		rows, err := b.store.SumUsage(b.ctx, b.tenant.ID, store.UsageQuery{From: day.Add(10 * time.Hour), To: day.Add(14 * time.Hour), Now: day.Add(13 * time.Hour)})
		must(t, err)
		if len(rows) != 1 {
			t.Fatalf("rows %s", show(rows))
		}
		r := rows[0]
		checkEqual(t, "GPU-hours (µ)", r.MicroGPUHours, int64(3_500_000))
		// Budget hours are hours × weight, per task: 1.5 h × 2 + 1 h × 0.5.
		checkEqual(t, "budget hours (µ)", r.MicroBudgetHours, int64(3_500_000))
		// Cost: 3 GPU-h × 2 + 0.5 GPU-h × 1, in two currencies.
		if r.Cost < 6.4999 || r.Cost > 6.5001 || r.Currency != "mixed" {
			t.Fatalf("cost %v %s, want 6.5 mixed", r.Cost, r.Currency)
		}
	})

	t.Run("SumUsage groups by dimension with ids and names", func(t *testing.T) {
		t.Parallel()
		b, day := ledger(t)
		rows, err := b.store.SumUsage(b.ctx, b.tenant.ID, store.UsageQuery{From: day, To: day.Add(24 * time.Hour), Now: day.Add(13 * time.Hour), By: []string{store.ByPool}})
		must(t, err)
		got := map[string]int64{}
		for _, r := range rows {
			if len(r.Keys) != 1 || r.Keys[0].Dimension != store.ByPool || r.Keys[0].Name != r.Keys[0].ID {
				t.Fatalf("row keys %s", show(r.Keys))
			}
			got[r.Keys[0].Name] = r.MicroGPUHours
		}
		// p1: 2 GPUs × 2.5 h + 8 GPUs × 1 h; p2: 0.5 GPU × 1 h up to now.
		checkEqual(t, "GPU-hours by pool", got, map[string]int64{"p1": 13_000_000, "p2": 500_000})
		_, err = b.store.SumUsage(b.ctx, b.tenant.ID, store.UsageQuery{From: day, To: day.Add(time.Hour), Now: day, By: []string{"planet"}})
		if err == nil {
			t.Fatal("an unknown dimension was accepted")
		}
	})

	t.Run("SumUsage over a range with no usage is empty, and another tenant sees none", func(t *testing.T) {
		t.Parallel()
		b, day := ledger(t)
		rows, err := b.store.SumUsage(b.ctx, b.tenant.ID, store.UsageQuery{From: day.Add(-48 * time.Hour), To: day.Add(-24 * time.Hour), Now: day.Add(13 * time.Hour)})
		must(t, err)
		checkEqual(t, "rows", len(rows), 0)
		rows, err = b.store.SumUsage(b.ctx, b.other.ID, store.UsageQuery{From: day, To: day.Add(24 * time.Hour), Now: day.Add(13 * time.Hour)})
		must(t, err)
		checkEqual(t, "other tenant's rows", len(rows), 0)
	})

	t.Run("ListPlacements lists intervals overlapping a range, oldest first", func(t *testing.T) {
		t.Parallel()
		b, day := ledger(t)
		got, err := b.store.ListPlacements(b.ctx, b.tenant.ID, store.PlacementFilter{From: day.Add(11 * time.Hour), To: day.Add(14 * time.Hour)})
		must(t, err)
		if len(got) != 2 || got[0].PoolName != "p1" || got[1].PoolName != "p2" {
			t.Fatalf("intervals %s", show(got))
		}
	})
}
