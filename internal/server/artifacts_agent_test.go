package server_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/agentapi"
)

// TestArtifactsThroughTheWorkerProtocol: the worker publishes for the
// attempt it holds (an old attempt is refused, nothing kept), fetches a
// held task's input with its hash, and stops getting it once the task's
// owner can no longer read it.
func TestArtifactsThroughTheWorkerProtocol(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withArtifactMax(artifactMax))
	f := newFixture(t, ts)
	worker := f.ids["worker gpu-host-7"]
	claim := func() *agentapi.Assignment {
		t.Helper()
		place(t, ts)
		var out agentapi.ClaimResponse
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim,
			agentapi.ClaimRequest{WorkerID: worker, FreeGPUs: 8, WaitSeconds: 2}, &out); code != http.StatusOK || out.Task == nil {
			t.Fatalf("claim: %d %+v", code, out)
		}
		return out.Task
	}
	raw := func(cred, method, path string, body []byte, headers map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.url+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+cred)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		return ts.send(t, req)
	}
	first := claim()
	if first.TaskID != f.id(t, "task") {
		t.Fatalf("claimed %s, want the fixture's task", first.TaskID)
	}
	put := func(cred string, attempt, name string, body []byte) (*http.Response, string) {
		return raw(cred, http.MethodPut, agentapi.PathTasks+first.TaskID+"/artifacts/"+name+"?attempt="+attempt, body, map[string]string{"X-Klique-SHA256": sum(body)})
	}

	t.Run("the worker publishes for its attempt; an old attempt or another credential is refused", func(t *testing.T) {
		resp, body := put(f.workerSecret, "1", "model/weights.bin", []byte("from the worker"))
		if resp.StatusCode != http.StatusCreated || !strings.Contains(body, sum([]byte("from the worker"))) {
			t.Fatalf("publish: %d %s", resp.StatusCode, body)
		}
		resp, body = put(f.workerSecret, "2", "stale.bin", []byte("x"))
		if resp.StatusCode != http.StatusConflict {
			t.Fatalf("an attempt the task is not at: %d %s", resp.StatusCode, body)
		}
		resp, body = put(f.alice, "1", "user.bin", []byte("x"))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a user's key on the worker protocol: %d %s", resp.StatusCode, body)
		}
		resp, body = raw(f.workerSecret, http.MethodPost, agentapi.PathTasks+first.TaskID+"/pointers", []byte(`{"attempt":1,"name":"ckpt","url":"s3://b/ckpt"}`), nil)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("pointer: %d %s", resp.StatusCode, body)
		}
		d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { artifacts { name } } }`, map[string]any{"id": first.TaskID})
		if names := strings.Join(artifactNames(d), ","); names != "ckpt,model/weights.bin" {
			t.Fatalf("artifacts %s", names)
		}
		audit := ts.mustGQL(t, f.admin, `{ auditLog(first: 20) { edges { node { action detail } } } }`, nil)
		if !strings.Contains(strings.Join(nodeValues(audit, "detail", "auditLog"), "\n"), "artifact 'model/weights.bin' stored, 15 bytes") {
			t.Fatalf("the audit trail lacks the publication: %v", audit)
		}
	})

	t.Run("a held task's input comes with its hash while its owner may read it", func(t *testing.T) {
		ts.mustGQL(t, f.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
			"name": "evaluate", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "eval.py"},
			"inputs": []any{map[string]any{"name": "weights", "taskId": first.TaskID, "artifact": "model/weights.bin"},
				map[string]any{"name": "ckpt", "taskId": first.TaskID, "artifact": "ckpt"}}}})
		second := claim()
		if len(second.Inputs) != 2 || second.Inputs[0].Name != "weights" || second.Inputs[0].TaskID != first.TaskID {
			t.Fatalf("assignment inputs %+v", second.Inputs)
		}
		get := func(name string) (*http.Response, string) {
			return raw(f.workerSecret, http.MethodGet, agentapi.PathTasks+second.TaskID+"/inputs/"+name+"?attempt=1", nil, nil)
		}
		resp, body := get("weights")
		if resp.StatusCode != http.StatusOK || body != "from the worker" || resp.Header.Get("X-Klique-SHA256") != sum([]byte("from the worker")) {
			t.Fatalf("input: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		resp, _ = get("ckpt")
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Klique-Pointer") != "s3://b/ckpt" {
			t.Fatalf("pointer input: %d %v", resp.StatusCode, resp.Header)
		}
		resp, _ = get("nope")
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("an input the task does not have: %d", resp.StatusCode)
		}
		aliceID := ""
		for _, n := range nodes(ts.mustGQL(t, f.admin, `{ users(first: 100) { edges { node { id name } } } }`, nil), "users") {
			if n["name"] == "alice" {
				aliceID = n["id"].(string)
			}
		}
		ts.mustGQL(t, f.admin, `mutation($id: ID!) { updateUser(id: $id, input: {disabled: true}) { id } }`, map[string]any{"id": aliceID})
		if aliceID == "" {
			t.Fatal("alice is not listed")
		}
		resp, body = get("weights")
		if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "from the worker") || !strings.Contains(body, "owner") {
			t.Fatalf("an input of a disabled owner: %d %s", resp.StatusCode, body)
		}
	})
}
