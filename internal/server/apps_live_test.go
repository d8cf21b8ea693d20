package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

const appInstanceSub = `subscription($app: String, $id: ID) { appInstanceChanged(app: $app, id: $id) {
	kind missed instance { id name state address runtime { uptimeSeconds lastActivity } idle { idleMinutes stopsAt stopReason warned } } } }`

// TestAppInstanceChanged follows app instances over a real WebSocket
// (graphql-ws): the owner sees the instance start, become ready and be
// warned by the idle limits, then stopped with the reason; a member of
// another group and another tenant's admin, subscribed the whole time, see
// nothing of it; and a subscription to one instance by id is refused to
// someone who may not see it.
func TestAppInstanceChanged(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withEngine(100*time.Millisecond), withWorkerLease(5*time.Second))
	f := newFixture(t, ts)
	worker := registerWorker(t, ts, f.workerSecret, "gpu-host-apps")
	worker.finish(worker.claim(f.ids["task"]), agentapi.StateCompleted)
	ts.mustGQL(t, f.admin, `mutation($in: AppInput!) { putApp(input: $in) { app { name } } }`, map[string]any{"in": map[string]any{
		"name": "notebook", "kind": "session", "port": 8000, "idleMinutes": 30, "run": map[string]any{"process": "python3 -m http.server {port}"}}})

	_, owner := subscribeWS(t, ts, f.alice, appInstanceSub, map[string]any{"app": "notebook"})
	_, otherGroup := subscribeWS(t, ts, f.victor, appInstanceSub, nil)
	_, otherTenant := subscribeWS(t, ts, f.olga, appInstanceSub, nil)

	// A launch shortening the idle limit to a minute: with the default
	// lead of ten, the first sweep after its start warns it.
	d := ts.mustGQL(t, f.alice, launchMutation, map[string]any{"in": map[string]any{"app": "notebook", "computeResource": "1 GPU",
		"project": "fraud-models", "idleMinutes": 1}})
	id := str(d, "launchApp", "id")
	_, byID := subscribeWS(t, ts, f.alice, appInstanceSub, map[string]any{"id": id})
	c, err := dialWS(ctxFor(t, 10*time.Second), ts.url, bearerInit(f.victor), wsDialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	_, refused, err := c.subscribe(ctxFor(t, 10*time.Second), appInstanceSub, map[string]any{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-refused:
		if ev.Type != "error" || len(ev.Errors) == 0 {
			t.Fatalf("victor subscribed to alice's instance by id: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("victor's subscription to alice's instance by id was neither refused nor answered")
	}

	a := worker.claim(id)
	instanceIs := func(kind, state string) func(*wsUpdate) bool {
		return func(u *wsUpdate) bool {
			return kindOf(u, "appInstanceChanged") == kind && str(u.Data, "appInstanceChanged", "instance", "id") == id &&
				str(u.Data, "appInstanceChanged", "instance", "state") == state
		}
	}
	waitUpdate(t, owner, 10*time.Second, "task.started", instanceIs("task.started", "running"))

	var hb agentapi.HeartbeatResponse
	if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: worker.id,
		Tasks: []agentapi.TaskHeartbeat{{TaskID: id, Attempt: a.Attempt, App: &agentapi.AppStatus{Ready: true, Address: "127.0.0.1:41234"}}}}, &hb); code != http.StatusOK {
		t.Fatalf("heartbeat: %d", code)
	}
	u := waitUpdate(t, owner, 10*time.Second, "app.readiness", instanceIs("app.readiness", "ready"))
	if str(u.Data, "appInstanceChanged", "instance", "address") != "127.0.0.1:41234" {
		t.Fatalf("ready update %s", u.Raw)
	}
	waitUpdate(t, byID, 10*time.Second, "app.readiness by id", instanceIs("app.readiness", "ready"))

	res, err := ts.app.Service.SweepIdle(context.Background())
	if err != nil || res.Warned != 1 {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	u = waitUpdate(t, owner, 10*time.Second, "app.idle_warning", instanceIs("app.idle_warning", "ready"))
	if b, _ := path(u.Data, "appInstanceChanged", "instance", "idle", "warned").(bool); !b ||
		str(u.Data, "appInstanceChanged", "instance", "idle", "stopsAt") == "" ||
		str(u.Data, "appInstanceChanged", "instance", "idle", "stopReason") != "stopped: idle for 1 minute (no traffic, GPU under 5 %, CPU under 5 %)" {
		t.Fatalf("warning update %s", u.Raw)
	}

	ts.mustGQL(t, f.alice, `mutation($id: ID!) { stopApp(id: $id) { id } }`, map[string]any{"id": id})
	waitUpdate(t, owner, 10*time.Second, "task.aborted", instanceIs("task.aborted", "stopped"))
	expectQuiet(t, otherGroup, 300*time.Millisecond, "a member of another group must not see alice's instance")
	expectQuiet(t, otherTenant, 100*time.Millisecond, "another tenant must not see alice's instance")
}
