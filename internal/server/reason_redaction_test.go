package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/store"
)

// A worker (or an HPC job's task-run, which redacts nothing) reports a
// failure whose message quotes a last line that begins with the end of a
// secret (the secret was cut over two lines, which the log redacts as one
// stream) and was cut, at the message's length limit, inside the secret's
// start: neither part reaches the task's reason or its audit entry
// (issue 39 defect 10).
func TestAFailureReasonNeverCarriesAnyPartOfASecretOnTheServer(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	const secret = "hf_fixture_secret_value"
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
	suffix, prefix := secret[len(secret)-11:], secret[:11]
	msg := "exited with code 1; last line: " + suffix + " was refused; then " + prefix
	msg = strings.Repeat("x", 4096-len(msg)) + msg
	if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+id+"/finish", agentapi.FinishRequest{Attempt: a.Attempt,
		State: agentapi.StateFailed, ExitCode: 1, Message: msg}, nil); code != http.StatusNoContent {
		t.Fatalf("finish: %d", code)
	}
	leaks := func(where, text string) {
		t.Helper()
		for k := 6; k <= len(secret); k++ {
			for _, part := range []string{secret[:k], secret[len(secret)-k:]} {
				if strings.Contains(text, part) {
					t.Errorf("%s holds %q of the secret: ...%s", where, part, text[max(0, len(text)-200):])
				}
			}
		}
	}
	ctx, tenant := context.Background(), f.ids["tenant default"]
	task, err := ts.app.Store.GetTask(ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	leaks("the task's reason", task.Reason)
	if !strings.Contains(task.Reason, "was refused") || !strings.Contains(task.Reason, "[redacted]") {
		t.Errorf("reason = ...%s", task.Reason[max(0, len(task.Reason)-200):])
	}
	audit, err := ts.app.Store.ListAudit(ctx, tenant, store.AuditFilter{ObjectID: id}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range audit {
		leaks("audit entry "+e.Action, e.Detail)
	}
}
