package server_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/store"
)

// A worker that sends a task's secret, plain and encoded, through the real
// worker API in every field it can write: nothing of it can be read back
// over GraphQL, MCP (get_task, get_task_metrics) or from the database, and
// the audit trail holds none of it.
func TestSecretsDoNotComeBackFromTheWorkerAPI(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	const secret = "hf_fixture_secret_value"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	forms := []string{secret, b64, hex.EncodeToString([]byte(secret)), strings.ToUpper(secret), "eulav_terces_erutxif_fh",
		base64.RawURLEncoding.EncodeToString([]byte(secret))}
	d := ts.mustGQL(t, f.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "leaky", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "leak.py"}, "secrets": []any{"HF_TOKEN"}}})
	id := str(d, "enqueueTask", "id")
	place(t, ts)
	var a *agentapi.Assignment
	for i := 0; i < 5 && (a == nil || a.TaskID != id); i++ {
		var out agentapi.ClaimResponse
		agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim,
			agentapi.ClaimRequest{WorkerID: f.ids["worker gpu-host-7"], FreeGPUs: 8, WaitSeconds: 2}, &out)
		a = out.Task
	}
	if a == nil || a.TaskID != id {
		t.Fatalf("claimed %+v, want %s", a, id)
	}
	now := time.Now()
	var lines []agentapi.LogLine
	for i, form := range forms {
		lines = append(lines, agentapi.LogLine{At: now, Stream: "stdout", Line: "value: " + form, N: int64(i + 1)})
	}
	lines = append(lines, agentapi.LogLine{At: now, Stream: "stdout", Line: "split " + secret[:8], N: int64(len(lines) + 1)},
		agentapi.LogLine{At: now, Stream: "stdout", Line: secret[8:] + " done", N: int64(len(lines) + 2)})
	if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+id+"/logs", agentapi.LogsRequest{Attempt: a.Attempt, Lines: lines}, nil); code != http.StatusOK {
		t.Fatalf("logs: %d", code)
	}
	if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+id+"/metrics", agentapi.MetricsRequest{Attempt: a.Attempt,
		Points: []agentapi.MetricPoint{{At: now, Name: "loss/" + secret, Value: 1}, {At: now, Name: "acc/" + b64, Value: 2}}}, nil); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+id+"/finish", agentapi.FinishRequest{Attempt: a.Attempt,
		State: agentapi.StateFailed, ExitCode: 1, Message: "401 with Basic " + b64, Outputs: []string{"s3://bucket/" + secret}}, nil); code != http.StatusNoContent {
		t.Fatalf("finish: %d", code)
	}
	leaks := func(where, text string) {
		t.Helper()
		for _, form := range append(forms, secret[:8]+secret[8:]) {
			if strings.Contains(text, form) {
				t.Errorf("%s holds the secret as %q: %s", where, form, text)
			}
		}
	}
	res := ts.gql(t, gqlRequest{Credential: f.alice, Query: `query($id: ID!) { task(id: $id) { reason outputs logs { lines { line } } lastMetrics { name } } }`,
		Vars: map[string]any{"id": id}})
	if res.code() != "" || !strings.Contains(res.Raw, "[redacted]") {
		t.Fatalf("task over GraphQL: %s", res.Raw)
	}
	leaks("GraphQL", res.Raw)
	mc := mcpClient(t, ts, f.alice)
	for _, tool := range []string{"get_task", "get_task_metrics", "get_task_logs"} {
		isErr, text := mcpCall(t, mc, tool, map[string]any{"id": id})
		if isErr {
			t.Fatalf("%s: %s", tool, text)
		}
		leaks("MCP "+tool, text)
	}
	ctx, tenant := context.Background(), f.ids["tenant default"]
	task, err := ts.app.Store.GetTask(ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	leaks("the task's row", task.Reason+" "+strings.Join(task.Run.Outputs, " "))
	logs, err := ts.app.Store.ListLogs(ctx, tenant, id, 0, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, l := range logs {
		all = append(all, l.Line)
	}
	leaks("the log rows", strings.Join(all, ""))
	points, err := ts.app.Store.ListMetrics(ctx, tenant, id, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		leaks("a metric row", p.Name)
	}
	audit, err := ts.app.Store.ListAudit(ctx, tenant, store.AuditFilter{ObjectID: id}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range audit {
		leaks("audit entry "+e.Action, e.Detail)
	}
}
