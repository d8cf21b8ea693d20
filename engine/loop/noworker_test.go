package loop_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/store"
)

const noWorkerEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: p1, kind: kubernetes, capacity: 4, gpuClass: h100, claimTimeout: 3m}
  - {name: p2, kind: bare_metal, capacity: 2, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [p1, p2]}
groups:
  - {name: A}
policies:
  - group: A
    limit: 6
    timeBudget: {hours: 100, period: week}
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: research}
`

// TestWorkPlacedWhereNoWorkerIs follows a task placed on a pool no worker
// serves: its reason says so, it is charged while it holds the pool, and
// after the pool's claim timeout it goes back to the front of its compute
// resource, is no longer charged, and the next pool, which has a worker,
// runs it.
func TestWorkPlacedWhereNoWorkerIs(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.loop.WorkerLease = platform.DefaultLease
		w.apply(noWorkerEstate)
		alice := w.member("alice", "A")
		task := w.enqueue(alice, "1 GPU", "research", 1)[0]
		wctx, wid := w.worker("p2", "gpu-01")
		if rep := w.pass(); rep.Placed != 1 {
			t.Fatalf("first pass placed %d", rep.Placed)
		}
		if got := w.task(task.ID); got.Status != model.TaskPlaced || got.PoolID == "" {
			t.Fatalf("task %s on %q, want placed on p1, the profile's first pool", got.Status, got.PoolID)
		}

		w.Clock.Add(time.Minute)
		reason, err := w.Svc.TaskReason(alice, w.task(task.ID))
		if err != nil {
			t.Fatal(err)
		}
		want := "placed on pool p1; no worker of pool p1 is online (none has registered); unless one claims it by 2026-11-25 09:03:00 UTC, it goes back to the front of its compute resource"
		if reason != want {
			t.Fatalf("reason %q\nwant   %q", reason, want)
		}

		// The claim timeout runs out; p2's worker still heartbeats.
		w.Clock.Add(2 * time.Minute)
		if _, err := w.Svc.Heartbeat(wctx, agentapi.HeartbeatRequest{WorkerID: wid}); err != nil {
			t.Fatal(err)
		}
		if rep := w.pass(); rep.Preempted != 1 {
			t.Fatalf("pass at the claim timeout: %+v, want the task requeued", rep)
		}
		got := w.task(task.ID)
		reason, err = w.Svc.TaskReason(alice, got)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != model.TaskQueued || !strings.HasPrefix(reason, "requeued at the front of its compute resource after it was preempted "+
			"(not claimed within 3m: placed on pool p1; no worker of pool p1 is online (none has registered)); ") {
			t.Fatalf("after the claim timeout: %s, %q", got.Status, reason)
		}
		w.consistent(task.TenantID)

		// The next pass places it on p2, whose worker claims it.
		if rep := w.pass(); rep.Placed != 1 {
			t.Fatalf("pass after the requeue placed %d", rep.Placed)
		}
		if got := w.task(task.ID); got.PoolID == "" || got.Status != model.TaskPlaced {
			t.Fatalf("task %s", got.Status)
		}
		a, err := w.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: wid, FreeGPUs: 4})
		if err != nil || a == nil || a.TaskID != task.ID {
			t.Fatalf("claim on p2: %+v, %v", a, err)
		}

		// The three minutes on p1 were charged, GPU-hours and budget
		// hours alike (docs/engine.md, "Work placed where no worker is"),
		// and nothing after.
		w.Clock.Add(time.Hour)
		rows, err := w.Svc.Usage(w.Admin, platform.UsageQuery{From: start.Add(-time.Hour), To: start.Add(24 * time.Hour), By: []string{store.ByPool}})
		if err != nil {
			t.Fatal(err)
		}
		byPool := map[string]platform.UsageRow{}
		for _, r := range rows {
			byPool[r.Keys[0].Name] = r
		}
		if r := byPool["p1"]; r.MicroGPUHours != 50_000 || r.MicroBudgetHours != 50_000 {
			t.Fatalf("p1 charged %d µGPU-h and %d µbudget-h, want 3 minutes of 1 GPU (50000 each)", r.MicroGPUHours, r.MicroBudgetHours)
		}
		if r := byPool["p2"]; r.MicroGPUHours != 1_000_000 {
			t.Fatalf("p2 charged %d µGPU-h, want an hour", r.MicroGPUHours)
		}
	})
}
