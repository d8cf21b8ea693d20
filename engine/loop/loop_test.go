package loop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

func TestLoopPlacesAndRecordsEveryPlacement(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(smallEstate)
		alice := w.member("alice", "A")
		sub := w.Bus.Subscribe(64, func(e events.Event) bool { return e.Kind == "task.placed" })
		defer sub.Close()
		tasks := w.enqueue(alice, "1 GPU", "research", 7)

		rep := w.pass()
		if rep.Placed != 6 || rep.Preempted != 0 {
			t.Fatalf("report %+v: want 6 placed (A's limit)", rep)
		}
		first := w.task(tasks[0].ID)
		if first.Status != model.TaskPlaced || first.PoolID == "" || !strings.Contains(first.Reason, "placed on pool p1") {
			t.Fatalf("first task %+v", first)
		}
		// First pool first: four on p1, then two on p2.
		byPool := map[string]int{}
		for _, tk := range tasks[:6] {
			byPool[w.task(tk.ID).PoolID]++
		}
		if len(byPool) != 2 {
			t.Fatalf("placed on pools %v", byPool)
		}
		last := w.task(tasks[6].ID)
		reason, err := w.Svc.TaskReason(alice, last)
		if err != nil {
			t.Fatal(err)
		}
		if last.Status != model.TaskQueued || !strings.Contains(reason, "group A is at its limit: it holds 6 of 6 GPUs") {
			t.Fatalf("seventh task %s: %q", last.Status, reason)
		}
		w.consistent(first.TenantID)

		open, err := w.Store.ListPlacements(context.Background(), first.TenantID, store.PlacementFilter{TaskID: first.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(open) != 1 || open[0].UserName != "alice" || open[0].ProjectName != "research" || open[0].GroupName != "A" ||
			open[0].PoolName != "p1" || open[0].GPUClassName != "h100" || open[0].PriceMicros != 2_000_000 || open[0].ComputeResourceName != "1 GPU" {
			t.Fatalf("ledger interval %+v", open)
		}
		entries, err := w.Svc.AuditLog(w.Admin, platform.AuditFilter{ObjectID: first.ID}, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 || entries[0].Action != "task.placed" || entries[0].Channel != "engine" || !strings.Contains(entries[0].Detail, "pool p1") {
			t.Fatalf("audit %+v", entries)
		}
		for i := 0; i < 6; i++ {
			select {
			case e := <-sub.C:
				if e.GroupID == "" || e.TenantID != first.TenantID {
					t.Fatalf("event %+v", e)
				}
			case <-time.After(time.Second):
				t.Fatalf("got %d task.placed events, want 6", i)
			}
		}

		// An hour and a half later the ledger holds 9 GPU-hours.
		w.Clock.Add(90 * time.Minute)
		rows, err := w.Svc.Usage(w.Admin, platform.UsageQuery{From: start.Add(-time.Hour), To: start.Add(24 * time.Hour), By: []string{store.ByUser}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Keys[0].Name != "alice" || rows[0].MicroGPUHours != 9_000_000 || rows[0].Cost < 17.99 || rows[0].Cost > 18.01 {
			t.Fatalf("usage %+v", rows)
		}
		// Aborting a placed task closes its interval and frees its GPU: the
		// waiting task is placed on the next pass.
		if _, err := w.Svc.AbortTask(alice, first.ID, "done early"); err != nil {
			t.Fatal(err)
		}
		w.consistent(first.TenantID)
		if rep := w.pass(); rep.Placed != 1 {
			t.Fatalf("after an abort: %+v", rep)
		}
		w.consistent(first.TenantID)
	})
}

func TestLoopReclaimsBorrowedWorkAndRequeuesItInOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(smallEstate)
		alice, bob := w.member("alice", "A"), w.member("bob", "B")
		bs := w.enqueue(bob, "1 GPU", "research", 6)
		if rep := w.pass(); rep.Placed != 6 {
			t.Fatalf("B borrowed %d, want all 6 GPUs", rep.Placed)
		}
		w.Clock.Add(time.Minute)
		as := w.enqueue(alice, "1 GPU", "research", 2)
		rep := w.pass()
		if rep.Preempted != 2 || rep.Placed != 2 {
			t.Fatalf("report %+v: want 2 of B's tasks preempted for A's 2", rep)
		}
		for _, a := range as {
			if got := w.task(a.ID); got.Status != model.TaskPlaced {
				t.Fatalf("A's task %s", got.Status)
			}
		}
		var requeued []*model.Task
		for _, b := range bs {
			if got := w.task(b.ID); got.Status == model.TaskQueued {
				requeued = append(requeued, got)
			}
		}
		if len(requeued) != 2 {
			t.Fatalf("%d of B's tasks requeued", len(requeued))
		}
		// Back at the front in their old order, with the reason.
		for i, r := range requeued {
			pos, err := w.Svc.TaskPosition(bob, r)
			if err != nil {
				t.Fatal(err)
			}
			if pos != i+1 {
				t.Fatalf("requeued task %d at position %d", i, pos)
			}
			reason, err := w.Svc.TaskReason(bob, r)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(reason, "requeued at the front of its compute resource after it was preempted (reclaimed by group A") {
				t.Fatalf("reason %q", reason)
			}
		}
		intervals, err := w.Store.ListPlacements(context.Background(), requeued[0].TenantID, store.PlacementFilter{TaskID: requeued[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(intervals) != 1 || intervals[0].EndedAt == nil || !strings.Contains(intervals[0].EndReason, "reclaimed by group A") {
			t.Fatalf("interval of a preempted task %+v", intervals)
		}
		w.consistent(requeued[0].TenantID)
		// B holds exactly its reservation of 2 plus what is left: nothing
		// is taken below a reservation, and A is within its own.
		views, err := w.Svc.PolicyViews(w.Admin, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if v.Group.Name == "A" && (v.Held != model.GPUs(2) || v.Borrowed != 0) {
				t.Fatalf("A holds %s, borrowed %s", v.Held, v.Borrowed)
			}
			if v.Group.Name == "B" && (v.Held != model.GPUs(4) || v.Waiting != 2) {
				t.Fatalf("B holds %s with %d waiting", v.Held, v.Waiting)
			}
		}
	})
}

const budgetEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: p1, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, timeWeight: 1, pools: [p1]}
groups:
  - {name: V}
policies:
  - group: V
    limit: 8
    timeBudget: {hours: 4, period: week}
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: research}
`

func TestLoopTimeBudgets(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(budgetEstate)
		vic := w.member("vic", "V")
		tasks := w.enqueue(vic, "1 GPU", "research", 2)
		if rep := w.pass(); rep.Placed != 2 {
			t.Fatalf("placed %d", rep.Placed)
		}
		// An hour on: 2 budget hours used, burning 2 per hour.
		w.Clock.Add(time.Hour)
		views, err := w.Svc.PolicyViews(vic, "V")
		if err != nil {
			t.Fatal(err)
		}
		b := views[0].Budget
		if b == nil || b.Used != 2_000_000 || b.Left != 2_000_000 || b.BurnRateMilli != 2000 || b.RunsOutAt == nil ||
			!b.RunsOutAt.Equal(start.Add(2*time.Hour)) || !b.Alert == (2*100 >= 4*80) {
			t.Fatalf("budget view %+v", b)
		}
		// The engine disabled for an hour charges nothing.
		if _, err := w.Svc.SetEngineEnabled(w.Admin, false); err != nil {
			t.Fatal(err)
		}
		if rep := w.pass(); !rep.Disabled || rep.Placed != 0 {
			t.Fatalf("disabled pass %+v", rep)
		}
		w.Clock.Add(time.Hour)
		if _, err := w.Svc.SetEngineEnabled(w.Admin, true); err != nil {
			t.Fatal(err)
		}
		views, err = w.Svc.PolicyViews(vic, "V")
		if err != nil {
			t.Fatal(err)
		}
		if views[0].Budget.Used != 2_000_000 {
			t.Fatalf("used %d µh after an hour disabled, want the 2 h charged before", views[0].Budget.Used)
		}
		// Another hour: 4 of 4 used. The pass preempts both, newest first,
		// and the reason names the budget and its reset.
		w.Clock.Add(time.Hour)
		alerts := w.Bus.Subscribe(8, func(e events.Event) bool { return e.Kind == "budget.alert" })
		defer alerts.Close()
		rep := w.pass()
		if rep.Preempted != 2 {
			t.Fatalf("report %+v, want both preempted", rep)
		}
		got := w.task(tasks[1].ID)
		if got.Status != model.TaskQueued || !strings.Contains(got.Reason, "time budget used up") || !strings.Contains(got.Reason, "resets Monday 2026-11-30 00:00 UTC") {
			t.Fatalf("task %s: %q", got.Status, got.Reason)
		}
		reason, err := w.Svc.TaskReason(vic, got)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(reason, "group V has used its weekly time budget of 4 h") {
			t.Fatalf("waiting reason %q", reason)
		}
		cr, err := w.Svc.ComputeResource(vic, got.ComputeResourceID)
		if err != nil {
			t.Fatal(err)
		}
		if over, err := w.Svc.OverBudget(vic, cr); err != nil || !over {
			t.Fatalf("over budget = %v, %v", over, err)
		}
		if rep := w.pass(); rep.Placed != 0 {
			t.Fatalf("placed %d over budget", rep.Placed)
		}
		// The run-out raised one alert, in the audit trail and as an
		// event, and the second pass did not raise it again.
		select {
		case e := <-alerts.C:
			if e.ObjectName != "V" || e.GroupID == "" {
				t.Fatalf("alert event %+v", e)
			}
		case <-time.After(time.Second):
			t.Fatal("no budget.alert event")
		}
		select {
		case e := <-alerts.C:
			t.Fatalf("a second alert %+v", e)
		default:
		}
		trail, err := w.Svc.AuditLog(w.Admin, platform.AuditFilter{ObjectKind: "resource_policy"}, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var raised []string
		for _, e := range trail {
			if e.Action == "budget.alert" {
				raised = append(raised, e.Detail)
			}
		}
		if len(raised) != 1 || !strings.Contains(raised[0], "group V has used up its weekly time budget of 4 h") {
			t.Fatalf("budget alerts in the audit trail: %q", raised)
		}
		// The next week starts on Monday: the budget is back and work runs.
		w.Clock.Add(5 * 24 * time.Hour)
		if rep := w.pass(); rep.Placed != 2 {
			t.Fatalf("placed %d after the reset", rep.Placed)
		}
		w.consistent(got.TenantID)
	})
}

func TestOnlyTheLeaseHolderRunsPasses(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(smallEstate)
		alice := w.member("alice", "A")
		w.enqueue(alice, "1 GPU", "research", 1)
		other := &loop.Loop{State: platform.EngineState{Store: w.Store}, Planner: w.Svc, Now: w.Clock.Now, Holder: "other replica"}
		if rep := w.pass(); rep.Placed != 1 {
			t.Fatalf("leader placed %d", rep.Placed)
		}
		w.enqueue(alice, "1 GPU", "research", 1)
		reports, err := other.PassAll(context.Background())
		if err != nil || len(reports) != 0 {
			t.Fatalf("a replica without the lease ran %d passes (%v)", len(reports), err)
		}
		// When the leader stops renewing, the lease passes on.
		w.Clock.Add(time.Minute)
		reports, err = other.PassAll(context.Background())
		if err != nil || len(reports) != 1 || reports[0].Placed != 1 {
			t.Fatalf("after the lease expired: %+v, %v", reports, err)
		}
	})
}

func TestRunWakesOnEnqueueAndStops(t *testing.T) {
	w := newWorld(t, platformtest.SQLite(t, worldOptions...))
	w.Clock.Set(time.Now())
	w.loop = &loop.Loop{State: platform.EngineState{Store: w.Store}, Planner: w.Svc, Interval: time.Hour, Holder: "run"}
	w.apply(smallEstate)
	alice := w.member("alice", "A")
	sub := w.Bus.Subscribe(16, loop.WakeOn)
	go func() {
		for range sub.C {
			w.loop.Wake()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.loop.Run(ctx) }()
	task := w.enqueue(alice, "1 GPU", "research", 1)[0]
	if !eventually.Poll(5*time.Second, func() bool { return w.task(task.ID).Status == model.TaskPlaced }) {
		t.Fatal("the loop, with an hour between ticks, did not place the task soon after its enqueue")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sub.Close()
}

// A pass whose snapshot was read before an admin disabled the engine must
// not place what it decided: once SetEngineEnabled(false) has returned,
// nothing is placed. The loop's clock lags the service's here, as a pass
// that began before the disable does.
func TestADisableDuringAPassPlacesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(smallEstate)
		alice := w.member("alice", "A")
		if _, err := w.Svc.SetEngineEnabled(w.Admin, false); err != nil {
			t.Fatal(err)
		}
		tasks := w.enqueue(alice, "1 GPU", "research", 2)
		w.loop.Now = func() time.Time { return w.Clock.Now().Add(-time.Second) }
		rep := w.pass()
		if !rep.Disabled || rep.Placed != 0 {
			t.Fatalf("pass that began before the disable: %+v, want disabled with nothing placed", rep)
		}
		for _, tk := range tasks {
			if got := w.task(tk.ID); got.Status != model.TaskQueued {
				t.Fatalf("task %s is %s after a disable, want QUEUED", tk.ID, got.Status)
			}
		}
		reason, err := w.Svc.TaskReason(alice, w.task(tasks[0].ID))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(reason, "engine is disabled") {
			t.Fatalf("head task's reason %q, want it to say the engine is disabled", reason)
		}
		if _, err := w.Svc.SetEngineEnabled(w.Admin, true); err != nil {
			t.Fatal(err)
		}
		w.loop.Now = w.Clock.Now
		if rep := w.pass(); rep.Disabled || rep.Placed != 2 {
			t.Fatalf("pass after enabling again: %+v, want both placed", rep)
		}
	})
}

// departmentBudgetEstate is budgetEstate with the budget on a department
// above V, V having none of its own.
const departmentBudgetEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: p1, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, timeWeight: 1, pools: [p1]}
departments:
  - {name: D}
groups:
  - {name: V, department: D}
policies:
  - department: D
    limit: 8
    timeBudget: {hours: 4, period: week}
  - group: V
    limit: 8
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: research}
`

// TestLoopDepartmentTimeBudget: a department's time budget is charged its
// teams' work (the loop reads the intervals of the policies below it), its
// policy view shows the use, and when it is used up the pass preempts the
// teams' budgeted work, naming the department.
func TestLoopDepartmentTimeBudget(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(departmentBudgetEstate)
		vic := w.member("vic", "V")
		tasks := w.enqueue(vic, "1 GPU", "research", 2)
		if rep := w.pass(); rep.Placed != 2 {
			t.Fatalf("placed %d", rep.Placed)
		}
		w.Clock.Add(time.Hour)
		views, err := w.Svc.PolicyViews(w.Admin, "D")
		if err != nil {
			t.Fatal(err)
		}
		if len(views) != 1 || views[0].Budget == nil || views[0].Budget.Used != 2_000_000 {
			t.Fatalf("department D's views %+v, want its budget charged V's 2 budget hours", views)
		}
		w.Clock.Add(time.Hour)
		if rep := w.pass(); rep.Preempted != 2 {
			t.Fatalf("report %+v, want both of V's tasks preempted for D's budget", rep)
		}
		got := w.task(tasks[1].ID)
		if got.Status != model.TaskQueued || !strings.Contains(got.Reason, "time budget used up") || !strings.Contains(got.Reason, "D") {
			t.Fatalf("task %s: %q", got.Status, got.Reason)
		}
	})
}
