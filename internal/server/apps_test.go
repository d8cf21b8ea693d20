package server_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/store/pgtest"
)

// The app catalogue, launches and their refusals over GraphQL on
// loopback, on SQLite and PostgreSQL.
func TestAppsOverGraphQL(t *testing.T) {
	t.Parallel()
	t.Run("on SQLite", func(t *testing.T) {
		t.Parallel()
		runApps(t, startServer(t))
	})
	t.Run("on PostgreSQL", func(t *testing.T) {
		t.Parallel()
		runApps(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t))))
	})
}

const launchMutation = `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id name app state url values task { status computeResource { name } spec { command } } } }`

func runApps(t *testing.T, ts *testServer) {
	f := newFixture(t, ts)
	refused := func(t *testing.T, res *gqlResult, code string, words ...string) {
		t.Helper()
		if res.code() != code {
			t.Fatalf("got %s, want code %s", res.Raw, code)
		}
		for _, w := range words {
			if !strings.Contains(res.message(), w) {
				t.Fatalf("message %q lacks %q", res.message(), w)
			}
		}
	}
	launch := func(cred string, in map[string]any) *gqlResult {
		return ts.gql(t, gqlRequest{Credential: cred, Query: launchMutation, Vars: map[string]any{"in": in}})
	}

	d := ts.mustGQL(t, f.alice, `{ apps { name kind locked builtIn form } }`, nil)
	if names := listValues(d, "name", "apps"); !contains(names, "vllm") || !contains(names, "ssh") || len(names) != 8 {
		t.Fatalf("apps: %v", names)
	}

	// An admin puts an app; a member may not.
	put := `mutation($in: AppInput!) { putApp(input: $in) { app { name locked form } changes { action kind name } } }`
	echo := map[string]any{"name": "echo", "kind": "session", "port": 8000, "run": map[string]any{"process": "python3 -m http.server {port}"},
		"form": `{"type":"object","properties":{"greeting":{"type":"string","maxLength":5}}}`}
	refused(t, ts.gql(t, gqlRequest{Credential: f.alice, Query: put, Vars: map[string]any{"in": echo}}), "FORBIDDEN", "only a tenant admin")
	bad := map[string]any{"name": "echo", "kind": "session", "port": 8000, "run": map[string]any{"process": "serve {port} {missing}"}}
	refused(t, ts.gql(t, gqlRequest{Credential: f.admin, Query: put, Vars: map[string]any{"in": bad}}), "BAD_USER_INPUT", "refers to {missing}")
	d = ts.mustGQL(t, f.admin, put, map[string]any{"in": echo})
	if str(d, "putApp", "app", "name") != "echo" || str(d, "putApp", "changes", 0, "kind") != "app" {
		t.Fatalf("putApp: %v", d)
	}

	// alice launches; the instance is a task on her compute resource.
	d = ts.mustGQL(t, f.alice, launchMutation, map[string]any{"in": map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "fraud-models",
		"values": map[string]any{"greeting": "hi"}}})
	id := str(d, "launchApp", "id")
	if str(d, "launchApp", "state") != "waiting" || str(d, "launchApp", "url") != "/apps/"+id+"/" || str(d, "launchApp", "task", "computeResource", "name") != "1 GPU" ||
		str(d, "launchApp", "values", "greeting") != "hi" || str(d, "launchApp", "task", "spec", "command", 3) != "{port}" { // the worker fills the port
		t.Fatalf("launchApp: %v", d)
	}
	name := str(d, "launchApp", "name")

	// A retry with the request's idempotency key answers with the
	// instance the first launch made, not a second one.
	retry := gqlRequest{Credential: f.victor, Query: launchMutation, Headers: map[string]string{"Idempotency-Key": "launch-notebook-1"},
		Vars: map[string]any{"in": map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "vision-detect"}}}
	first, again := ts.gql(t, retry), ts.gql(t, retry)
	if len(first.Errors) > 0 || str(first.Data, "launchApp", "id") == "" || str(again.Data, "launchApp", "id") != str(first.Data, "launchApp", "id") {
		t.Fatalf("a launch and its retry: %s\n%s", first.Raw, again.Raw)
	}
	ts.mustGQL(t, f.victor, `mutation($id: ID!) { stopApp(id: $id) { id } }`, map[string]any{"id": str(first.Data, "launchApp", "id")})

	t.Run("refusals say which rule and what to do", func(t *testing.T) {
		refused(t, launch(f.alice, map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "fraud-models", "values": map[string]any{"greeting": "hello there"}}),
			"BAD_USER_INPUT", `field "greeting"`, "change the value")
		refused(t, launch(f.victor, map[string]any{"app": "echo", "computeResource": "1 A100", "project": "vision-detect"}), "FORBIDDEN", "1 A100")
		ts.mustGQL(t, f.admin, `mutation { setAppQuota(running: 1) { settings { running } } }`, nil)
		refused(t, launch(f.alice, map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "fraud-models"}),
			"CONFLICT", "the company's quota of 1 running apps is reached; stop one of yours: "+name)
		ts.mustGQL(t, f.admin, `mutation { setAppQuota(running: 0) { settings { running } } }`, nil)
		ts.mustGQL(t, f.admin, `mutation { setAppQuota(group: "ml-research", running: 1) { settings { groups { group running } } } }`, nil)
		refused(t, launch(f.alice, map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "fraud-models"}),
			"CONFLICT", "group ml-research's quota of 1 running apps is reached; stop one of yours: "+name)
		ts.mustGQL(t, f.admin, `mutation { lockApp(name: "echo") { app { locked } } }`, nil)
		refused(t, launch(f.victor, map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "vision-detect"}), "FORBIDDEN", "app 'echo' is locked by an admin")
		ts.mustGQL(t, f.admin, `mutation { unlockApp(name: "echo") { app { locked } } }`, nil)
		ts.mustGQL(t, f.admin, `mutation { setAppLaunches(enabled: false) { settings { launchesEnabled } } }`, nil)
		refused(t, launch(f.victor, map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "vision-detect"}), "FORBIDDEN", "switched off for the whole company")
		ts.mustGQL(t, f.admin, `mutation { setAppLaunches(enabled: true) { settings { launchesEnabled } } }`, nil)
		d := ts.mustGQL(t, f.admin, `{ appSettings { launchesEnabled running groups { group running } } }`, nil)
		if path(d, "appSettings", "launchesEnabled") != true || str(d, "appSettings", "groups", 0, "group") != "ml-research" {
			t.Fatalf("appSettings: %v", d)
		}
	})

	t.Run("another group and another tenant neither see nor stop it", func(t *testing.T) {
		for _, cred := range []string{f.victor, f.olga} {
			refused(t, ts.gql(t, gqlRequest{Credential: cred, Query: `query($id: ID!) { appInstance(id: $id) { id } }`, Vars: map[string]any{"id": id}}), "NOT_FOUND", "no app instance")
			refused(t, ts.gql(t, gqlRequest{Credential: cred, Query: `mutation($id: ID!) { stopApp(id: $id) { id } }`, Vars: map[string]any{"id": id}}), "NOT_FOUND", "no app instance")
			d := ts.mustGQL(t, cred, `{ appInstances { id } }`, nil)
			if contains(listValues(d, "id", "appInstances"), id) {
				t.Fatalf("they list %v", d)
			}
		}
	})

	t.Run("its owner lists and stops it", func(t *testing.T) {
		d := ts.mustGQL(t, f.alice, `{ appInstances(active: true) { id name } }`, nil)
		if ids := listValues(d, "id", "appInstances"); len(ids) != 1 || ids[0] != id {
			t.Fatalf("appInstances: %v", d)
		}
		d = ts.mustGQL(t, f.alice, `mutation($id: ID!) { stopApp(id: $id) { state reason } }`, map[string]any{"id": id})
		if str(d, "stopApp", "state") != "stopped" || !strings.Contains(str(d, "stopApp", "reason"), "stopped by alice") {
			t.Fatalf("stopApp: %v", d)
		}
		d = ts.mustGQL(t, f.admin, `mutation { deleteApp(name: "echo") { changes { action kind } } }`, nil)
		if str(d, "deleteApp", "changes", 0, "action") != "DELETE" {
			t.Fatalf("deleteApp: %v", d)
		}
	})
}

// listValues returns the value of key in each object of a list.
func listValues(v any, key string, steps ...any) []string {
	list, _ := path(v, steps...).([]any)
	var out []string
	for _, o := range list {
		s, _ := path(o, key).(string)
		out = append(out, s)
	}
	return out
}
