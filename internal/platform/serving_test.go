package platform_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/apps"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// TestServingIndex: a serving instance launched with a route joins the
// route's endpoints when its worker reports it ready (on the event), and
// leaves them when it is reported not ready, when its worker is lost (the
// engine requeues it), and when it is stopped; a fresh index rebuilt from
// the store agrees at each step; the gateway's grant carries the route's
// static URLs and the instance's base URL, and the index says how to reach
// the instance (its worker, attempt and address). A launch on a route that
// does not exist is refused with how to create it.
func TestServingIndex(t *testing.T) {
	platformtest.ForEachStore(t, func(t *testing.T, pb *platformtest.Bundle) {
		b := &testBundle{pb}
		b.ApplyExample(t)
		ps := b.people(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		b.Svc.FollowServing(ctx, time.Hour)
		idx := b.Svc.Serving()

		vllm := func(route string) (*model.AppInstance, error) {
			return b.Svc.LaunchApp(ps.rita, platform.LaunchInput{App: "vllm", ComputeResource: "1 A100", Project: "fraud-models",
				Values: map[string]any{"model": "meta-llama/Llama-3.1-8B-Instruct"}, Route: route})
		}
		_, err := vllm("gone")
		platformtest.WantError(t, err, platform.CodeInvalid, "no static route 'gone'", "routes: [{name: gone, app: vllm}]", "klique apply")
		_, err = b.Svc.LaunchApp(ps.rita, platform.LaunchInput{App: "jupyterlab", ComputeResource: "1 A100", Project: "fraud-models", Route: "llama-70b"})
		platformtest.WantError(t, err, platform.CodeInvalid, "only a serving app's instances can serve route 'llama-70b'")

		in, err := vllm("llama-70b")
		platformtest.Must(t, err)
		id := in.Task.ID
		url := appnet.InstanceBaseURL(id)
		static := []string{"http://10.0.3.17:8000/v1", "http://10.0.3.18:8000/v1"}
		route := &model.Route{Name: "llama-70b", Endpoints: static}
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
		if a == nil || a.TaskID != id {
			t.Fatalf("claimed %+v, want the instance", a)
		}
		beat := func(st *agentapi.AppStatus) {
			t.Helper()
			_, err := b.Svc.Heartbeat(wctx, agentapi.HeartbeatRequest{WorkerID: reg.WorkerID,
				Tasks: []agentapi.TaskHeartbeat{{TaskID: id, Attempt: a.Attempt, App: st}}})
			platformtest.Must(t, err)
		}
		// serving waits until the live index (following events) and one
		// rebuilt from the store both give the route these endpoints.
		serving := func(what string, want ...string) {
			t.Helper()
			want = append(slices.Clone(static), want...)
			if !eventually.Poll(5*time.Second, func() bool { return slices.Equal(idx.Endpoints(b.Tenant, route), want) }) {
				t.Fatalf("%s: the route's endpoints are %v, want %v", what, idx.Endpoints(b.Tenant, route), want)
			}
			fresh := apps.NewServing()
			platformtest.Must(t, fresh.Rebuild(context.Background(), b.Store))
			if got := fresh.Endpoints(b.Tenant, route); !slices.Equal(got, want) {
				t.Fatalf("%s: rebuilt from the store, the route's endpoints are %v, want %v", what, got, want)
			}
			if got := fresh.Endpoints("another-tenant", route); !slices.Equal(got, static) {
				t.Fatalf("%s: another tenant's route of the same name gets %v", what, got)
			}
		}

		serving("claimed, not yet ready")
		beat(&agentapi.AppStatus{Ready: true, Address: "127.0.0.1:41234"})
		serving("reported ready", url)
		if tg, ok := idx.Target(id); !ok || tg.Address != "127.0.0.1:41234" || tg.WorkerID != reg.WorkerID || tg.Attempt != a.Attempt || tg.TenantID != b.Tenant {
			t.Fatalf("the instance's target: %+v %v", tg, ok)
		}
		// The gateway's grant: the static URLs, then the instance.
		grant, err := b.Svc.AuthorizeModelCall(ps.rita, "chat", "fraud-models", time.Now())
		platformtest.Must(t, err)
		var eps []string
		for _, u := range grant.Upstreams {
			if u.Route != nil && u.Route.Name == "llama-70b" {
				eps = u.Route.Endpoints
			}
		}
		if !slices.Equal(eps, append(slices.Clone(static), url)) {
			t.Fatalf("the grant's route endpoints %v, want the static ones and %s", eps, url)
		}
		// A route naming the app takes its instances too.
		if got := idx.Endpoints(b.Tenant, &model.Route{Name: "other", App: "vllm"}); !slices.Equal(got, []string{url}) {
			t.Fatalf("a route of app vllm: %v", got)
		}
		if got := idx.Endpoints(b.Tenant, &model.Route{Name: "other", App: "sglang"}); len(got) != 0 {
			t.Fatalf("a route of another app: %v", got)
		}

		beat(&agentapi.AppStatus{Ready: false})
		serving("failing its health path")
		beat(&agentapi.AppStatus{Ready: true, Address: "127.0.0.1:41234"})
		serving("ready again", url)

		// Its worker is lost: the engine requeues the instance.
		cur, err := b.Store.GetTask(context.Background(), b.Tenant, id)
		platformtest.Must(t, err)
		platformtest.Must(t, b.Svc.RequeueLost(context.Background(), b.Tenant, []*model.Task{cur}, time.Now(), 3))
		serving("its worker lost")
		if _, ok := idx.Target(id); ok {
			t.Fatal("a lost instance can still be reached through the index")
		}

		// Placed and claimed again, ready, then stopped.
		_, err = eng.PassAll(context.Background())
		platformtest.Must(t, err)
		a, err = b.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 1, WaitSeconds: 1})
		platformtest.Must(t, err)
		if a == nil || a.TaskID != id {
			t.Fatalf("claimed again %+v", a)
		}
		beat(&agentapi.AppStatus{Ready: true, Address: "127.0.0.1:41235"})
		serving("ready on its second attempt", url)
		_, err = b.Svc.StopApp(ps.rita, id)
		platformtest.Must(t, err)
		serving("stopped")
	}, platformtest.WithEvents())
}
