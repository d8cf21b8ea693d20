package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// TestAControlPlaneBackFromAnOutageGivesWorkersAGracePeriod: the control
// plane is down for longer than a worker lease, so every running task's
// lease ran out while no one could heartbeat. The replica that leads
// afterwards (a restarted process: a loop of its own) declares no worker
// lost for one lease; a worker that reports in keeps its tasks running, and
// one that stays away is declared lost once the grace period ends.
func TestAControlPlaneBackFromAnOutageGivesWorkersAGracePeriod(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(smallEstate)
		alice := w.member("alice", "A")
		w.enqueue(alice, "1 GPU", "research", 4)
		if rep := w.pass(); rep.Placed != 4 {
			t.Fatalf("placed %d, want 4", rep.Placed)
		}
		back, backID := w.worker("p1", "gpu-back")
		away, awayID := w.worker("p1", "gpu-away")
		claim := func(ctx context.Context, id string) []agentapi.TaskHeartbeat {
			var out []agentapi.TaskHeartbeat
			for range 2 {
				a, err := w.Svc.ClaimTask(ctx, agentapi.ClaimRequest{WorkerID: id, FreeGPUs: 1})
				if err != nil || a == nil {
					t.Fatalf("claim: %+v, %v", a, err)
				}
				out = append(out, agentapi.TaskHeartbeat{TaskID: a.TaskID, Attempt: a.Attempt})
			}
			return out
		}
		backTasks, awayTasks := claim(back, backID), claim(away, awayID)
		status := func(hbs []agentapi.TaskHeartbeat) []model.TaskStatus {
			var out []model.TaskStatus
			for _, hb := range hbs {
				got := w.task(hb.TaskID)
				if got.Run.Attempt != 1 {
					t.Fatalf("task %s is at attempt %d: it was requeued", hb.TaskID, got.Run.Attempt)
				}
				out = append(out, got.Status)
			}
			return out
		}

		// The outage: 90 s without a control plane, with a 60 s lease.
		w.Clock.Add(platform.DefaultLease + 30*time.Second)
		restarted := &loop.Loop{State: platform.EngineState{Store: w.Store}, Planner: w.Svc, Now: w.Clock.Now, Holder: "restarted", Grace: platform.DefaultLease}
		passes := func(what string) {
			t.Helper()
			reports, err := restarted.PassAll(context.Background())
			if err != nil || len(reports) != 1 {
				t.Fatalf("%s: %+v, %v", what, reports, err)
			}
		}
		passes("first pass after the restart")
		for _, s := range append(status(backTasks), status(awayTasks)...) {
			if s != model.TaskRunning {
				t.Fatalf("after the first pass: a task is %s, want every task still running", s)
			}
		}
		// The worker that is back reports in a few seconds later: it is
		// told to stop nothing, and its leases run again.
		w.Clock.Add(5 * time.Second)
		hb, err := w.Svc.Heartbeat(back, agentapi.HeartbeatRequest{WorkerID: backID, Tasks: backTasks})
		if err != nil || len(hb.Commands) != 0 {
			t.Fatalf("heartbeat in the grace period: %+v, %v", hb, err)
		}
		passes("a pass in the grace period")
		// Just before the grace period ends nothing is lost yet; just
		// after it, the worker that stayed away is.
		w.Clock.Add(platform.DefaultLease - 6*time.Second)
		passes("the last pass in the grace period")
		for _, s := range status(awayTasks) {
			if s != model.TaskRunning {
				t.Fatalf("in the grace period: the silent worker's task is %s", s)
			}
		}
		w.Clock.Add(2 * time.Second)
		passes("the first pass after the grace period")
		for _, s := range status(backTasks) {
			if s != model.TaskRunning {
				t.Fatalf("after the grace period: the reporting worker's task is %s, want running", s)
			}
		}
		for _, hb := range awayTasks {
			if got := w.task(hb.TaskID); got.Run.Retries != 1 || got.Status == model.TaskRunning {
				t.Fatalf("after the grace period: the silent worker's task is %s with %d retries, want requeued", got.Status, got.Run.Retries)
			}
		}
		hb, err = w.Svc.Heartbeat(back, agentapi.HeartbeatRequest{WorkerID: backID, Tasks: backTasks})
		if err != nil || len(hb.Commands) != 0 {
			t.Fatalf("heartbeat after the grace period: %+v, %v", hb, err)
		}
		w.consistent(w.task(backTasks[0].TaskID).TenantID)
	})
}
