package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/agentapi"
)

// A worker whose tasks share one user names the project it runs in its
// claims: the control plane hands it only tasks of that project, and a
// task of another project waiting on the pool says why in its reason (the
// why-waiting sentence). A claim naming no project takes it (issue 39
// defect 4).
func TestAClaimNamingAProjectTakesOnlyItsTasksAndTheOthersSayWhy(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	d := ts.mustGQL(t, f.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "eval", "project": "shared-eval", "computeResource": "1 GPU", "command": []any{"python", "eval.py"}}})
	evalID := str(d, "enqueueTask", "id")
	place(t, ts)
	claim := func(project string) *agentapi.Assignment {
		var out agentapi.ClaimResponse
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim, agentapi.ClaimRequest{
			WorkerID: f.ids["worker gpu-host-7"], FreeGPUs: 8, WaitSeconds: 1, Project: project}, &out); code != http.StatusOK && code != http.StatusNoContent {
			t.Fatalf("claim: %d", code)
		}
		return out.Task
	}
	fraud := f.ids["project fraud-models"]
	for a := claim(fraud); a != nil; a = claim(fraud) {
		if a.ProjectID != fraud || a.TaskID == evalID {
			t.Fatalf("a claim for project fraud-models took task %s of project %s", a.TaskID, a.ProjectID)
		}
	}
	task, err := ts.app.Store.GetTask(context.Background(), f.ids["tenant default"], evalID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != "placed" || !strings.Contains(task.Reason, "runs tasks of project fraud-models") ||
		!strings.Contains(task.Reason, "one project at a time") {
		t.Errorf("the waiting task of shared-eval is %s: %q", task.Status, task.Reason)
	}
	if a := claim(""); a == nil || a.TaskID != evalID {
		t.Errorf("a claim naming no project took %+v, want %s", a, evalID)
	}
}
