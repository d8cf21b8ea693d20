package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/platform"
)

// fuzzWorld is a control plane for the fuzz targets: the example estate,
// alice (a member of ml-research) with a key, a worker of onprem-k8s and
// a task of alice's that the worker has claimed.
type fuzzWorld struct {
	ts           *testServer
	alice        string
	workerSecret string
	workerID     string
	// task is the claimed task, attempt its claim's attempt; ended is set
	// once a report ended it, and the next iteration claims a new one.
	task    string
	attempt int
	ended   bool
}

func newFuzzWorld(tb testing.TB) *fuzzWorld {
	tb.Helper()
	ts := startServer(tb)
	w := &fuzzWorld{ts: ts}
	ts.mustGQL(tb, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": readExample(tb, "estate.yaml")})
	ts.mustGQL(tb, adminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	d := ts.mustGQL(tb, adminKey, `mutation { createAPIKey(input: {name: "k", user: "alice"}) { secret } }`, nil)
	w.alice = str(d, "createAPIKey", "secret")
	wc := ts.mustGQL(tb, adminKey, `mutation { createWorkerCredential(pool: "onprem-k8s", name: "fuzz") { secret } }`, nil)
	w.workerSecret = str(wc, "createWorkerCredential", "secret")
	var reg agentapi.RegisterResponse
	if code := agentCall(tb, ts, w.workerSecret, http.MethodPost, agentapi.PathRegister, map[string]any{"hostname": "fuzz-host",
		"gpus": []any{map[string]any{"index": 0}}, "version": "test", "mode": "process"}, &reg); code != http.StatusOK {
		tb.Fatalf("register: %d", code)
	}
	w.workerID = reg.WorkerID
	w.claimNew(tb)
	return w
}

// claimNew enqueues a task of alice's, places it and claims it.
func (w *fuzzWorld) claimNew(tb testing.TB) {
	tb.Helper()
	d := w.ts.mustGQL(tb, w.alice, `mutation { enqueueTask(input: {name: "fuzzed", project: "fraud-models", computeResource: "1 GPU", command: ["python", "train.py"]}) { id } }`, nil)
	id := str(d, "enqueueTask", "id")
	if w.ts.app.Engine == nil {
		eng := &loop.Loop{State: platform.EngineState{Store: w.ts.app.Store}, Planner: w.ts.app.Service, Holder: "fuzz"}
		if _, err := eng.PassAll(context.Background()); err != nil {
			tb.Fatalf("engine pass: %v", err)
		}
	}
	for range 20 {
		var out agentapi.ClaimResponse
		code := agentCall(tb, w.ts, w.workerSecret, http.MethodPost, agentapi.PathClaim, agentapi.ClaimRequest{WorkerID: w.workerID, FreeGPUs: 8, WaitSeconds: 1}, &out)
		if code == http.StatusOK && out.Task != nil {
			if out.Task.TaskID == id {
				w.task, w.attempt, w.ended = id, out.Task.Attempt, false
				return
			}
			_ = agentCall(tb, w.ts, w.workerSecret, http.MethodPost, agentapi.PathTasks+out.Task.TaskID+"/finish", agentapi.FinishRequest{Attempt: out.Task.Attempt, State: "completed"}, nil)
		}
	}
	tb.Fatalf("the worker never claimed task %s", id)
}

// fill puts the world's ids in a fuzzed text: $TASK, $WORKER, $ATTEMPT.
func (w *fuzzWorld) fill(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	return strings.NewReplacer("$TASK", w.task, "$WORKER", w.workerID, "$ATTEMPT", string(rune('0'+w.attempt%10))).Replace(s)
}

// noServerFault fails t when an answer is a 5xx, or the server logged an
// error (a panic recovered, an internal failure): bad input is the
// caller's to fix, and is answered as such.
func noServerFault(t *testing.T, ts *testServer, what string, status int, body, sent string) {
	t.Helper()
	if status >= 500 {
		t.Fatalf("%s answered %d: %s\nsent: %s", what, status, body, sent)
	}
	if errs := ts.logs.errors(); len(errs) > 0 {
		t.Fatalf("%s logged errors: %s\nsent: %s", what, strings.Join(errs, "\n"), sent)
	}
	noStackTrace(t, body)
}

// fuzzWorkerAPI posts fuzzed bodies (with $TASK, $WORKER and $ATTEMPT
// filled) to one call of the worker protocol, with the pool's credential.
func fuzzWorkerAPI(f *testing.F, path string, check func(t *testing.T, w *fuzzWorld, status int, body string), seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	w := newFuzzWorld(f)
	f.Fuzz(func(t *testing.T, sent string) {
		if w.ended {
			w.claimNew(t)
		}
		body := w.fill(sent)
		req, err := http.NewRequest(http.MethodPost, w.ts.url+w.fill(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+w.workerSecret)
		resp, raw := w.ts.send(t, req)
		noServerFault(t, w.ts, path, resp.StatusCode, raw, body)
		if resp.StatusCode >= 400 {
			var e agentapi.Error
			if json.Unmarshal([]byte(raw), &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%s: a refusal not in the protocol's error shape: %d %s", path, resp.StatusCode, raw)
			}
			return
		}
		check(t, w, resp.StatusCode, raw)
	})
}

// FuzzWorkerHeartbeat posts fuzzed heartbeats: never a 5xx or a logged
// error; a refusal in the protocol's error shape; an answer that decodes
// with a lease.
//
//	go test -run '^$' -fuzz '^FuzzWorkerHeartbeat$' -fuzztime 30s ./internal/server
func FuzzWorkerHeartbeat(f *testing.F) {
	fuzzWorkerAPI(f, agentapi.PathHeartbeat, func(t *testing.T, w *fuzzWorld, status int, body string) {
		var hr agentapi.HeartbeatResponse
		if err := json.Unmarshal([]byte(body), &hr); err != nil || hr.LeaseSeconds <= 0 {
			t.Fatalf("heartbeat answered %d %s", status, body)
		}
	},
		`{"workerId":"$WORKER","tasks":[{"taskId":"$TASK","attempt":$ATTEMPT,"gpus":[0]}]}`,
		`{"workerId":"$WORKER","tasks":[{"taskId":"$TASK","attempt":$ATTEMPT,"app":{"ready":true,"address":"127.0.0.1:1"}}]}`,
		`{"workerId":"$WORKER","tasks":[{"taskId":"$TASK","attempt":-1,"gpus":[-5,99999]},{"taskId":"nope","attempt":1}]}`,
		`{"workerId":"other","tasks":null}`)
}

// FuzzWorkerLogs posts fuzzed log batches for the claimed task: never a
// 5xx or a logged error; an answer that accepts no more lines than sent.
//
//	go test -run '^$' -fuzz '^FuzzWorkerLogs$' -fuzztime 30s ./internal/server
func FuzzWorkerLogs(f *testing.F) {
	fuzzWorkerAPI(f, agentapi.PathTasks+"$TASK/logs", func(t *testing.T, w *fuzzWorld, status int, body string) {
		var lr agentapi.LogsResponse
		if err := json.Unmarshal([]byte(body), &lr); err != nil || lr.Accepted < 0 || lr.Accepted > agentapi.MaxLogLinesPerBatch {
			t.Fatalf("logs answered %d %s", status, body)
		}
	},
		`{"attempt":$ATTEMPT,"lines":[{"t":"2025-01-01T00:00:00Z","stream":"stdout","line":"hello","n":1}]}`,
		`{"attempt":$ATTEMPT,"lines":[{"t":"2025-01-01T00:00:00Z","stream":"worker","line":"`+strings.Repeat("x", 100)+`","n":2},{"stream":"bogus","line":"\u0000\ud800"}]}`,
		`{"attempt":$ATTEMPT,"lines":[{"t":"0001-01-01T00:00:00Z","stream":"stderr","line":"a","n":-3},{"t":"9999-12-31T23:59:59Z","stream":"stderr","line":"b","n":9223372036854775807}]}`,
		`{"attempt":99,"lines":[]}`)
}

// FuzzWorkerFinish posts fuzzed end reports for the claimed task: never a
// 5xx or a logged error. A report that ends the task has the world claim
// a new one for the next input.
//
//	go test -run '^$' -fuzz '^FuzzWorkerFinish$' -fuzztime 30s ./internal/server
func FuzzWorkerFinish(f *testing.F) {
	fuzzWorkerAPI(f, agentapi.PathTasks+"$TASK/finish", func(t *testing.T, w *fuzzWorld, status int, body string) {
		w.ended = true
	},
		`{"attempt":$ATTEMPT,"state":"completed","exitCode":0,"outputs":["s3://bucket/run"]}`,
		`{"attempt":$ATTEMPT,"state":"failed","exitCode":137,"message":"killed: `+strings.Repeat("y", 300)+`"}`,
		`{"attempt":$ATTEMPT,"state":"running","exitCode":-1}`,
		`{"attempt":$ATTEMPT,"state":"preempted","outputs":["","../../etc","\u0000"]}`)
}

// fuzzMutations are the main mutations, each with its variables fuzzed.
var fuzzMutations = []string{
	`mutation($doc: String!, $dry: Boolean) { applyEstate(document: $doc, dryRun: $dry) { summary } }`,
	`mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`,
	`mutation($in: RunPipelineInput!) { runPipeline(input: $in) { id } }`,
	`mutation($in: CreateScheduleInput!) { createSchedule(input: $in) { id } }`,
	`mutation($in: StartStudyInput!) { startStudy(input: $in) { id } }`,
	`mutation($in: LaunchAppInput!) { launchApp(input: $in) { id } }`,
	`mutation($in: CreateUserInput!) { createUser(input: $in) { id } }`,
	`mutation($in: CreateAPIKeyInput!) { createAPIKey(input: $in) { secret } }`,
	`mutation($scope: SecretScope!, $owner: ID, $name: String!, $value: String!) { setSecret(scope: $scope, owner: $owner, name: $name, value: $value) { name } }`,
	`mutation($in: LLMModelInput!) { putLLMModel(input: $in) { __typename } }`,
	`mutation($in: TokenBudgetInput!) { putTokenBudget(input: $in) { __typename } }`,
	`mutation($in: ProjectInput!) { createProject(input: $in) { __typename } }`,
	`mutation($id: ID!, $p: StringMap, $name: String) { cloneTask(id: $id, parameterOverrides: $p, name: $name) { id } }`,
	`mutation($in: PublishArtifactPointerInput!) { publishArtifactPointer(input: $in) { id } }`,
	`mutation($in: AppInput!) { putApp(input: $in) { __typename } }`,
}

// FuzzGraphQLMutation posts one of the main mutations, its variables the
// fuzzed JSON ($TASK filled), as the platform admin or as alice (a
// member), to the real GraphQL handler over SQLite. Whatever the
// variables, the answer is GraphQL (data or errors), never a 5xx, an
// INTERNAL error or a logged error.
//
//	go test -run '^$' -fuzz '^FuzzGraphQLMutation$' -fuzztime 30s ./internal/server
func FuzzGraphQLMutation(f *testing.F) {
	f.Add(uint8(0), `{"doc":"apiVersion: klique/v1\nkind: Estate\ngroups:\n  - {name: g1}\n","dry":true}`)
	f.Add(uint8(0x81), `{"in":{"name":"t","project":"fraud-models","computeResource":"1 GPU","command":["python","x.py"],"parameters":{"lr":"0.1"}}}`)
	f.Add(uint8(0x82), `{"in":{"definition":"name: p\nproject: fraud-models\nsteps:\n  - {name: a, computeResource: 1 GPU, command: [echo, \"{{params.x}}\"]}\n","params":{"x":"1"}}}`)
	f.Add(uint8(0x83), `{"in":{"name":"s","task":"$TASK","cron":"*/5 * * * *"}}`)
	f.Add(uint8(0x84), `{"in":{"name":"st","baseTask":"$TASK","strategy":"grid","objective":"loss","budget":{"trials":4},"space":[{"name":"lr","kind":"choice","values":["0.1","0.2"]},{"name":"wd","kind":"float","lo":1e-9,"hi":1e300,"step":-1}]}}`)
	f.Add(uint8(0x85), `{"in":{"app":"jupyter","computeResource":"1 GPU","values":{"a":[1,{"b":null}]}}}`)
	f.Add(uint8(6), `{"in":{"name":"bob","role":"MEMBER","groups":[{"group":"ml-research"}]}}`)
	f.Add(uint8(8), `{"scope":"PROJECT","owner":"fraud-models","name":"K","value":"v"}`)
	f.Add(uint8(9), `{"in":{"name":"m","route":"none","inputPrice":1e308,"maxOutputTokens":-1}}`)
	f.Add(uint8(0x8c), `{"id":"$TASK","p":{"lr":"0.3"},"name":"clone"}`)
	f.Add(uint8(0x8d), `{"in":{"task":"$TASK","name":"../model","url":"file:///etc/passwd","size":-1}}`)
	w := newFuzzWorld(f)
	f.Fuzz(func(t *testing.T, op uint8, vars string) {
		query := fuzzMutations[int(op&0x7f)%len(fuzzMutations)]
		cred := adminKey
		if op&0x80 != 0 {
			cred = w.alice
		}
		body := []byte(`{"query":` + mustJSON(t, query) + `,"variables":` + w.fill(vars) + `}`)
		req, err := http.NewRequest(http.MethodPost, w.ts.url+"/graphql", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+cred)
		resp, raw := w.ts.send(t, req)
		noServerFault(t, w.ts, "graphql", resp.StatusCode, raw, string(body))
		var res struct {
			Data   json.RawMessage `json:"data"`
			Errors []gqlError      `json:"errors"`
		}
		if err := json.Unmarshal([]byte(raw), &res); err != nil || (len(res.Errors) == 0 && (len(res.Data) == 0 || string(res.Data) == "null")) {
			t.Fatalf("not a GraphQL answer: %d %s\nsent: %s", resp.StatusCode, raw, body)
		}
		for _, e := range res.Errors {
			if e.Extensions["code"] == "INTERNAL" || e.Message == "" {
				t.Fatalf("an internal error for the caller's variables: %s\nsent: %s", raw, body)
			}
		}
	})
}
