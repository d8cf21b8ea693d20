package server_test

import (
	"strings"
	"testing"
)

const localRunFields = `id name status reason exitCode finishedAt computeResource { name } pool { name } position
	project { name } owner { name } group { name }
	spec { command repository commit diff workingDir packages parameters }`

// startLocal starts a local run of alice's in fraud-models and returns its
// id.
func startLocal(t *testing.T, f *fixture, name string) string {
	t.Helper()
	d := f.mustGQL(t, f.alice, `mutation($in: StartLocalRunInput!) { startLocalRun(input: $in) { `+localRunFields+` } }`,
		map[string]any{"in": map[string]any{
			"name": name, "project": "fraud-models",
			"command":    []any{"python", "train.py", "--lr", "0.1"},
			"repository": "https://git.example.com/ml/fraud.git", "commit": "4f2a9c1",
			"diff":       "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-lr = 1\n+lr = 2\n",
			"workingDir": "src", "packages": []any{"numpy==2.0.0"},
			"parameters": map[string]any{"lr": "0.1"},
		}})
	run := path(d, "startLocalRun")
	if str(run, "status") != "RUNNING_LOCALLY" || str(run, "owner", "name") != "alice" || str(run, "project", "name") != "fraud-models" ||
		str(run, "group", "name") != "ml-research" || path(run, "computeResource") != nil || path(run, "position") != nil {
		t.Fatalf("started local run: %v", run)
	}
	if spec := path(run, "spec"); str(spec, "commit") != "4f2a9c1" || str(spec, "workingDir") != "src" || !strings.Contains(str(spec, "diff"), "+lr = 2") {
		t.Fatalf("local run's code state: %v", spec)
	}
	return str(run, "id")
}

// TestLocalRunOverGraphQL follows a run on its owner's machine through the
// API: started in status RUNNING_LOCALLY with its code state, reported on
// (metrics, console lines, parameters), never placed by the engine, seen
// by its group and by no one else, reported on by its owner alone, and
// ended with its exit code.
func TestLocalRunOverGraphQL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	id := startLocal(t, f, "laptop-train")

	report := `mutation($id: ID!, $in: LocalRunReportInput!) { reportLocalRun(id: $id, input: $in) { status spec { parameters } } }`
	d := ts.mustGQL(t, f.alice, report, map[string]any{"id": id, "in": map[string]any{
		"metrics":    []any{map[string]any{"name": "loss", "value": 0.5, "step": 1}, map[string]any{"name": "loss", "value": 0.25, "step": 2}},
		"logs":       []any{map[string]any{"line": "epoch 1", "n": 1}, map[string]any{"line": "warning: slow", "stream": "stderr", "n": 2}},
		"parameters": map[string]any{"batch_size": "32", "lr": "0.2"},
	}})
	if p := path(d, "reportLocalRun", "spec", "parameters"); str(p, "lr") != "0.2" || str(p, "batch_size") != "32" {
		t.Fatalf("parameters after the report: %v", p)
	}
	// A report sent twice keeps each numbered line once; an empty one is a
	// sign of life.
	ts.mustGQL(t, f.alice, report, map[string]any{"id": id, "in": map[string]any{"logs": []any{map[string]any{"line": "epoch 1", "n": 1}}}})
	ts.mustGQL(t, f.alice, report, map[string]any{"id": id, "in": map[string]any{}})

	// The engine never places a local run: after a pass it still runs
	// locally, with no pool and no place in any queue.
	place(t, ts)
	read := `query($id: ID!) { task(id: $id) { ` + localRunFields + `
		metrics { name value step } logs { lines { stream line } } } }`
	d = ts.mustGQL(t, f.alice, read, map[string]any{"id": id})
	task := path(d, "task")
	if str(task, "status") != "RUNNING_LOCALLY" || path(task, "pool") != nil || path(task, "position") != nil {
		t.Fatalf("local run after an engine pass: %v", task)
	}
	if ms, _ := path(task, "metrics").([]any); len(ms) != 2 || path(ms[1], "value") != 0.25 || path(ms[1], "step") != float64(2) {
		t.Fatalf("metrics: %v", path(task, "metrics"))
	}
	if ls, _ := path(task, "logs", "lines").([]any); len(ls) != 2 || str(ls[0], "line") != "epoch 1" || str(ls[1], "stream") != "stderr" {
		t.Fatalf("logs: %v", path(task, "logs"))
	}
	// It is listed with the project's runs, and with the queues' tasks
	// nowhere.
	d = ts.mustGQL(t, f.alice, `{ tasks(filter: {project: "fraud-models", status: [RUNNING_LOCALLY]}) { edges { node { id } } } }`, nil)
	if ids := nodeValues(d, "id", "tasks"); len(ids) != 1 || ids[0] != id {
		t.Fatalf("local runs of fraud-models: %v", ids)
	}
	d = ts.mustGQL(t, f.alice, `{ tasks(filter: {status: [QUEUED, PLACED, RUNNING]}) { edges { node { id } } } }`, nil)
	if contains(nodeValues(d, "id", "tasks"), id) {
		t.Fatalf("a local run is listed among queued, placed and running tasks")
	}

	// Its group sees it; another group's member and another tenant's
	// admin get not-found, for reads and writes alike; a viewer of its
	// group sees it and cannot report; only its owner reports on it.
	if d := ts.mustGQL(t, f.viewer, `query($id: ID!) { task(id: $id) { status } }`, map[string]any{"id": id}); str(d, "task", "status") != "RUNNING_LOCALLY" {
		t.Fatalf("the group's viewer reads %v", d)
	}
	for _, who := range []struct{ name, cred string }{{"victor of vision", f.victor}, {"olga of another tenant", f.olga}, {"oscar of another tenant", f.oscar}} {
		r := ts.gql(t, gqlRequest{Credential: who.cred, Query: `query($id: ID!) { task(id: $id) { id } }`, Vars: map[string]any{"id": id}})
		if r.code() != "NOT_FOUND" {
			t.Fatalf("%s reads the local run: %s", who.name, r.Raw)
		}
		for _, q := range []string{
			`mutation($id: ID!) { reportLocalRun(id: $id, input: {parameters: {lr: "9"}}) { id } }`,
			`mutation($id: ID!) { endLocalRun(id: $id, outcome: ABORTED) { id } }`,
			`mutation($id: ID!) { executeRemotely(id: $id, computeResource: "1 GPU") { id } }`,
		} {
			r := ts.gql(t, gqlRequest{Credential: who.cred, Query: q, Vars: map[string]any{"id": id}})
			if r.code() != "NOT_FOUND" || strings.Contains(r.Raw, "laptop-train") {
				t.Fatalf("%s: %s answers %s", who.name, q, r.Raw)
			}
		}
	}
	r := ts.gql(t, gqlRequest{Credential: f.viewer, Query: report, Vars: map[string]any{"id": id, "in": map[string]any{"parameters": map[string]any{"lr": "9"}}}})
	if r.code() != "FORBIDDEN" {
		t.Fatalf("the group's viewer reports: %s", r.Raw)
	}
	r = ts.gql(t, gqlRequest{Credential: f.admin, Query: report, Vars: map[string]any{"id": id, "in": map[string]any{"parameters": map[string]any{"lr": "9"}}}})
	if r.code() != "FORBIDDEN" || !strings.Contains(r.message(), "only the owner of run 'laptop-train'") {
		t.Fatalf("an admin reports on alice's run: %s", r.Raw)
	}

	// Bad input changes nothing.
	r = ts.gql(t, gqlRequest{Credential: f.alice, Query: report, Vars: map[string]any{"id": id, "in": map[string]any{
		"metrics": []any{map[string]any{"name": " ", "value": 1}}, "parameters": map[string]any{"lr": "0.9"}}}})
	if r.code() != "BAD_USER_INPUT" || !strings.Contains(r.message(), "a metric needs a name") {
		t.Fatalf("a nameless metric: %s", r.Raw)
	}
	r = ts.gql(t, gqlRequest{Credential: f.alice, Query: `mutation($id: ID!) { endLocalRun(id: $id, outcome: COMPLETED, exitCode: 2) { id } }`, Vars: map[string]any{"id": id}})
	if r.code() != "BAD_USER_INPUT" || !strings.Contains(r.message(), "end it as failed with exit code 2") {
		t.Fatalf("completed with exit code 2: %s", r.Raw)
	}

	d = ts.mustGQL(t, f.alice, `mutation($id: ID!) { endLocalRun(id: $id, outcome: FAILED, exitCode: 3) { `+localRunFields+` } }`, map[string]any{"id": id})
	ended := path(d, "endLocalRun")
	if str(ended, "status") != "FAILED" || path(ended, "exitCode") != float64(3) || path(ended, "finishedAt") == nil ||
		str(ended, "reason") != "the local process failed with exit code 3" || str(ended, "spec", "parameters", "lr") != "0.2" {
		t.Fatalf("ended local run: %v", ended)
	}
	r = ts.gql(t, gqlRequest{Credential: f.alice, Query: report, Vars: map[string]any{"id": id, "in": map[string]any{}}})
	if r.code() != "CONFLICT" || !strings.Contains(r.message(), "is not running locally (it is failed)") {
		t.Fatalf("a report after the end: %s", r.Raw)
	}
	// The audit trail tells the run's life.
	d = ts.mustGQL(t, f.admin, `query($id: String!) { auditLog(filter: {objectKind: "task", objectId: $id}) { edges { node { action } } } }`, map[string]any{"id": id})
	if got := strings.Join(nodeValues(d, "action", "auditLog"), " "); got != "task.failed task.parameters task.started" {
		t.Fatalf("audit of the local run: %s", got)
	}
	noErrorLogs(t, ts)
}

// TestExecuteRemotelyOverGraphQL sends a local run to a compute resource:
// the enqueue path's refusals apply (a compute resource the caller may not
// use), and once sent it is an ordinary task: queued with its code state
// and parameters, placed by the engine, and no longer reported on locally.
func TestExecuteRemotelyOverGraphQL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	id := startLocal(t, f, "send-me")
	send := `mutation($id: ID!, $cr: ID!) { executeRemotely(id: $id, computeResource: $cr) { ` + localRunFields + ` } }`

	r := ts.gql(t, gqlRequest{Credential: f.alice, Query: send, Vars: map[string]any{"id": id, "cr": "no such GPU"}})
	if r.code() != "NOT_FOUND" || !strings.Contains(r.message(), "no compute resource 'no such GPU' is open to you") {
		t.Fatalf("an unknown compute resource: %s", r.Raw)
	}
	r = ts.gql(t, gqlRequest{Credential: f.alice, Query: send, Vars: map[string]any{"id": id, "cr": f.id(t, "cr vision/1 GPU")}})
	if r.code() != "NOT_FOUND" {
		t.Fatalf("another group's compute resource: %s", r.Raw)
	}
	if d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { status } }`, map[string]any{"id": id}); str(d, "task", "status") != "RUNNING_LOCALLY" {
		t.Fatalf("a refused send changed the run: %v", d)
	}

	keyed := `mutation($id: ID!, $cr: ID!) { executeRemotely(id: $id, computeResource: $cr, idempotencyKey: "send-1") { ` + localRunFields + ` } }`
	d := ts.mustGQL(t, f.alice, keyed, map[string]any{"id": id, "cr": "1 GPU"})
	sent := path(d, "executeRemotely")
	if str(sent, "id") != id || str(sent, "status") != "QUEUED" || str(sent, "computeResource", "name") != "1 GPU" ||
		path(sent, "position") == nil || str(sent, "spec", "commit") != "4f2a9c1" || str(sent, "spec", "parameters", "lr") != "0.1" {
		t.Fatalf("sent local run: %v", sent)
	}
	r = ts.gql(t, gqlRequest{Credential: f.alice, Query: `mutation($id: ID!) { reportLocalRun(id: $id, input: {}) { id } }`, Vars: map[string]any{"id": id}})
	if r.code() != "CONFLICT" {
		t.Fatalf("a local report on a sent run: %s", r.Raw)
	}
	r = ts.gql(t, gqlRequest{Credential: f.alice, Query: send, Vars: map[string]any{"id": id, "cr": "1 GPU"}})
	if r.code() != "CONFLICT" || !strings.Contains(r.message(), "is not running locally (it is queued)") {
		t.Fatalf("sending twice: %s", r.Raw)
	}
	// A retry with the send's idempotency key answers as the send did.
	if d := ts.mustGQL(t, f.alice, keyed, map[string]any{"id": id, "cr": "1 GPU"}); str(d, "executeRemotely", "id") != id || str(d, "executeRemotely", "status") != "QUEUED" {
		t.Fatalf("a retried send: %v", d)
	}
	place(t, ts)
	if d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { status pool { name } } }`, map[string]any{"id": id}); str(d, "task", "status") != "PLACED" {
		t.Fatalf("the sent run after an engine pass: %v", d)
	}
	d = ts.mustGQL(t, f.admin, `query($id: String!) { auditLog(filter: {objectKind: "task", objectId: $id}) { edges { node { action detail } } } }`, map[string]any{"id": id})
	if got := nodeValues(d, "detail", "auditLog"); len(got) < 2 || !strings.Contains(got[len(got)-2], "from its local run") {
		t.Fatalf("audit of the sent run: %v", got)
	}
	noErrorLogs(t, ts)
}
