package server_test

import "testing"

// TestARefusalSaysItsReasonInItsExtensions: a refusal a client acts on
// carries extensions.reason, so that no client matches its message (the
// CLI names its --project flag in a PROJECT_REQUIRED refusal).
func TestARefusalSaysItsReasonInItsExtensions(t *testing.T) {
	ts := startServer(t)
	f := newFixture(t, ts)
	res := ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`,
		Vars: map[string]any{"in": map[string]any{"name": "no-project", "computeResource": "1 GPU", "command": []any{"true"}}}})
	if res.code() != "BAD_USER_INPUT" || len(res.Errors) == 0 {
		t.Fatalf("a task with no project: %s", res.Raw)
	}
	if r, _ := res.Errors[0].Extensions["reason"].(string); r != "PROJECT_REQUIRED" {
		t.Errorf("extensions.reason = %q, want PROJECT_REQUIRED: %s", r, res.Raw)
	}
	// An error with no reason of its own carries none.
	res = ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`,
		Vars: map[string]any{"in": map[string]any{"name": "no-such", "project": "fraud-models", "computeResource": "no such resource", "command": []any{"true"}}}})
	if _, has := res.Errors[0].Extensions["reason"]; has || len(res.Errors) == 0 {
		t.Errorf("a refusal with no reason of its own: %s", res.Raw)
	}
}
