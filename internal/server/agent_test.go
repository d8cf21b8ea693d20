package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/platform"
)

// agentCall posts a protocol request with a worker credential and decodes
// the answer into out (when the status is 200).
func agentCall(t testing.TB, ts *testServer, cred, method, path string, in, out any) int {
	t.Helper()
	var body []byte
	if in != nil {
		body, _ = json.Marshal(in)
	}
	req, err := http.NewRequest(method, ts.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, raw := ts.send(t, req)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal([]byte(raw), out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 400 && out != nil {
		if e, ok := out.(*agentapi.Error); ok {
			_ = json.Unmarshal([]byte(raw), e)
		}
	}
	return resp.StatusCode
}

// place runs one engine pass, as the engine loop would.
func place(t *testing.T, ts *testServer) {
	t.Helper()
	eng := &loop.Loop{State: platform.EngineState{Store: ts.app.Store}, Planner: ts.app.Service, Holder: "fixture"}
	if _, err := eng.PassAll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerProtocol(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	worker := f.ids["worker gpu-host-7"]
	claim := func(wait int) (*agentapi.Assignment, int) {
		var out agentapi.ClaimResponse
		code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim,
			agentapi.ClaimRequest{WorkerID: worker, FreeGPUs: 1, WaitSeconds: wait}, &out)
		return out.Task, code
	}
	enqueue := func(cred, name string, extra map[string]any) string {
		in := map[string]any{"name": name, "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "train.py"}}
		for k, v := range extra {
			in[k] = v
		}
		d := ts.mustGQL(t, cred, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": in})
		return str(d, "enqueueTask", "id")
	}
	status := func(id string) map[string]any {
		return ts.mustGQL(t, f.admin, `query($id: ID!) { task(id: $id) { status reason attempt exitCode outputs worker { hostname } } }`, map[string]any{"id": id})
	}

	var first *agentapi.Assignment
	t.Run("a worker claims the task placed on its pool, with everything it needs to run it", func(t *testing.T) {
		a, code := claim(1)
		if code != http.StatusOK || a == nil || a.TaskID != f.ids["task"] || a.Attempt != 1 {
			t.Fatalf("claim: %d %+v", code, a)
		}
		if a.Project != "fraud-models" || a.Owner != "alice" || a.Parameters["lr"] != "0.1" ||
			a.OutputDestination != "s3://ml-research-artifacts/fraud-models" || a.MilliGPUsPerNode != 1000 || a.LeaseSeconds <= 0 {
			t.Fatalf("assignment %+v", a)
		}
		d := status(a.TaskID)
		if str(d, "task", "status") != "RUNNING" || str(d, "task", "worker", "hostname") != "gpu-host-7" {
			t.Fatalf("task after the claim: %v", d)
		}
		first = a
	})

	t.Run("an empty hidden queue answers 204 after the wait", func(t *testing.T) {
		start := time.Now()
		a, code := claim(1)
		if code != http.StatusNoContent || a != nil || time.Since(start) < 900*time.Millisecond {
			t.Fatalf("claim: %d %+v after %s", code, a, time.Since(start))
		}
	})

	t.Run("a waiting claim wakes as soon as work is placed on its pool", func(t *testing.T) {
		got := make(chan *agentapi.Assignment, 1)
		start := time.Now()
		go func() { a, _ := claim(20); got <- a }()
		time.Sleep(200 * time.Millisecond)
		id := enqueue(f.alice, "second", nil)
		place(t, ts)
		select {
		case a := <-got:
			if a == nil || a.TaskID != id {
				t.Fatalf("claimed %+v, want %s", a, id)
			}
			if waited := time.Since(start); waited > 5*time.Second {
				t.Fatalf("the claim took %s, not woken by the placement", waited)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the claim did not return")
		}
	})

	t.Run("heartbeats extend leases and stop an attempt that is not current", func(t *testing.T) {
		var hb agentapi.HeartbeatResponse
		code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: worker,
			Tasks: []agentapi.TaskHeartbeat{{TaskID: first.TaskID, Attempt: 1}, {TaskID: first.TaskID + "x", Attempt: 1}}}, &hb)
		if code != http.StatusOK || len(hb.Commands) != 1 || hb.Commands[0].TaskID != first.TaskID+"x" || hb.Commands[0].Action != agentapi.ActionStop {
			t.Fatalf("heartbeat: %d %+v", code, hb)
		}
		code = agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: worker,
			Tasks: []agentapi.TaskHeartbeat{{TaskID: first.TaskID, Attempt: 7}}}, &hb)
		if code != http.StatusOK || len(hb.Commands) != 1 || hb.Commands[0].Action != agentapi.ActionStop {
			t.Fatalf("heartbeat with a stale attempt: %d %+v", code, hb)
		}
	})

	t.Run("logs and metrics are stored, readable, and refused for a stale attempt", func(t *testing.T) {
		now := time.Now().UTC()
		var lr agentapi.LogsResponse
		code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+first.TaskID+"/logs", agentapi.LogsRequest{Attempt: 1,
			Lines: []agentapi.LogLine{{At: now, Stream: "stdout", Line: "epoch 1"}, {At: now, Stream: "stderr", Line: "warning: slow"}}}, &lr)
		if code != http.StatusOK || lr.Accepted != 2 || lr.Truncated {
			t.Fatalf("logs: %d %+v", code, lr)
		}
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+first.TaskID+"/metrics", agentapi.MetricsRequest{Attempt: 1,
			Points: []agentapi.MetricPoint{{At: now, Name: "loss", Value: 0.5, Step: 1}, {At: now, Name: "loss", Value: 0.25, Step: 2}}}, nil); code != http.StatusNoContent {
			t.Fatalf("metrics: %d", code)
		}
		var e agentapi.Error
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+first.TaskID+"/logs", agentapi.LogsRequest{Attempt: 2,
			Lines: []agentapi.LogLine{{At: now, Stream: "stdout", Line: "from the future"}}}, &e); code != http.StatusConflict || e.Error.Code != "CONFLICT" {
			t.Fatalf("logs of a stale attempt: %d %+v", code, e)
		}
		d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { logs { lines { seq stream line } lastSeq } lastMetrics { name value step } } }`, map[string]any{"id": first.TaskID})
		lines, _ := path(d, "task", "logs", "lines").([]any)
		if len(lines) != 2 || str(lines[1], "stream") != "stderr" || str(lines[0], "line") != "epoch 1" {
			t.Fatalf("logs read back: %v", d)
		}
		last, _ := path(d, "task", "lastMetrics").([]any)
		if len(last) != 1 || path(last[0], "value") != 0.25 {
			t.Fatalf("metrics read back: %v", d)
		}
		// Victor, of another group, cannot read them.
		res := ts.gql(t, gqlRequest{Credential: f.victor, Query: `query($id: ID!) { task(id: $id) { logs { lines { line } } } }`, Vars: map[string]any{"id": first.TaskID}})
		if res.code() != "NOT_FOUND" || strings.Contains(res.Raw, "epoch 1") {
			t.Fatalf("victor read alice's logs: %s", res.Raw)
		}
	})

	t.Run("the end is recorded with exit code and outputs, and a second report is refused", func(t *testing.T) {
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+first.TaskID+"/finish", agentapi.FinishRequest{Attempt: 1,
			State: agentapi.StateCompleted, ExitCode: 0, Outputs: []string{"s3://ml-research-artifacts/fraud-models/run-1"}}, nil); code != http.StatusNoContent {
			t.Fatalf("finish: %d", code)
		}
		d := status(first.TaskID)
		if str(d, "task", "status") != "COMPLETED" || path(d, "task", "exitCode") != 0.0 || !strings.Contains(ts.gql(t, gqlRequest{Credential: f.admin,
			Query: `query($id: ID!) { task(id: $id) { outputs } }`, Vars: map[string]any{"id": first.TaskID}}).Raw, "run-1") {
			t.Fatalf("finished task: %v", d)
		}
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+first.TaskID+"/finish", agentapi.FinishRequest{Attempt: 1,
			State: agentapi.StateFailed, ExitCode: 1}, nil); code != http.StatusConflict {
			t.Fatalf("a second finish: %d", code)
		}
		// The ledger interval closed with the finish: nothing of the task
		// is open any more.
		u := ts.mustGQL(t, f.admin, `{ usage(input: {from: "2026-01-01T00:00:00Z", to: "2099-01-01T00:00:00Z", groupBy: [GROUP]}) { rows { keys { name } gpuHours } } }`, nil)
		if !strings.Contains(ts.gql(t, gqlRequest{Credential: f.admin, Query: `{ usage(input: {from: "2026-01-01T00:00:00Z", to: "2099-01-01T00:00:00Z", groupBy: [GROUP]}) { rows { keys { name } } } }`}).Raw, "ml-research") {
			t.Fatalf("usage: %v", u)
		}
	})

	t.Run("an abort reaches the worker as a stop command with its reason", func(t *testing.T) {
		id := enqueue(f.alice, "to-abort", nil)
		place(t, ts)
		a, _ := claim(5)
		// The long-poll test's task is still running on this worker: take
		// the one just enqueued.
		for a != nil && a.TaskID != id {
			a, _ = claim(5)
		}
		if a == nil {
			t.Fatal("nothing to claim")
		}
		ts.mustGQL(t, f.alice, `mutation($id: ID!) { abortTask(id: $id, reason: "wrong data") { status } }`, map[string]any{"id": id})
		var hb agentapi.HeartbeatResponse
		agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: worker,
			Tasks: []agentapi.TaskHeartbeat{{TaskID: id, Attempt: a.Attempt}}}, &hb)
		if len(hb.Commands) != 1 || hb.Commands[0].State != agentapi.StateAborted || hb.Commands[0].Reason != "aborted by alice: wrong data" {
			t.Fatalf("heartbeat after an abort: %+v", hb)
		}
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+id+"/finish", agentapi.FinishRequest{Attempt: a.Attempt,
			State: agentapi.StateAborted, ExitCode: 143}, nil); code != http.StatusConflict {
			t.Fatalf("finish after the abort: %d", code)
		}
	})

	t.Run("secrets go only to the current attempt and are cut out of its logs", func(t *testing.T) {
		id := enqueue(f.alice, "with-secret", map[string]any{"secrets": []any{"HF_TOKEN"}})
		place(t, ts)
		var a *agentapi.Assignment
		for i := 0; i < 5 && (a == nil || a.TaskID != id); i++ {
			a, _ = claim(2)
		}
		if a == nil || a.TaskID != id || len(a.Secrets) != 1 || a.Secrets[0] != "HF_TOKEN" {
			t.Fatalf("assignment %+v", a)
		}
		var sr agentapi.SecretsResponse
		if code := agentCall(t, ts, f.workerSecret, http.MethodGet, agentapi.PathTasks+id+"/secrets?attempt=1", nil, &sr); code != http.StatusOK || sr.Secrets["HF_TOKEN"] != "hf_fixture_secret_value" {
			t.Fatalf("secrets: %d %+v", code, sr)
		}
		if code := agentCall(t, ts, f.workerSecret, http.MethodGet, agentapi.PathTasks+id+"/secrets?attempt=2", nil, nil); code != http.StatusConflict {
			t.Fatalf("secrets of a stale attempt: %d", code)
		}
		agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+id+"/logs", agentapi.LogsRequest{Attempt: 1,
			Lines: []agentapi.LogLine{{At: time.Now(), Stream: "stdout", Line: "token is hf_fixture_secret_value!"}}}, nil)
		res := ts.gql(t, gqlRequest{Credential: f.admin, Query: `query($id: ID!) { task(id: $id) { logs { lines { line } } spec { secrets env } } }`, Vars: map[string]any{"id": id}})
		if strings.Contains(res.Raw, "hf_fixture_secret_value") || !strings.Contains(res.Raw, "token is [redacted]!") {
			t.Fatalf("logs and spec: %s", res.Raw)
		}
	})

	t.Run("a task's secret comes from its project's vault, then its group's, then the tenant's", func(t *testing.T) {
		ts.mustGQL(t, f.admin, `mutation { setSecret(scope: TENANT, name: "HF_TOKEN", value: "tenant-value") { name } }`, nil)
		ts.mustGQL(t, f.admin, `mutation { setSecret(scope: GROUP, owner: "ml-research", name: "HF_TOKEN", value: "group-value") { name } }`, nil)
		id := enqueue(f.alice, "layered-secret", map[string]any{"secrets": []any{"HF_TOKEN"}})
		place(t, ts)
		var a *agentapi.Assignment
		for i := 0; i < 5 && (a == nil || a.TaskID != id); i++ {
			a, _ = claim(2)
		}
		if a == nil || a.TaskID != id {
			t.Fatalf("assignment %+v", a)
		}
		fetch := func() string {
			var sr agentapi.SecretsResponse
			if code := agentCall(t, ts, f.workerSecret, http.MethodGet, agentapi.PathTasks+id+"/secrets?attempt=1", nil, &sr); code != http.StatusOK {
				t.Fatalf("secrets: %d", code)
			}
			return sr.Secrets["HF_TOKEN"]
		}
		if v := fetch(); v != "hf_fixture_secret_value" {
			t.Fatalf("with all three vaults holding it: %q", v)
		}
		ts.mustGQL(t, f.admin, `mutation { deleteSecret(scope: PROJECT, owner: "fraud-models", name: "HF_TOKEN") }`, nil)
		if v := fetch(); v != "group-value" {
			t.Fatalf("without the project's: %q", v)
		}
		ts.mustGQL(t, f.admin, `mutation { deleteSecret(scope: GROUP, owner: "ml-research", name: "HF_TOKEN") }`, nil)
		if v := fetch(); v != "tenant-value" {
			t.Fatalf("without the group's: %q", v)
		}
		ts.mustGQL(t, f.admin, `mutation { deleteSecret(scope: TENANT, name: "HF_TOKEN") }`, nil)
		var e agentapi.Error
		if code := agentCall(t, ts, f.workerSecret, http.MethodGet, agentapi.PathTasks+id+"/secrets?attempt=1", nil, &e); code != http.StatusConflict || !strings.Contains(e.Error.Message, "no longer in any vault") {
			t.Fatalf("with no vault holding it: %d %+v", code, e)
		}
		agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+id+"/finish", agentapi.FinishRequest{Attempt: 1, State: agentapi.StateFailed, ExitCode: 1}, nil)
	})

	t.Run("a worker of another pool sees nothing of this pool's work", func(t *testing.T) {
		wc := ts.mustGQL(t, f.admin, `mutation { createWorkerCredential(pool: "bare-metal") { secret } }`, nil)
		other := str(wc, "createWorkerCredential", "secret")
		var reg agentapi.RegisterResponse
		if code := agentCall(t, ts, other, http.MethodPost, agentapi.PathRegister, agentapi.RegisterRequest{Hostname: "bm-1", Version: "t", Mode: "process"}, &reg); code != http.StatusOK || reg.Pool != "bare-metal" {
			t.Fatalf("register: %d %+v", code, reg)
		}
		id := enqueue(f.alice, "onprem-only", nil)
		place(t, ts)
		var out agentapi.ClaimResponse
		if code := agentCall(t, ts, other, http.MethodPost, agentapi.PathClaim, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 8, WaitSeconds: 1}, &out); code != http.StatusNoContent {
			t.Fatalf("claim from another pool: %d %+v", code, out)
		}
		if code := agentCall(t, ts, other, http.MethodPost, agentapi.PathClaim, agentapi.ClaimRequest{WorkerID: worker, FreeGPUs: 8, WaitSeconds: 1}, nil); code != http.StatusNotFound {
			t.Fatalf("claim as onprem-k8s's worker with bare-metal's credential: %d", code)
		}
		if code := agentCall(t, ts, other, http.MethodPost, agentapi.PathTasks+first.TaskID+"/logs", agentapi.LogsRequest{Attempt: 1}, nil); code != http.StatusNotFound {
			t.Fatalf("logs for another pool's task: %d", code)
		}
		_ = id
	})

	t.Run("bad credentials and bad requests are refused and change nothing", func(t *testing.T) {
		if code := agentCall(t, ts, "kqw_nope_nope_nope_nope", http.MethodPost, agentapi.PathRegister, agentapi.RegisterRequest{Hostname: "x"}, nil); code != http.StatusUnauthorized {
			t.Fatalf("unknown credential: %d", code)
		}
		if code := agentCall(t, ts, f.admin, http.MethodPost, agentapi.PathRegister, agentapi.RegisterRequest{Hostname: "x"}, nil); code != http.StatusUnauthorized {
			t.Fatalf("a user's API key as a worker credential: %d", code)
		}
		var e agentapi.Error
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim, agentapi.ClaimRequest{WorkerID: worker}, &e); code != http.StatusBadRequest || !strings.Contains(e.Error.Message, "free capacity") {
			t.Fatalf("claim without capacity: %d %+v", code, e)
		}
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathRegister, agentapi.RegisterRequest{Hostname: "bad host"}, &e); code != http.StatusBadRequest {
			t.Fatalf("bad hostname: %d", code)
		}
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathRegister, agentapi.RegisterRequest{Hostname: "h",
			Labels: map[string]string{"rack id": "7"}}, &e); code != http.StatusBadRequest || !strings.Contains(e.Error.Message, `label "rack id"`) {
			t.Fatalf("a bad label: %d %+v", code, e)
		}
		ws := ts.mustGQL(t, f.admin, `{ workers { hostname labels } }`, nil)
		for _, w := range ws["workers"].([]any) {
			w := w.(map[string]any)
			if w["hostname"] == "h" {
				t.Fatalf("a refused registration added a worker: %v", ws)
			}
			if w["hostname"] == "gpu-host-7" && fmt.Sprint(w["labels"]) != "map[rack:r7 site:dc1]" {
				t.Fatalf("the labels the worker registered with: %v", w)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, ts.url+agentapi.PathHeartbeat, strings.NewReader("{not json"))
		req.Header.Set("Authorization", "Bearer "+f.workerSecret)
		if resp, _ := ts.send(t, req); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("malformed JSON: %d", resp.StatusCode)
		}
		ts.mustGQL(t, f.admin, `mutation($id: ID!) { revokeWorkerCredential(id: $id) { revokedAt } }`, map[string]any{"id": f.ids["wcred rack-7"]})
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathHeartbeat, agentapi.HeartbeatRequest{WorkerID: worker}, nil); code != http.StatusUnauthorized {
			t.Fatalf("a revoked credential: %d", code)
		}
	})
}
