package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/config"
)

// withWorkerLease shortens the worker lease (and so the heartbeat interval,
// a quarter of it), so that lost workers are noticed within the test.
func withWorkerLease(d time.Duration) serverOption {
	return func(c *config.Config) { c.WorkerLease = d }
}

// withSubscriptionCaps sets the subscription caps.
func withSubscriptionCaps(perConnection, connectionsPerUser int) serverOption {
	return func(c *config.Config) {
		c.SubscriptionsPerConnection, c.SubscriptionConnectionsPerUser = perConnection, connectionsPerUser
	}
}

// withRedis carries events between replicas over the test Redis.
func withRedis(url string) serverOption {
	return func(c *config.Config) { c.RedisURL = url }
}

// withVaultKey gives replicas that share a database the same vault key.
func withVaultKey(k string) serverOption {
	return func(c *config.Config) { c.VaultKey = k }
}

// bearer is a connection_init payload with a credential.
func bearerInit(cred string) map[string]any {
	return map[string]any{"Authorization": "Bearer " + cred}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// subscribeWS opens a connection as cred and starts one subscription,
// failing t when either is refused.
func subscribeWS(t *testing.T, ts *testServer, cred, query string, vars map[string]any) (*wsClient, <-chan wsEvent) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	c, err := dialWS(ctx, ts.url, bearerInit(cred), wsDialOptions{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.close)
	_, ch, err := c.subscribe(ctx, query, vars)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return c, ch
}

// kindOf returns data.<field>.kind of an update.
func kindOf(u *wsUpdate, field string) string { return str(u.Data, field, "kind") }

// agentWorker is a worker daemon speaking the worker protocol in a test.
type agentWorker struct {
	t      *testing.T
	ts     *testServer
	secret string
	id     string
}

func registerWorker(t *testing.T, ts *testServer, secret, hostname string) *agentWorker {
	t.Helper()
	var out agentapi.RegisterResponse
	code := agentCall(t, ts, secret, http.MethodPost, agentapi.PathRegister, map[string]any{"hostname": hostname,
		"gpus": []any{map[string]any{"index": 0}}, "version": "test", "mode": "process"}, &out)
	if code != http.StatusOK || out.WorkerID == "" {
		t.Fatalf("register worker %s: %d", hostname, code)
	}
	return &agentWorker{t: t, ts: ts, secret: secret, id: out.WorkerID}
}

// claim claims placed tasks until it gets id; the others it claims are
// finished as completed so that they leave the pool.
func (w *agentWorker) claim(id string) *agentapi.Assignment {
	w.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		var out agentapi.ClaimResponse
		code := agentCall(w.t, w.ts, w.secret, http.MethodPost, agentapi.PathClaim, agentapi.ClaimRequest{WorkerID: w.id, FreeGPUs: 8, WaitSeconds: 1}, &out)
		if code == http.StatusOK && out.Task != nil {
			if out.Task.TaskID == id {
				return out.Task
			}
			w.finish(out.Task, agentapi.StateCompleted)
		}
	}
	w.t.Fatalf("worker never claimed task %s", id)
	return nil
}

func (w *agentWorker) finish(a *agentapi.Assignment, state string) {
	w.t.Helper()
	if code := agentCall(w.t, w.ts, w.secret, http.MethodPost, agentapi.PathTasks+a.TaskID+"/finish",
		agentapi.FinishRequest{Attempt: a.Attempt, State: state}, nil); code != http.StatusOK && code != http.StatusNoContent {
		w.t.Fatalf("finish %s as %s: %d", a.TaskID, state, code)
	}
}

func (w *agentWorker) logs(a *agentapi.Assignment, lines ...string) {
	w.t.Helper()
	req := agentapi.LogsRequest{Attempt: a.Attempt}
	for _, l := range lines {
		req.Lines = append(req.Lines, agentapi.LogLine{At: time.Now().UTC(), Stream: "stdout", Line: l})
	}
	if code := agentCall(w.t, w.ts, w.secret, http.MethodPost, agentapi.PathTasks+a.TaskID+"/logs", req, nil); code != http.StatusOK && code != http.StatusNoContent {
		w.t.Fatalf("send logs of %s: %d", a.TaskID, code)
	}
}

func enqueueAs(t *testing.T, ts *testServer, cred, name, project string) string {
	t.Helper()
	d := ts.mustGQL(t, cred, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": name, "project": project, "computeResource": "1 GPU", "command": []any{"python", "train.py"}}})
	return str(d, "enqueueTask", "id")
}

const queueSub = `subscription($cr: ID!) { queueChanged(computeResource: $cr) {
	kind at missed task { id status } computeResource { id name }
	waiting { position reason task { id } } running { id status } queueState { constraint reason } } }`

// queueHas reports whether a queue update is of kind about task id.
func queueHas(kind, id string) func(*wsUpdate) bool {
	return func(u *wsUpdate) bool {
		return kindOf(u, "queueChanged") == kind && str(u.Data, "queueChanged", "task", "id") == id
	}
}

// waitingPosition is the position of task id in a queue update, or 0.
func waitingPosition(u *wsUpdate, id string) int {
	list, _ := path(u.Data, "queueChanged", "waiting").([]any)
	for _, w := range list {
		if str(w, "task", "id") == id {
			n, _ := path(w, "position").(float64)
			return int(n)
		}
	}
	return 0
}

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withEngine(100*time.Millisecond), withWorkerLease(5*time.Second))
	f := newFixture(t, ts)
	crML := f.id(t, "cr ml-research/1 GPU")
	worker := registerWorker(t, ts, f.workerSecret, "gpu-host-8")
	// The fixture's task holds onprem-k8s; finish it so that it does not
	// get in the way.
	worker.finish(worker.claim(f.ids["task"]), agentapi.StateCompleted)
	// So would the fixture's pipeline run: with the engine on, this
	// replica's pipeline controller enqueues its step on 1 GPU whenever
	// its pass comes, ahead of the task a case watches. Aborting the run
	// takes its step out of line, or keeps it from ever being enqueued.
	ts.mustGQL(t, f.alice, `mutation($id: ID!) { abortPipelineRun(id: $id) { id } }`, map[string]any{"id": f.ids["pipeline run"]})

	t.Run("connection_init without a credential, or with a bad one, closes with 4401", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		for name, payload := range map[string]map[string]any{
			"none":             nil,
			"empty":            {},
			"unknown key":      bearerInit("kq_not-a-real-key-0123456789abcdef"),
			"worker secret":    bearerInit(f.workerSecret),
			"token, not valid": {"token": "eyJhbGciOiJFUzI1NiJ9.e30.bad"},
		} {
			_, err := dialWS(ctx, ts.url, payload, wsDialOptions{})
			if code := closeCode(err); code != 4401 {
				t.Errorf("%s: connection ended with %v (close code %d), want close code 4401", name, err, code)
			}
		}
		// The legacy protocol is refused the same way.
		_, err := dialWS(ctx, ts.url, nil, wsDialOptions{proto: protoLegacyWS})
		if code := closeCode(err); code != 4401 {
			t.Errorf("graphql-ws without a credential: %v (close code %d), want 4401", err, code)
		}
	})

	t.Run("the credential is accepted as Authorization, authorization or token", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		for _, payload := range []map[string]any{
			{"Authorization": "Bearer " + f.alice}, {"authorization": "Bearer " + f.alice}, {"token": f.alice}, {"Authorization": f.alice},
		} {
			c, err := dialWS(ctx, ts.url, payload, wsDialOptions{})
			if err != nil {
				t.Fatalf("payload with keys %v: %v", keys(payload), err)
			}
			c.close()
		}
	})

	t.Run("queueChanged shows enqueue, placement, start, preemption, requeue and finish, with positions", func(t *testing.T) {
		_, ch := subscribeWS(t, ts, f.alice, queueSub, map[string]any{"cr": "1 GPU"})
		first := nextUpdate(t, ch, 10*time.Second)
		if kindOf(first, "queueChanged") != "snapshot" || str(first.Data, "queueChanged", "computeResource", "id") != crML {
			t.Fatalf("first update %s, want a snapshot of ml-research's 1 GPU", first.Raw)
		}
		// Hold the engine so that the task waits long enough to be seen
		// in line.
		ts.mustGQL(t, f.admin, `mutation { setEngineEnabled(enabled: false) { enabled } }`, nil)
		id := enqueueAs(t, ts, f.alice, "watched", "fraud-models")
		u := waitUpdate(t, ch, 10*time.Second, "task.enqueued", queueHas("task.enqueued", id))
		if pos := waitingPosition(u, id); pos != 1 {
			t.Fatalf("the enqueued task is at position %d of %s, want 1", pos, u.Raw)
		}
		waitUpdate(t, ch, 10*time.Second, "queue.changed saying the engine is disabled", func(u *wsUpdate) bool {
			return kindOf(u, "queueChanged") == "queue.changed" && str(u.Data, "queueChanged", "queueState", "constraint") == "engine_disabled"
		})
		ts.mustGQL(t, f.admin, `mutation { setEngineEnabled(enabled: true) { enabled } }`, nil)
		u = waitUpdate(t, ch, 10*time.Second, "task.placed", queueHas("task.placed", id))
		if waitingPosition(u, id) != 0 || !strings.Contains(u.Raw, `"running":[`) || !strings.Contains(str(u.Data, "queueChanged", "task", "status"), "PLACED") {
			t.Fatalf("after placement: %s", u.Raw)
		}

		a := worker.claim(id)
		waitUpdate(t, ch, 10*time.Second, "task.started", queueHas("task.started", id))

		// Its environment takes the capacity back: preempted, and back in
		// line at the front.
		worker.finish(a, agentapi.StatePreempted)
		waitUpdate(t, ch, 10*time.Second, "task.preempted", queueHas("task.preempted", id))
		waitUpdate(t, ch, 10*time.Second, "task.placed again", queueHas("task.placed", id))

		// A worker that stops heartbeating: the engine requeues its task
		// once the lease runs out.
		worker.claim(id)
		waitUpdate(t, ch, 20*time.Second, "task.requeued", queueHas("task.requeued", id))
		waitUpdate(t, ch, 10*time.Second, "task.placed a third time", queueHas("task.placed", id))

		worker.finish(worker.claim(id), agentapi.StateCompleted)
		u = waitUpdate(t, ch, 10*time.Second, "task.completed", queueHas("task.completed", id))
		if strings.Contains(u.Raw, id) && str(u.Data, "queueChanged", "task", "status") != "COMPLETED" {
			t.Fatalf("after the finish: %s", u.Raw)
		}

		other := enqueueAs(t, ts, f.alice, "to-abort", "fraud-models")
		ts.mustGQL(t, f.alice, `mutation($id: ID!) { abortTask(id: $id) { id } }`, map[string]any{"id": other})
		waitUpdate(t, ch, 10*time.Second, "task.aborted", queueHas("task.aborted", other))
	})

	t.Run("taskEvents and taskLogs follow one task to its end", func(t *testing.T) {
		ts.mustGQL(t, f.admin, `mutation { setEngineEnabled(enabled: false) { enabled } }`, nil)
		id := enqueueAs(t, ts, f.alice, "logged", "fraud-models")
		_, events := subscribeWS(t, ts, f.alice, `subscription($id: ID!) { taskEvents(id: $id) { kind missed task { id status } } }`, map[string]any{"id": id})
		_, logs := subscribeWS(t, ts, f.alice, `subscription($id: ID!) { taskLogs(id: $id) { lastSeq done truncated lines { seq stream line } } }`, map[string]any{"id": id})
		if u := nextUpdate(t, events, 10*time.Second); kindOf(u, "taskEvents") != "snapshot" || str(u.Data, "taskEvents", "task", "status") != "QUEUED" {
			t.Fatalf("first task update %s", u.Raw)
		}
		if u := nextUpdate(t, logs, 10*time.Second); !strings.Contains(u.Raw, `"lines":[]`) || path(u.Data, "taskLogs", "done") != false {
			t.Fatalf("first log update %s, want no lines yet", u.Raw)
		}
		ts.mustGQL(t, f.admin, `mutation { setEngineEnabled(enabled: true) { enabled } }`, nil)
		waitUpdate(t, events, 10*time.Second, "task.placed", func(u *wsUpdate) bool { return kindOf(u, "taskEvents") == "task.placed" })
		a := worker.claim(id)
		waitUpdate(t, events, 10*time.Second, "task.started", func(u *wsUpdate) bool { return kindOf(u, "taskEvents") == "task.started" })
		worker.logs(a, "epoch 1 loss 0.9", "epoch 2 loss 0.5")
		var got []string
		for len(got) < 2 {
			u := nextUpdate(t, logs, 10*time.Second)
			lines, _ := path(u.Data, "taskLogs", "lines").([]any)
			for _, l := range lines {
				got = append(got, str(l, "line"))
			}
		}
		if strings.Join(got, "|") != "epoch 1 loss 0.9|epoch 2 loss 0.5" {
			t.Fatalf("log lines %q", got)
		}
		worker.logs(a, "done")
		worker.finish(a, agentapi.StateCompleted)
		u := waitUpdate(t, events, 10*time.Second, "task.completed", func(u *wsUpdate) bool { return kindOf(u, "taskEvents") == "task.completed" })
		if str(u.Data, "taskEvents", "task", "status") != "COMPLETED" {
			t.Fatalf("task after completion: %s", u.Raw)
		}
		u = waitUpdate(t, logs, 10*time.Second, "the last log update", func(u *wsUpdate) bool { return path(u.Data, "taskLogs", "done") == true })
		if !strings.Contains(u.Raw, "done") {
			t.Fatalf("the last log update %s misses the last line", u.Raw)
		}
		select {
		case ev, ok := <-logs:
			if ok && ev.Type != "complete" {
				t.Fatalf("after the last log update: %s %v", ev.Type, ev.Errors)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the log subscription did not complete after the task ended")
		}
	})

	t.Run("poolUtilization shows used and declared GPUs per pool and GPU class", func(t *testing.T) {
		_, ch := subscribeWS(t, ts, f.victor, `subscription { poolUtilization { kind missed
			pools { pool { name } declaredGpus usedGpus freeGpus workers onlineWorkers }
			gpuClasses { gpuClass { name } declaredGpus usedGpus freeGpus } } }`, nil)
		first := nextUpdate(t, ch, 10*time.Second)
		used := func(u *wsUpdate) float64 {
			for _, p := range path(u.Data, "poolUtilization", "pools").([]any) {
				if str(p, "pool", "name") == "onprem-k8s" {
					return path(p, "usedGpus").(float64)
				}
			}
			t.Fatalf("no onprem-k8s in %s", u.Raw)
			return 0
		}
		if kindOf(first, "poolUtilization") != "snapshot" || !strings.Contains(first.Raw, `"gpuClass":{"name":"h100"}`) {
			t.Fatalf("first pool update %s", first.Raw)
		}
		before := used(first)
		id := enqueueAs(t, ts, f.victor, "eval", "vision-detect")
		u := waitUpdate(t, ch, 10*time.Second, "a placement", func(u *wsUpdate) bool { return kindOf(u, "poolUtilization") == "task.placed" })
		if used(u) != before+1 {
			t.Fatalf("onprem-k8s used %v after a 1-GPU placement, was %v: %s", used(u), before, u.Raw)
		}
		ts.mustGQL(t, f.victor, `mutation($id: ID!) { abortTask(id: $id) { id } }`, map[string]any{"id": id})
		u = waitUpdate(t, ch, 10*time.Second, "the abort", func(u *wsUpdate) bool { return kindOf(u, "poolUtilization") == "task.aborted" })
		if used(u) != before {
			t.Fatalf("onprem-k8s used %v after the abort, want %v", used(u), before)
		}
	})

	t.Run("workers shows joins and lost heartbeats", func(t *testing.T) {
		_, ch := subscribeWS(t, ts, f.viewer, `subscription { workers { kind missed worker { hostname online } workers { hostname } } }`, nil)
		if u := nextUpdate(t, ch, 10*time.Second); kindOf(u, "workers") != "snapshot" || !strings.Contains(u.Raw, "gpu-host-7") {
			t.Fatalf("first workers update %s", u.Raw)
		}
		registerWorker(t, ts, f.workerSecret, "gpu-host-9")
		u := waitUpdate(t, ch, 10*time.Second, "worker.registered", func(u *wsUpdate) bool {
			return kindOf(u, "workers") == "worker.registered" && str(u.Data, "workers", "worker", "hostname") == "gpu-host-9"
		})
		if path(u.Data, "workers", "worker", "online") != true {
			t.Fatalf("a worker that just joined is not online: %s", u.Raw)
		}
		// It never heartbeats: after the 5s lease it is lost.
		waitUpdate(t, ch, 20*time.Second, "worker.heartbeat_lost", func(u *wsUpdate) bool {
			return kindOf(u, "workers") == "worker.heartbeat_lost" && str(u.Data, "workers", "worker", "hostname") == "gpu-host-9" &&
				path(u.Data, "workers", "worker", "online") == false
		})
	})

	t.Run("budgetBurn shows used, left, burn rate and run-out", func(t *testing.T) {
		_, ch := subscribeWS(t, ts, f.victor, `subscription { budgetBurn(policy: "vision") { kind alert missed
			policy { group { name } heldGpus budget { hours usedHours leftHours burnRate projectedRunOut resetsAt alert usedUp } } } }`, nil)
		first := nextUpdate(t, ch, 10*time.Second)
		if kindOf(first, "budgetBurn") != "snapshot" || str(first.Data, "budgetBurn", "policy", "group", "name") != "vision" ||
			path(first.Data, "budgetBurn", "policy", "budget", "hours") != 2000.0 {
			t.Fatalf("first budget update %s", first.Raw)
		}
		rate := path(first.Data, "budgetBurn", "policy", "budget", "burnRate").(float64)
		id := enqueueAs(t, ts, f.victor, "burn", "vision-detect")
		u := waitUpdate(t, ch, 10*time.Second, "the placement", func(u *wsUpdate) bool { return kindOf(u, "budgetBurn") == "task.placed" })
		if got := path(u.Data, "budgetBurn", "policy", "budget", "burnRate").(float64); got <= rate {
			t.Fatalf("burn rate %v after a placement, was %v: %s", got, rate, u.Raw)
		}
		if path(u.Data, "budgetBurn", "policy", "budget", "leftHours").(float64) > 2000 {
			t.Fatalf("left more than the budget: %s", u.Raw)
		}
		ts.mustGQL(t, f.victor, `mutation($id: ID!) { abortTask(id: $id) { id } }`, map[string]any{"id": id})
	})

	t.Run("policyTree follows the tree's figures level by level, cut to what the caller sees", func(t *testing.T) {
		treeSub := `subscription($d: ID) { policyTree(department: $d) { kind missed nodes { name kind level parent heldGpus waitingTasks holdingTasks } } }`
		_, vic := subscribeWS(t, ts, f.victor, treeSub, nil)
		first := nextUpdate(t, vic, 10*time.Second)
		nodes, _ := path(first.Data, "policyTree", "nodes").([]any)
		if kindOf(first, "policyTree") != "snapshot" || len(nodes) != 1 || str(nodes[0], "name") != "vision" {
			t.Fatalf("victor's first tree (vision only: fraud-lab and ml-research are not his) %s", first.Raw)
		}
		before := path(nodes[0], "waitingTasks").(float64) + path(nodes[0], "holdingTasks").(float64)
		id := enqueueAs(t, ts, f.victor, "tree", "vision-detect")
		waitUpdate(t, vic, 10*time.Second, "vision's new task in the tree", func(u *wsUpdate) bool {
			n := path(u.Data, "policyTree", "nodes", 0)
			return str(n, "name") == "vision" && path(n, "waitingTasks").(float64)+path(n, "holdingTasks").(float64) == before+1
		})
		ts.mustGQL(t, f.victor, `mutation($id: ID!) { abortTask(id: $id) { id } }`, map[string]any{"id": id})

		_, lab := subscribeWS(t, ts, f.admin, treeSub, map[string]any{"d": "fraud-lab"})
		u := nextUpdate(t, lab, 10*time.Second)
		var got []string
		for _, n := range path(u.Data, "policyTree", "nodes").([]any) {
			got = append(got, fmt.Sprintf("%v:%s<%s", path(n, "level"), str(n, "name"), str(n, "parent")))
		}
		if strings.Join(got, " ") != "0:fraud-lab< 1:ml-research<fraud-lab" {
			t.Fatalf("fraud-lab's subtree %v: %s", got, u.Raw)
		}
	})

	t.Run("a subscription shows nothing of another tenant or another group", func(t *testing.T) {
		ctx := ctxFor(t, 20*time.Second)
		for _, c := range []struct{ who, cred, query string }{
			{"oscar (other tenant), ml-research's queue by id", f.oscar, `subscription { queueChanged(computeResource: "` + crML + `") { kind } }`},
			{"victor (vision), ml-research's queue by id", f.victor, `subscription { queueChanged(computeResource: "` + crML + `") { kind } }`},
			{"oscar, alice's task", f.oscar, `subscription { taskEvents(id: "` + f.ids["task"] + `") { kind } }`},
			{"victor, alice's task", f.victor, `subscription { taskEvents(id: "` + f.ids["task"] + `") { kind } }`},
			{"victor, alice's task's logs", f.victor, `subscription { taskLogs(id: "` + f.ids["task"] + `") { lastSeq } }`},
			{"tess (third tenant), ml-research's budget", f.tess, `subscription { budgetBurn(policy: "` + f.ids["policy ml-research"] + `") { kind } }`},
			{"victor, ml-research's budget", f.victor, `subscription { budgetBurn(policy: "ml-research") { kind } }`},
			{"tess, fraud-lab's tree", f.tess, `subscription { policyTree(department: "` + f.ids["department fraud-lab"] + `") { kind } }`},
			{"victor, fraud-lab's tree", f.victor, `subscription { policyTree(department: "fraud-lab") { kind } }`},
		} {
			conn, err := dialWS(ctx, ts.url, bearerInit(c.cred), wsDialOptions{})
			if err != nil {
				t.Fatalf("%s: connect: %v", c.who, err)
			}
			_, ch, err := conn.subscribe(ctx, c.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-ch:
				if ev.Type != "error" || len(ev.Errors) == 0 || ev.Errors[0].Extensions["code"] != "NOT_FOUND" {
					t.Errorf("%s: got %s %v %v, want a NOT_FOUND error", c.who, ev.Type, ev.Errors, ev.Update)
				}
				for _, e := range ev.Errors {
					for _, secret := range f.tenantSecrets {
						if c.cred != f.victor && !strings.Contains(c.query, secret) && strings.Contains(e.Message, secret) {
							t.Errorf("%s: the error names %q: %s", c.who, secret, e.Message)
						}
					}
				}
			case <-time.After(10 * time.Second):
				t.Errorf("%s: no answer", c.who)
			}
			conn.close()
		}

		// Other tenants' tenant-wide views never carry this tenant's work.
		_, oscarPools := subscribeWS(t, ts, f.oscar, `subscription { poolUtilization { kind pools { pool { name } usedGpus } gpuClasses { gpuClass { name } } } }`, nil)
		_, oscarWorkers := subscribeWS(t, ts, f.olga, `subscription { workers { kind worker { hostname } workers { hostname } } }`, nil)
		_, oscarTree := subscribeWS(t, ts, f.oscar, `subscription { policyTree { kind nodes { id name parent } } }`, nil)
		_, alicePools := subscribeWS(t, ts, f.alice, `subscription { poolUtilization { kind } }`, nil)
		for _, ch := range []<-chan wsEvent{oscarPools, oscarWorkers, oscarTree} {
			u := nextUpdate(t, ch, 10*time.Second)
			for _, s := range f.tenantSecrets {
				if strings.Contains(u.Raw, s) {
					t.Fatalf("another tenant's snapshot carries %q: %s", s, u.Raw)
				}
			}
		}
		nextUpdate(t, alicePools, 10*time.Second)
		id := enqueueAs(t, ts, f.alice, "busy", "fraud-models")
		waitUpdate(t, alicePools, 10*time.Second, "alice sees the placement", func(u *wsUpdate) bool { return kindOf(u, "poolUtilization") == "task.placed" })
		registerWorker(t, ts, f.workerSecret, "gpu-host-10")
		expectQuiet(t, oscarPools, time.Second, "another tenant's pool view must not move with this tenant's work")
		expectQuiet(t, oscarWorkers, 100*time.Millisecond, "another tenant's workers view must not show this tenant's worker")
		ts.mustGQL(t, f.alice, `mutation($id: ID!) { abortTask(id: $id) { id } }`, map[string]any{"id": id})
	})

	t.Run("group membership is checked for every update, not only at subscribe time", func(t *testing.T) {
		ts.mustGQL(t, f.admin, `mutation { createUser(input: {name: "mallory", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
		d := ts.mustGQL(t, f.admin, `mutation { createAPIKey(input: {name: "mallory key", user: "mallory"}) { secret } }`, nil)
		mallory := str(d, "createAPIKey", "secret")
		_, malloryQ := subscribeWS(t, ts, mallory, queueSub, map[string]any{"cr": crML})
		_, aliceQ := subscribeWS(t, ts, f.alice, queueSub, map[string]any{"cr": crML})
		nextUpdate(t, malloryQ, 10*time.Second)
		nextUpdate(t, aliceQ, 10*time.Second)
		id := enqueueAs(t, ts, f.alice, "seen-by-both", "fraud-models")
		waitUpdate(t, malloryQ, 10*time.Second, "mallory sees the enqueue while in the group", queueHas("task.enqueued", id))
		ts.mustGQL(t, f.admin, `mutation { removeGroupMember(group: "ml-research", user: "mallory") }`, nil)
		id2 := enqueueAs(t, ts, f.alice, "seen-by-alice-only", "fraud-models")
		waitUpdate(t, aliceQ, 10*time.Second, "alice sees the second enqueue", queueHas("task.enqueued", id2))
		for {
			select {
			case ev, ok := <-malloryQ:
				if !ok || ev.Type == "complete" {
					return // ended: fine
				}
				if ev.Update != nil && strings.Contains(ev.Update.Raw, id2) {
					t.Fatalf("mallory, out of the group, still got %s", ev.Update.Raw)
				}
				if ev.Update != nil && kindOf(ev.Update, "queueChanged") != "task.enqueued" && kindOf(ev.Update, "queueChanged") != "task.placed" {
					t.Fatalf("mallory, out of the group, still got %s", ev.Update.Raw)
				}
			case <-time.After(2 * time.Second):
				return
			}
		}
	})

	t.Run("the legacy graphql-ws protocol works too", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		c, err := dialWS(ctx, ts.url, bearerInit(f.alice), wsDialOptions{proto: protoLegacyWS})
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		_, ch, err := c.subscribe(ctx, `subscription { poolUtilization { kind } }`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if u := nextUpdate(t, ch, 10*time.Second); kindOf(u, "poolUtilization") != "snapshot" {
			t.Fatalf("first update over graphql-ws %s", u.Raw)
		}
	})
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
