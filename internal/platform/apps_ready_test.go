package platform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// TestAppReadinessFromHeartbeats: the claim hands the worker the app's
// port and health path with {port} left in its command; a heartbeat that
// reports it ready makes the instance ready with its address (seen by its
// owner and admins, not by another group's member), one that reports it
// not ready takes that back, a bad address changes nothing and costs no
// lease, and an app reported completed is failed.
func TestAppReadinessFromHeartbeats(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		in, err := launch(ps.rita, b, "jupyterlab", "1 A100", nil)
		platformtest.Must(t, err)
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
		_, err = eng.PassAll(context.Background())
		platformtest.Must(t, err)
		_, secret, err := b.Svc.CreateWorkerCredential(b.Admin, "bare-metal", "w")
		platformtest.Must(t, err)
		wk, err := b.Svc.AuthenticateWorker(context.Background(), secret)
		platformtest.Must(t, err)
		wctx := identity.WithWorker(context.Background(), wk)
		reg, err := b.Svc.RegisterWorker(wctx, agentapi.RegisterRequest{Hostname: "h1", GPUs: []agentapi.GPU{{Index: 0}}})
		platformtest.Must(t, err)
		a, err := b.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 1, WaitSeconds: 1})
		platformtest.Must(t, err)
		if a == nil || a.TaskID != in.Task.ID || a.App == nil || a.App.Port != 8888 || a.App.HealthPath == "" ||
			!strings.Contains(strings.Join(a.Command, " "), "{port}") || a.Env["KLIQUE_APP_PORT"] != "{port}" {
			t.Fatalf("claimed %+v (app %+v), want the instance with its port, health path and {port} left to fill", a, a.App)
		}
		state := func(who context.Context) (string, string) {
			t.Helper()
			got, err := b.Svc.AppInstance(who, a.TaskID)
			platformtest.Must(t, err)
			return got.State, got.Address
		}
		beat := func(st *agentapi.AppStatus) {
			t.Helper()
			resp, err := b.Svc.Heartbeat(wctx, agentapi.HeartbeatRequest{WorkerID: reg.WorkerID,
				Tasks: []agentapi.TaskHeartbeat{{TaskID: a.TaskID, Attempt: a.Attempt, App: st}}})
			platformtest.Must(t, err)
			if len(resp.Commands) != 0 {
				t.Fatalf("heartbeat commands %+v", resp.Commands)
			}
		}
		if s, addr := state(ps.rita); s != "running" || addr != "" {
			t.Fatalf("claimed: %s %q, want running without an address", s, addr)
		}
		beat(&agentapi.AppStatus{})
		beat(&agentapi.AppStatus{Ready: true, Address: "10.0.0.7:41234"})
		for _, who := range []context.Context{ps.rita, b.Admin} {
			if s, addr := state(who); s != "ready" || addr != "10.0.0.7:41234" {
				t.Fatalf("after a ready heartbeat: %s %q", s, addr)
			}
		}
		_, err = b.Svc.AppInstance(ps.vic, a.TaskID)
		platformtest.WantError(t, err, platform.CodeNotFound, "no app instance")
		beat(&agentapi.AppStatus{Ready: true, Address: "no port here"})
		if s, addr := state(ps.rita); s != "ready" || addr != "10.0.0.7:41234" {
			t.Fatalf("a bad address changed the instance: %s %q", s, addr)
		}
		beat(nil) // not reported: left as it is
		if s, _ := state(ps.rita); s != "ready" {
			t.Fatalf("a heartbeat without the app's status changed it to %s", s)
		}
		beat(&agentapi.AppStatus{Ready: false})
		if s, addr := state(ps.rita); s != "running" || addr != "" {
			t.Fatalf("after a not-ready heartbeat: %s %q", s, addr)
		}

		beat(&agentapi.AppStatus{Ready: true, Address: "10.0.0.7:41234"})
		platformtest.Must(t, b.Svc.FinishTask(wctx, a.TaskID, agentapi.FinishRequest{Attempt: a.Attempt, State: agentapi.StateCompleted}))
		got, err := b.Svc.AppInstance(ps.rita, a.TaskID)
		platformtest.Must(t, err)
		if got.State != "failed" || got.Address != "" || !strings.Contains(got.Task.Reason, "exit code 0") ||
			!strings.Contains(got.Task.Reason, "never completes on its own") {
			t.Fatalf("an app reported completed: %s %q %q", got.State, got.Address, got.Task.Reason)
		}
	})
}

// TestAppReadinessFromTheJob: an HPC job's in-job process reports its
// instance's readiness with its task credential (the node's address); a
// credential for another attempt is forbidden, a bad address is refused
// and changes nothing, a task that is not an app cannot report one, and
// the readiness goes with the instance's end.
func TestAppReadinessFromTheJob(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		in, err := launch(ps.rita, b, "jupyterlab", "1 A100", nil)
		platformtest.Must(t, err)
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
		_, err = eng.PassAll(context.Background())
		platformtest.Must(t, err)
		_, secret, err := b.Svc.CreateWorkerCredential(b.Admin, "bare-metal", "w")
		platformtest.Must(t, err)
		wk, err := b.Svc.AuthenticateWorker(context.Background(), secret)
		platformtest.Must(t, err)
		wctx := identity.WithWorker(context.Background(), wk)
		reg, err := b.Svc.RegisterWorker(wctx, agentapi.RegisterRequest{Hostname: "login1", GPUs: []agentapi.GPU{{Index: 0}}})
		platformtest.Must(t, err)
		a, err := b.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 1, WaitSeconds: 1})
		platformtest.Must(t, err)
		if a == nil || a.TaskID != in.Task.ID || a.App == nil || !strings.Contains(a.App.Batch, "{port}") {
			t.Fatalf("claimed %+v (app %+v), want the instance with its batch line and {port} left for the job", a, a.App)
		}
		job := platform.WithTaskScope(wctx, &platform.TaskScope{TaskID: a.TaskID, Attempt: a.Attempt})
		state := func() (string, string) {
			t.Helper()
			got, err := b.Svc.AppInstance(ps.rita, a.TaskID)
			platformtest.Must(t, err)
			return got.State, got.Address
		}
		report := func(ctx context.Context, attempt int, st agentapi.AppStatus) error {
			return b.Svc.ReportAppStatus(ctx, a.TaskID, agentapi.AppReportRequest{Attempt: attempt, AppStatus: st})
		}
		platformtest.Must(t, report(job, a.Attempt, agentapi.AppStatus{Ready: true, Address: "node17:41234"}))
		if s, addr := state(); s != "ready" || addr != "node17:41234" {
			t.Fatalf("after the job reported ready: %s %q", s, addr)
		}
		other := platform.WithTaskScope(wctx, &platform.TaskScope{TaskID: a.TaskID, Attempt: a.Attempt + 1})
		platformtest.WantError(t, report(other, a.Attempt, agentapi.AppStatus{}), platform.CodeForbidden, "this task credential is for attempt")
		platformtest.WantError(t, report(job, a.Attempt, agentapi.AppStatus{Ready: true, Address: "node17"}), platform.CodeInvalid, "host:port")
		if s, addr := state(); s != "ready" || addr != "node17:41234" {
			t.Fatalf("a refused report changed the instance: %s %q", s, addr)
		}
		platformtest.Must(t, report(job, a.Attempt, agentapi.AppStatus{Ready: false}))
		if s, addr := state(); s != "running" || addr != "" {
			t.Fatalf("after the job reported not ready: %s %q", s, addr)
		}
		platformtest.Must(t, report(job, a.Attempt, agentapi.AppStatus{Ready: true, Address: "node17:41234"}))
		platformtest.Must(t, b.Svc.FinishTask(job, a.TaskID, agentapi.FinishRequest{Attempt: a.Attempt, State: agentapi.StateFailed, ExitCode: 1}))
		if s, addr := state(); s != "failed" || addr != "" {
			t.Fatalf("after the end: %s %q", s, addr)
		}
		platformtest.WantError(t, report(job, a.Attempt, agentapi.AppStatus{Ready: true, Address: "node17:41234"}), platform.CodeConflict, "")
	})
}
