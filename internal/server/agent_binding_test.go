package server_test

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// bindingSetup is a task with a secret running on gpu-host-7 (the
// fixture's worker credential of onprem-k8s), a second credential of the
// same pool with a worker of its own, and a credential of another pool.
type bindingSetup struct {
	f                   *fixture
	task                *agentapi.Assignment
	second, secondID    string
	otherPool, otherID  string
	holder, holderID    string
	enqueueAndClaimable func(name string) *agentapi.Assignment
}

func newBindingSetup(t *testing.T, ts *testServer) *bindingSetup {
	t.Helper()
	f := newFixture(t, ts)
	b := &bindingSetup{f: f, holder: f.workerSecret, holderID: f.ids["worker gpu-host-7"]}
	register := func(pool, host string) (string, string) {
		wc := ts.mustGQL(t, f.admin, fmt.Sprintf(`mutation { createWorkerCredential(pool: %q, name: %q) { secret } }`, pool, host), nil)
		secret := str(wc, "createWorkerCredential", "secret")
		var reg agentapi.RegisterResponse
		if code := agentCall(t, ts, secret, http.MethodPost, agentapi.PathRegister,
			agentapi.RegisterRequest{Hostname: host, Version: "t", Mode: "process", GPUs: []agentapi.GPU{{Index: 0}}}, &reg); code != http.StatusOK {
			t.Fatalf("register %s: %d", host, code)
		}
		return secret, reg.WorkerID
	}
	b.second, b.secondID = register("onprem-k8s", "gpu-host-8")
	b.otherPool, b.otherID = register("bare-metal", "bm-1")
	b.enqueueAndClaimable = func(name string) *agentapi.Assignment {
		t.Helper()
		d := ts.mustGQL(t, f.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
			"name": name, "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "train.py"}, "secrets": []any{"HF_TOKEN"}}})
		id := str(d, "enqueueTask", "id")
		place(t, ts)
		for range 5 {
			var out agentapi.ClaimResponse
			code := agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathClaim, agentapi.ClaimRequest{WorkerID: b.holderID, FreeGPUs: 8, WaitSeconds: 1}, &out)
			if code == http.StatusOK && out.Task.TaskID == id {
				return out.Task
			}
		}
		t.Fatalf("task %s was not claimed", id)
		return nil
	}
	b.task = b.enqueueAndClaimable("held")
	return b
}

// TestAWorkerCredentialActsOnlyOnItsOwnTasks: every per-task call comes
// from the credential whose worker holds the task's current attempt; a
// second credential of the same pool, like one of another pool, finds
// nothing (404) and changes nothing.
func TestAWorkerCredentialActsOnlyOnItsOwnTasks(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	b := newBindingSetup(t, ts)
	a := b.task
	at := func(what string) string { return agentapi.PathTasks + a.TaskID + "/" + what }
	lines := agentapi.LogsRequest{Attempt: a.Attempt, Lines: []agentapi.LogLine{{At: time.Now(), Stream: "stdout", Line: "written by an intruder"}}}

	for name, cred := range map[string]string{"a second credential of the pool": b.second, "a credential of another pool": b.otherPool} {
		t.Run(name+" finds none of the task's calls", func(t *testing.T) {
			var e agentapi.Error
			if code := agentCall(t, ts, cred, http.MethodGet, at("secrets")+fmt.Sprintf("?attempt=%d", a.Attempt), nil, &e); code != http.StatusNotFound ||
				strings.Contains(e.Error.Message, "attempt") {
				t.Fatalf("secrets: %d %+v", code, e)
			}
			if code := agentCall(t, ts, cred, http.MethodGet, at("secrets")+"?attempt=9", nil, nil); code != http.StatusNotFound {
				t.Fatalf("secrets of another attempt: %d, want 404 (not 409, which would tell the attempt is not current)", code)
			}
			if code := agentCall(t, ts, cred, http.MethodPost, at("logs"), lines, nil); code != http.StatusNotFound {
				t.Fatalf("logs: %d", code)
			}
			if code := agentCall(t, ts, cred, http.MethodPost, at("metrics"), agentapi.MetricsRequest{Attempt: a.Attempt,
				Points: []agentapi.MetricPoint{{Name: "intruder", Value: 1}}}, nil); code != http.StatusNotFound {
				t.Fatalf("metrics: %d", code)
			}
			if code := agentCall(t, ts, cred, http.MethodPost, at("credential"), agentapi.TaskCredentialRequest{Attempt: a.Attempt}, nil); code != http.StatusNotFound {
				t.Fatalf("task credential: %d", code)
			}
			if code := agentCall(t, ts, cred, http.MethodPost, at("finish"), agentapi.FinishRequest{Attempt: a.Attempt, State: agentapi.StateFailed, ExitCode: 1}, nil); code != http.StatusNotFound {
				t.Fatalf("finish: %d", code)
			}
			// A heartbeat as the holder's worker is refused; one as its own
			// worker tells it to stop a task it does not hold, and extends
			// nothing.
			if code := agentCall(t, ts, cred, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: b.holderID,
				Tasks: []agentapi.TaskHeartbeat{{TaskID: a.TaskID, Attempt: a.Attempt}}}, nil); code != http.StatusNotFound {
				t.Fatalf("heartbeat as the holder's worker: %d", code)
			}
			own := b.secondID
			if cred == b.otherPool {
				own = b.otherID
			}
			var hb agentapi.HeartbeatResponse
			if code := agentCall(t, ts, cred, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: own,
				Tasks: []agentapi.TaskHeartbeat{{TaskID: a.TaskID, Attempt: a.Attempt}}}, &hb); code != http.StatusOK ||
				len(hb.Commands) != 1 || hb.Commands[0].Action != agentapi.ActionStop {
				t.Fatalf("heartbeat listing the task: %d %+v", code, hb)
			}
		})
	}

	t.Run("a second credential cannot take the holder's host over while it runs tasks", func(t *testing.T) {
		var e agentapi.Error
		if code := agentCall(t, ts, b.second, http.MethodPost, agentapi.PathRegister,
			agentapi.RegisterRequest{Hostname: "gpu-host-7", Version: "t", Mode: "process"}, &e); code != http.StatusConflict {
			t.Fatalf("register the holder's host: %d %+v", code, e)
		}
		if code := agentCall(t, ts, b.second, http.MethodGet, at("secrets")+fmt.Sprintf("?attempt=%d", a.Attempt), nil, nil); code != http.StatusNotFound {
			t.Fatalf("secrets after the refused takeover: %d", code)
		}
	})

	t.Run("the holder still does everything, and nothing of the others' calls was kept", func(t *testing.T) {
		var sr agentapi.SecretsResponse
		if code := agentCall(t, ts, b.holder, http.MethodGet, at("secrets")+fmt.Sprintf("?attempt=%d", a.Attempt), nil, &sr); code != http.StatusOK ||
			sr.Secrets["HF_TOKEN"] != "hf_fixture_secret_value" {
			t.Fatalf("secrets: %d", code)
		}
		var hb agentapi.HeartbeatResponse
		if code := agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: b.holderID,
			Tasks: []agentapi.TaskHeartbeat{{TaskID: a.TaskID, Attempt: a.Attempt}}}, &hb); code != http.StatusOK || len(hb.Commands) != 0 {
			t.Fatalf("heartbeat: %d %+v", code, hb)
		}
		res := ts.gql(t, gqlRequest{Credential: b.f.admin, Query: `query($id: ID!) { task(id: $id) { status logs { lines { line } } lastMetrics { name } } }`,
			Vars: map[string]any{"id": a.TaskID}})
		if strings.Contains(res.Raw, "intruder") || !strings.Contains(res.Raw, "RUNNING") {
			t.Fatalf("the task after the others' calls: %s", res.Raw)
		}
		if code := agentCall(t, ts, b.holder, http.MethodPost, at("finish"), agentapi.FinishRequest{Attempt: a.Attempt, State: agentapi.StateCompleted}, nil); code != http.StatusNoContent {
			t.Fatalf("finish: %d", code)
		}
	})
}

// TestAHeartbeatTellsNothingOfTasksTheWorkerDoesNotHold: a worker of
// another pool in the tenant listing a task it does not hold (aborted, with
// a reason) gets the same answer as for a task that does not exist.
func TestAHeartbeatTellsNothingOfTasksTheWorkerDoesNotHold(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	b := newBindingSetup(t, ts)
	ts.mustGQL(t, b.f.alice, `mutation($id: ID!) { abortTask(id: $id, reason: "project falcon is cancelled") { status } }`, map[string]any{"id": b.task.TaskID})
	for name, c := range map[string]struct{ cred, worker string }{"another pool": {b.otherPool, b.otherID}, "the same pool": {b.second, b.secondID}} {
		var hb agentapi.HeartbeatResponse
		code := agentCall(t, ts, c.cred, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: c.worker,
			Tasks: []agentapi.TaskHeartbeat{{TaskID: b.task.TaskID, Attempt: b.task.Attempt}, {TaskID: "no-such-task", Attempt: b.task.Attempt}}}, &hb)
		if code != http.StatusOK || len(hb.Commands) != 2 {
			t.Fatalf("%s: %d %+v", name, code, hb)
		}
		held, none := hb.Commands[0], hb.Commands[1]
		if held.TaskID != b.task.TaskID {
			held, none = none, held
		}
		if strings.Contains(held.Reason, "falcon") || held.Reason != none.Reason || held.State != none.State {
			t.Fatalf("%s: the answer about a task it does not hold %+v differs from one about no task %+v", name, held, none)
		}
	}
	// The holder is told why.
	var hb agentapi.HeartbeatResponse
	agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: b.holderID,
		Tasks: []agentapi.TaskHeartbeat{{TaskID: b.task.TaskID, Attempt: b.task.Attempt}}}, &hb)
	if len(hb.Commands) != 1 || !strings.Contains(hb.Commands[0].Reason, "falcon") {
		t.Fatalf("the holder's heartbeat: %+v", hb)
	}
}

// TestWorkerProtocolLimits: a log line numbered out of range or out of
// order is refused with a 400 that says why, and the lines after it are
// kept; a heartbeat listing more tasks than allowed is a 400 that says the
// limit.
func TestWorkerProtocolLimits(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	b := newBindingSetup(t, ts)
	a := b.task
	send := func(ns ...int64) (int, agentapi.LogsResponse, agentapi.Error) {
		req := agentapi.LogsRequest{Attempt: a.Attempt}
		for _, n := range ns {
			req.Lines = append(req.Lines, agentapi.LogLine{At: time.Now(), Stream: "stdout", Line: fmt.Sprintf("line %d", n), N: n})
		}
		var lr agentapi.LogsResponse
		var e agentapi.Error
		code := agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathTasks+a.TaskID+"/logs", req, &lr)
		if code != http.StatusOK {
			agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathTasks+a.TaskID+"/logs", req, &e)
		}
		return code, lr, e
	}
	if code, lr, _ := send(1, 2); code != http.StatusOK || lr.Accepted != 2 {
		t.Fatalf("first lines: %d %+v", code, lr)
	}
	if code, _, e := send(3, math.MaxInt64); code != http.StatusBadRequest || !strings.Contains(e.Error.Message, "ahead of the highest") {
		t.Fatalf("a line numbered 2^63-1: %d %+v", code, e)
	}
	if code, _, e := send(5, 4); code != http.StatusBadRequest || !strings.Contains(e.Error.Message, "must increase") {
		t.Fatalf("lines out of order: %d %+v", code, e)
	}
	if code, _, e := send(-1); code != http.StatusBadRequest {
		t.Fatalf("a negative number: %d %+v", code, e)
	}
	if code, lr, _ := send(3, 4, 5); code != http.StatusOK || lr.Accepted != 3 {
		t.Fatalf("the lines after the refused ones: %d %+v, want all 3 kept", code, lr)
	}
	d := ts.mustGQL(t, b.f.admin, `query($id: ID!) { task(id: $id) { logs { lines { line } } } }`, map[string]any{"id": a.TaskID})
	if got, _ := path(d, "task", "logs", "lines").([]any); len(got) != 5 {
		t.Fatalf("log: %v, want lines 1 to 5", d)
	}

	tasks := make([]agentapi.TaskHeartbeat, agentapi.MaxHeartbeatTasks+1)
	for i := range tasks {
		tasks[i] = agentapi.TaskHeartbeat{TaskID: fmt.Sprint(i), Attempt: 1}
	}
	var e agentapi.Error
	if code := agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: b.holderID, Tasks: tasks}, &e); code != http.StatusBadRequest ||
		!strings.Contains(e.Error.Message, fmt.Sprint(agentapi.MaxHeartbeatTasks)) {
		t.Fatalf("a heartbeat of %d tasks: %d %+v", len(tasks), code, e)
	}
	var hb agentapi.HeartbeatResponse
	if code := agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: b.holderID, Tasks: tasks[:agentapi.MaxHeartbeatTasks]}, &hb); code != http.StatusOK {
		t.Fatalf("a heartbeat of %d tasks: %d", agentapi.MaxHeartbeatTasks, code)
	}
}
