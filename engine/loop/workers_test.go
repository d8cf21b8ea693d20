package loop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/store"
)

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
