package loop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

// world is a control plane without HTTP: platformtest's bundle (store,
// platform service, event bus, users) on a fake clock, and the engine loop
// on the same clock.
type world struct {
	*platformtest.Bundle
	t    testing.TB
	loop *loop.Loop
}

// worldOptions give every world an event bus and a clock of its own.
var worldOptions = []platformtest.Option{platformtest.WithEvents(), platformtest.WithClock(start)}

func forEachStore(t *testing.T, fn func(t *testing.T, w *world)) {
	platformtest.ForEachStore(t, func(t *testing.T, b *platformtest.Bundle) { fn(t, newWorld(t, b)) }, worldOptions...)
}

// A Wednesday, so that a weekly budget period runs until Monday.
var start = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// newWorld puts the engine loop over a bundle built with worldOptions.
func newWorld(t testing.TB, b *platformtest.Bundle) *world {
	return &world{Bundle: b, t: t, loop: &loop.Loop{State: b.Store, Planner: b.Svc, Now: b.Clock.Now, Holder: "test"}}
}

func (w *world) apply(doc string) {
	w.t.Helper()
	w.Apply(w.t, []byte(doc))
}

// member creates a member of group and signs in as them.
func (w *world) member(name, group string) context.Context {
	w.t.Helper()
	return w.User(w.t, name, model.RoleMember, group)
}

func (w *world) enqueue(as context.Context, resource, project string, n int) []*model.Task {
	w.t.Helper()
	var out []*model.Task
	for i := 0; i < n; i++ {
		task, err := w.Svc.EnqueueTask(as, platform.EnqueueInput{Name: "train", Project: project, ComputeResource: resource,
			Spec: model.TaskSpec{Command: []string{"python", "train.py"}}})
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, task)
	}
	return out
}

func (w *world) pass() loop.Report {
	w.t.Helper()
	reports, err := w.loop.PassAll(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	if len(reports) != 1 {
		w.t.Fatalf("%d reports, want one per tenant", len(reports))
	}
	return reports[0]
}

func (w *world) task(id string) *model.Task {
	w.t.Helper()
	t, err := w.Svc.Task(w.Admin, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return t
}

// consistent checks the rule that makes the ledger lose nothing: every task
// holding capacity has exactly one open ledger interval, and no other task
// has one.
func (w *world) consistent(tenantID string) {
	w.t.Helper()
	open, err := w.Store.ListPlacements(context.Background(), tenantID, store.PlacementFilter{OpenOnly: true})
	if err != nil {
		w.t.Fatal(err)
	}
	held, err := w.Store.ListSchedulable(context.Background(), tenantID, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	openBy := map[string]int{}
	for _, p := range open {
		openBy[p.TaskID]++
	}
	for _, h := range held {
		if openBy[h.ID] != 1 {
			w.t.Fatalf("task %s holds capacity with %d open ledger intervals", h.ID, openBy[h.ID])
		}
		delete(openBy, h.ID)
	}
	for id := range openBy {
		w.t.Fatalf("task %s holds no capacity but has an open ledger interval", id)
	}
}

const smallEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: p1, kind: kubernetes, capacity: 4, gpuClass: h100}
  - {name: p2, kind: cloud, capacity: 2, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [p1, p2]}
groups:
  - {name: A}
  - {name: B}
policies:
  - group: A
    reservation: 2
    limit: 6
    computeResources: [{name: 1 GPU, profile: one-gpu}]
  - group: B
    reservation: 2
    limit: 6
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: research}
`

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
		other := &loop.Loop{State: w.Store, Planner: w.Svc, Now: w.Clock.Now, Holder: "other replica"}
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
	w.loop = &loop.Loop{State: w.Store, Planner: w.Svc, Interval: time.Hour, Holder: "run"}
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
	deadline := time.Now().Add(5 * time.Second)
	for w.task(task.ID).Status != model.TaskPlaced {
		if time.Now().After(deadline) {
			t.Fatal("the loop, with an hour between ticks, did not place the task soon after its enqueue")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sub.Close()
}

// worker registers a worker daemon of a pool and returns its context and id.
func (w *world) worker(pool, host string) (context.Context, string) {
	w.t.Helper()
	_, secret, err := w.Svc.CreateWorkerCredential(w.Admin, pool, host)
	if err != nil {
		w.t.Fatal(err)
	}
	wk, err := w.Svc.AuthenticateWorker(context.Background(), secret)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx := identity.WithWorker(context.Background(), wk)
	reg, err := w.Svc.RegisterWorker(ctx, agentapi.RegisterRequest{Hostname: host, Version: "test", Mode: "process",
		GPUs: []agentapi.GPU{{Index: 0}, {Index: 1}, {Index: 2}, {Index: 3}}})
	if err != nil {
		w.t.Fatal(err)
	}
	return ctx, reg.WorkerID
}

func TestLostWorkersRequeueTheirTasksThenFailThem(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(smallEstate)
		alice := w.member("alice", "A")
		task := w.enqueue(alice, "1 GPU", "research", 1)[0]
		wctx, wid := w.worker("p1", "gpu-01")
		if rep := w.pass(); rep.Placed != 1 {
			t.Fatalf("first pass placed %d", rep.Placed)
		}
		for attempt := 1; attempt <= loop.DefaultMaxRetries+1; attempt++ {
			a, err := w.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: wid, FreeGPUs: 4})
			if err != nil || a == nil || a.TaskID != task.ID || a.Attempt != attempt {
				t.Fatalf("claim %d: %+v, %v", attempt, a, err)
			}
			// The worker goes silent for longer than its lease. The next
			// pass reaps the attempt before it reads the queues, so the
			// requeued task (at the front, with a retry counted) is placed
			// again in that same pass.
			w.Clock.Add(platform.DefaultLease + time.Second)
			rep := w.pass()
			got := w.task(task.ID)
			if attempt <= loop.DefaultMaxRetries {
				if rep.Placed != 1 || got.Status != model.TaskPlaced || got.Run.Retries != attempt {
					t.Fatalf("after losing attempt %d: placed %d, %s, %d retries", attempt, rep.Placed, got.Status, got.Run.Retries)
				}
				trail, err := w.Svc.AuditLog(w.Admin, platform.AuditFilter{ObjectID: task.ID}, store.Page{Limit: 50})
				if err != nil {
					t.Fatal(err)
				}
				requeued := 0
				for _, e := range trail {
					if e.Action == "task.requeued" && strings.Contains(e.Detail, "worker lost") {
						requeued++
					}
				}
				if requeued != attempt {
					t.Fatalf("after losing attempt %d: %d requeue entries in the audit trail", attempt, requeued)
				}
			} else if rep.Placed != 0 || got.Status != model.TaskFailed || !strings.Contains(got.Reason, "worker lost (4 times; the limit is 3 retries)") {
				t.Fatalf("after the last retry: placed %d, %s %q", rep.Placed, got.Status, got.Reason)
			}
			// The worker comes back: its heartbeat tells it to stop, and its
			// report about the lost attempt is refused.
			hb, err := w.Svc.Heartbeat(wctx, agentapi.HeartbeatRequest{WorkerID: wid, Tasks: []agentapi.TaskHeartbeat{{TaskID: task.ID, Attempt: attempt}}})
			if err != nil || len(hb.Commands) != 1 || hb.Commands[0].Action != agentapi.ActionStop {
				t.Fatalf("heartbeat after the loss: %+v, %v", hb, err)
			}
			err = w.Svc.FinishTask(wctx, task.ID, agentapi.FinishRequest{Attempt: attempt, State: agentapi.StateCompleted})
			if platform.ErrorCode(err) != platform.CodeConflict {
				t.Fatalf("a report about the lost attempt: %v", err)
			}
			w.consistent(task.TenantID)
		}
	})
}

func TestWithNoRetriesALostWorkerFailsItsTask(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.loop.MaxRetries = loop.NoRetries
		w.apply(smallEstate)
		alice := w.member("alice", "A")
		task := w.enqueue(alice, "1 GPU", "research", 1)[0]
		wctx, wid := w.worker("p1", "gpu-01")
		w.pass()
		if a, err := w.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: wid, FreeGPUs: 1}); err != nil || a == nil {
			t.Fatalf("claim: %+v, %v", a, err)
		}
		w.Clock.Add(platform.DefaultLease + time.Second)
		w.pass()
		got := w.task(task.ID)
		if got.Status != model.TaskFailed || !strings.Contains(got.Reason, "worker lost (once; the limit is 0 retries)") {
			t.Fatalf("%s %q", got.Status, got.Reason)
		}
		w.consistent(task.TenantID)
	})
}

func TestPreemptingARunningTaskStopsItOnItsWorker(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		// One pool only, so the GPUs A's guarantee needs can come from
		// nowhere but B's running, borrowed work.
		onePool := strings.Replace(smallEstate, "  - {name: p2, kind: cloud, capacity: 2, gpuClass: h100}\n", "", 1)
		w.apply(strings.Replace(onePool, "pools: [p1, p2]", "pools: [p1]", 1))
		alice, bob := w.member("alice", "A"), w.member("bob", "B")
		wctx, wid := w.worker("p1", "gpu-01")
		w.enqueue(bob, "1 GPU", "research", 4)
		w.pass()
		var heartbeats []agentapi.TaskHeartbeat
		for i := 0; i < 4; i++ {
			a, err := w.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: wid, FreeGPUs: 4})
			if err != nil || a == nil {
				t.Fatalf("claim %d: %+v %v", i, a, err)
			}
			heartbeats = append(heartbeats, agentapi.TaskHeartbeat{TaskID: a.TaskID, Attempt: a.Attempt})
		}
		w.Clock.Add(time.Minute)
		w.enqueue(alice, "1 GPU", "research", 2)
		if rep := w.pass(); rep.Preempted != 2 {
			t.Fatalf("report %+v: want B's 2 borrowed GPUs reclaimed", rep)
		}
		hb, err := w.Svc.Heartbeat(wctx, agentapi.HeartbeatRequest{WorkerID: wid, Tasks: heartbeats})
		if err != nil {
			t.Fatal(err)
		}
		if len(hb.Commands) != 2 {
			t.Fatalf("%d stop commands, want 2: %+v", len(hb.Commands), hb.Commands)
		}
		for _, c := range hb.Commands {
			if c.Action != agentapi.ActionStop || c.State != agentapi.StatePreempted || !strings.Contains(c.Reason, "reclaimed by group A") {
				t.Fatalf("command %+v", c)
			}
			if got := w.task(c.TaskID); got.Status != model.TaskQueued || got.PoolID != "" {
				t.Fatalf("preempted task %s is %s on %q", c.TaskID, got.Status, got.PoolID)
			}
		}
		w.consistent(w.task(heartbeats[0].TaskID).TenantID)
	})
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
