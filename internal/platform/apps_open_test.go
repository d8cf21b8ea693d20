package platform_test

import (
	"context"
	"testing"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// TestRouteInstancesAndOpening: the router's reads. An instance launched
// with a route is behind it once it is ready, for its owner and admins;
// a member of another group opens neither it nor the route's list; one
// shared with the group is opened by the group's members; another tenant
// is told the route does not exist; a route nobody knows is not found.
func TestRouteInstancesAndOpening(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t) // has the static route llama-70b
		ps := b.people(t)
		in, err := b.Svc.LaunchApp(ps.rita, platform.LaunchInput{App: "vllm", ComputeResource: "1 A100", Project: "fraud-models", Route: "llama-70b", Values: map[string]any{"model": "meta-llama/Llama-3.1-8B-Instruct"}})
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
		if a == nil || a.TaskID != in.Task.ID {
			t.Fatalf("claimed %+v, want the instance", a)
		}
		behind := func(who context.Context) int {
			t.Helper()
			list, err := b.Svc.RouteInstances(who, "llama-70b")
			platformtest.Must(t, err)
			return len(list)
		}
		if n := behind(ps.rita); n != 0 {
			t.Fatalf("an instance that is not ready is behind the route (%d)", n)
		}
		_, err = b.Svc.Heartbeat(wctx, agentapi.HeartbeatRequest{WorkerID: reg.WorkerID,
			Tasks: []agentapi.TaskHeartbeat{{TaskID: a.TaskID, Attempt: a.Attempt, App: &agentapi.AppStatus{Ready: true, Address: "10.0.0.7:41234"}}}})
		platformtest.Must(t, err)
		for _, who := range []context.Context{ps.rita, b.Admin} {
			list, err := b.Svc.RouteInstances(who, "llama-70b")
			platformtest.Must(t, err)
			if len(list) != 1 || list[0].Task.ID != in.Task.ID || list[0].Address != "10.0.0.7:41234" {
				t.Fatalf("behind llama-70b: %+v", list)
			}
			got, err := b.Svc.OpenAppInstance(who, in.Task.ID)
			platformtest.Must(t, err)
			if got.State != "ready" || got.Address != "10.0.0.7:41234" {
				t.Fatalf("opened %s at %q", got.State, got.Address)
			}
		}

		t.Log("a member of another group (and one of its group it was not shared with) opens nothing")
		for _, who := range []context.Context{ps.vic, ps.both} {
			if n := behind(who); n != 0 {
				t.Fatalf("a caller it is not shared with finds %d instances behind the route", n)
			}
			_, err = b.Svc.OpenAppInstance(who, in.Task.ID)
			platformtest.WantError(t, err, platform.CodeNotFound, "no app instance")
		}

		t.Log("another tenant is told the route does not exist, and the instance neither")
		nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme", "root")
		platformtest.Must(t, err)
		acme := b.SignIn(t, nt.Secret)
		_, err = b.Svc.RouteInstances(acme, "llama-70b")
		platformtest.WantError(t, err, platform.CodeNotFound, "no route 'llama-70b'")
		_, err = b.Svc.OpenAppInstance(acme, in.Task.ID)
		platformtest.WantError(t, err, platform.CodeNotFound, "no app instance")

		t.Log("a route nobody knows is not found; a blank one is refused")
		_, err = b.Svc.RouteInstances(ps.rita, "no-such-route")
		platformtest.WantError(t, err, platform.CodeNotFound, "no route 'no-such-route'")
		_, err = b.Svc.RouteInstances(ps.rita, " ")
		platformtest.WantError(t, err, platform.CodeInvalid, "name the route")
	})
}
