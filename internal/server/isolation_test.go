package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/klique-ai/klique/internal/store/pgtest"
)

// actor is who tries an operation in an isolation case.
type actor int

const (
	// otherAdmin is olga, the admin of tenant "other".
	otherAdmin actor = iota
	// otherMember is oscar, a member of a group of tenant "other".
	otherMember
	// thirdAdmin is tess, the admin of tenant "third", who creates objects
	// with the same names as tenant default's.
	thirdAdmin
	// victor is a member of group vision of tenant default.
	victor
	// viewer is a viewer in group ml-research of tenant default.
	viewer
)

func (a actor) String() string {
	return [...]string{"the other tenant's admin", "the other tenant's member", "the third tenant's admin",
		"victor of group vision", "the viewer of ml-research"}[a]
}

// otherTenant reports whether the actor belongs to another tenant than
// default.
func (a actor) otherTenant() bool { return a <= thirdAdmin }

func (a actor) key(f *fixture) string {
	return [...]string{f.olga, f.oscar, f.tess, f.victor, f.viewer}[a]
}

// ref is a variable value that names a fixture object; it is replaced by
// the object's id when the case runs.
type ref string

// isoCase is one operation tried by someone who must not reach tenant
// default's (or group ml-research's) objects through it.
type isoCase struct {
	// field is the schema field the case covers, "Query.x" or "Mutation.y".
	field string
	as    actor
	// name completes the sentence "<actor> ...".
	name  string
	query string
	vars  map[string]any
	// code is the extensions.code the first error must carry; "" means
	// the operation succeeds (within the caller's own reach).
	code string
	// check makes further assertions on the answer.
	check func(r *report, f *fixture, res *gqlResult)
	// knownBug, when set, says which known bug outside this package makes
	// the case fail: a failure is then reported as a skip, and a pass as an
	// error, so that the mark is removed once the bug is fixed.
	knownBug string
}

// report collects the failures of one case.
type report struct{ msgs []string }

func (r *report) errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// Checks used by many cases.

// wantList asserts that the values of key in the nodes of a connection are
// exactly want, in any order.
func wantList(conn, key string, want ...string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		got := nodeValues(res.Data, key, conn)
		sort.Strings(got)
		w := append([]string(nil), want...)
		sort.Strings(w)
		if strings.Join(got, ",") != strings.Join(w, ",") {
			r.errorf("%s lists %q, want %q", conn, got, w)
		}
	}
}

// wantPlainList asserts that a plain list at a dotted path holds objects
// whose field (a path inside each object) has exactly the values want, in
// any order; with no want, that the list is empty.
func wantPlainList(at string, field []string, want ...string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		var steps []any
		for _, s := range strings.Split(at, ".") {
			steps = append(steps, s)
		}
		list, ok := path(res.Data, steps...).([]any)
		if !ok {
			r.errorf("%s is missing or not a list", at)
			return
		}
		var fs []any
		for _, s := range field {
			fs = append(fs, s)
		}
		got := []string{}
		for _, item := range list {
			got = append(got, str(item, fs...))
		}
		sort.Strings(got)
		w := append([]string{}, want...)
		sort.Strings(w)
		if strings.Join(got, ",") != strings.Join(w, ",") || len(got) != len(w) {
			r.errorf("%s lists %q, want %q", at, got, w)
		}
	}
}

// wantEmpty asserts that a connection has no edges.
func wantEmpty(conn string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		if path(res.Data, conn) == nil {
			r.errorf("%s is missing from the answer", conn)
			return
		}
		if n := nodes(res.Data, conn); len(n) != 0 {
			r.errorf("%s lists %d objects, want none: %v", conn, len(n), n)
		}
	}
}

// wantNewID asserts that the object at the path exists and is not the
// fixture object with the given key (an object of the same name in another
// tenant is another object).
func wantNewID(key string, steps ...any) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		got := str(res.Data, append(steps, "id")...)
		if got == "" {
			r.errorf("no id at %v", steps)
		} else if got == f.ids[key] {
			r.errorf("%v is %s of tenant default, want a new object", steps, key)
		}
	}
}

func all(checks ...func(r *report, f *fixture, res *gqlResult)) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		for _, c := range checks {
			c(r, f, res)
		}
	}
}

const (
	forbidden  = "FORBIDDEN"
	notFound   = "NOT_FOUND"
	badInput   = "BAD_USER_INPUT"
	taskFields = `{ id name status owner { name } project { name } }`
)

// isolationCases are tried in order: the third tenant's cases build on
// each other (a GPU class, then a pool of that class, and so on). Each
// area's cases are in isolation_*_test.go; they are joined here in the
// order they build on each other.
var isolationCases = slices.Concat(
	queryIsolationCases,
	engineIsolationCases,
	workerIsolationCases,
	poolIsolationCases,
	policyIsolationCases,
	userIsolationCases,
	projectIsolationCases,
	taskIsolationCases,
	gatewayIsolationCases,
	appsIsolationCases,
	pipelineIsolationCases,
	artifactIsolationCases,
	studyIsolationCases,
	scheduleIsolationCases,
)

// noneOf asserts that the answer under a field holds none of the words:
// tenant default's configuration that another caller must not see.
func noneOf(field string, words ...string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		b, _ := json.Marshal(path(res.Data, field))
		for _, w := range words {
			if strings.Contains(string(b), w) {
				r.errorf("%s reveals %q: %s", field, w, b)
			}
		}
	}
}

// onlyVision asserts that every compute resource in the answer (any object
// with a group and a "queuingPriority" parent) belongs to group vision.
func onlyVision(r *report, f *fixture, res *gqlResult) {
	var walk func(v any, inQueue bool)
	seen := 0
	walk = func(v any, inQueue bool) {
		switch x := v.(type) {
		case map[string]any:
			if inQueue {
				seen++
				if g := str(x, "group", "name"); g != "vision" {
					r.errorf("victor sees compute resource %q (%s) of group %q", str(x, "name"), str(x, "id"), g)
				}
			}
			for k, c := range x {
				walk(c, k == "queuingPriority")
			}
		case []any:
			for _, c := range x {
				walk(c, inQueue)
			}
		}
	}
	walk(res.Data, false)
	if seen == 0 {
		r.errorf("the answer lists no compute resource at all; victor should see vision's")
	}
}

// resolveVars replaces refs by fixture ids.
func resolveVars(t *testing.T, f *fixture, v any) any {
	t.Helper()
	switch x := v.(type) {
	case ref:
		if x == "estate file" {
			return readExample(t, "estate.yaml")
		}
		return f.id(t, string(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = resolveVars(t, f, c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = resolveVars(t, f, c)
		}
		return out
	}
	return v
}

// leaks lists the secrets that appear in an answer as whole words without
// having been sent in the request.
func leaks(secrets []string, request, answer string) []string {
	var out []string
	for _, s := range secrets {
		if s == "" || strings.Contains(request, s) {
			continue
		}
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_-])` + regexp.QuoteMeta(s) + `($|[^A-Za-z0-9_-])`)
		if re.MatchString(answer) {
			out = append(out, s)
		}
	}
	return out
}

// runIsolation tries every case against a fresh fixture and checks the
// answer, what it reveals, and that tenant default did not change.
func runIsolation(t *testing.T, ts *testServer) {
	f := newFixture(t, ts)
	before := f.snapshot(t)
	for _, c := range isolationCases {
		t.Run(c.as.String()+" "+c.name, func(t *testing.T) {
			vars, _ := resolveVars(t, f, c.vars).(map[string]any)
			req := gqlRequest{Credential: c.as.key(f), Query: c.query, Vars: vars}
			res := ts.gql(t, req)
			r := &report{}

			if res.Status != 200 {
				r.errorf("HTTP status %d, want 200", res.Status)
			}
			switch {
			case c.code == "" && len(res.Errors) > 0:
				r.errorf("want success, got errors %v: %s", res.codes(), res.message())
			case c.code != "" && res.code() != c.code:
				r.errorf("want error %s, got %v (%s)", c.code, res.codes(), res.message())
			}
			for _, e := range res.Errors {
				if e.Extensions["code"] == nil {
					r.errorf("error %q has no extensions.code", e.Message)
				}
			}
			if c.check != nil && len(res.Errors) == 0 {
				c.check(r, f, res)
			}

			request := string(req.body(t))
			secrets := f.groupSecrets
			if c.as.otherTenant() {
				secrets = f.tenantSecrets
			}
			if c.as != viewer {
				if l := leaks(secrets, request, res.Raw); len(l) > 0 {
					r.errorf("the answer reveals %q:\n%s", l, res.Raw)
				}
			}

			after := f.snapshot(t)
			if after != before {
				r.errorf("tenant default changed:\n%s", diffLines(before, after))
				before = after // report each change once
			}

			switch {
			case len(r.msgs) > 0 && c.knownBug != "":
				t.Skipf("KNOWN BUG (%s):\n%s", c.knownBug, strings.Join(r.msgs, "\n"))
			case len(r.msgs) > 0:
				t.Errorf("%s\nquery: %s\nanswer: %s", strings.Join(r.msgs, "\n"), c.query, res.Raw)
			case c.knownBug != "":
				t.Errorf("the case passes although it is marked as known bug %q: remove the mark", c.knownBug)
			}
		})
	}

	t.Run("alice's task is still placed and alice still reaches it", func(t *testing.T) {
		d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { status reason } }`, map[string]any{"id": f.ids["task"]})
		if s := str(d, "task", "status"); s != "PLACED" {
			t.Errorf("alice's task is %s (%s), want PLACED", s, str(d, "task", "reason"))
		}
	})
}

func TestTenantAndGroupIsolation(t *testing.T) {
	t.Parallel()
	t.Run("on SQLite", func(t *testing.T) {
		t.Parallel()
		runIsolation(t, startServer(t))
	})
	t.Run("on PostgreSQL", func(t *testing.T) {
		t.Parallel()
		runIsolation(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t))))
	})
}

// loadSchema parses the GraphQL schema files of the repository.
func loadSchema(t *testing.T) *ast.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "schema", "*.graphqls"))
	if err != nil || len(files) == 0 {
		t.Fatalf("find schema files: %v (found %d)", err, len(files))
	}
	var sources []*ast.Source
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		sources = append(sources, &ast.Source{Name: name, Input: string(b)})
	}
	schema, err := gqlparser.LoadSchema(sources...)
	if err != nil {
		t.Fatalf("parse schema: %v", err)
	}
	return schema
}

// TestEveryOperationHasAnIsolationCase keeps the isolation table complete:
// a new query or mutation cannot be added without saying what another
// tenant and a member of another group get from it.
func TestEveryOperationHasAnIsolationCase(t *testing.T) {
	t.Parallel()
	schema := loadSchema(t)
	fields := map[string]bool{}
	for _, root := range []*ast.Definition{schema.Query, schema.Mutation} {
		if root == nil {
			t.Fatalf("the schema lacks a Query or Mutation type")
		}
		for _, fd := range root.Fields {
			if strings.HasPrefix(fd.Name, "__") {
				continue
			}
			fields[root.Name+"."+fd.Name] = true
		}
	}
	if len(fields) < 50 {
		t.Fatalf("found only %d operations in the schema; is the schema folder right?", len(fields))
	}
	byOther, byGroup := map[string]int{}, map[string]int{}
	for _, c := range isolationCases {
		if !fields[c.field] {
			t.Errorf("isolation case %q names %s, which is not in the schema", c.name, c.field)
		}
		if c.as.otherTenant() {
			byOther[c.field]++
		} else {
			byGroup[c.field]++
		}
	}
	var names []string
	for f := range fields {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		if byOther[f] == 0 {
			t.Errorf("%s has no isolation case for another tenant: add one to isolationCases", f)
		}
		if byGroup[f] == 0 {
			t.Errorf("%s has no isolation case for a member of another group: add one to isolationCases", f)
		}
	}
	t.Logf("%d operations, %d isolation cases", len(fields), len(isolationCases))
}

// TestProjectScopedCredential checks the third boundary: a key scoped to one
// project acts only on that project's tasks and cannot change identities.
func TestProjectScopedCredential(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, smallEstate+"  - name: proj2\n")
	ts.mustGQL(t, adminKey, `mutation { createUser(input: {name: "amy", groups: [{group: "team"}]}) { id } }`, nil)
	amy, amyKeyID := newKey(t, ts, "amy")
	enqueue := func(cred, name, project string) *gqlResult {
		return ts.gql(t, gqlRequest{Credential: cred, Query: `mutation($n: String!, $p: ID) { enqueueTask(input: {name: $n, computeResource: "1 GPU", project: $p, command: ["true"]}) { id project { name } } }`,
			Vars: map[string]any{"n": name, "p": project}})
	}
	res := enqueue(amy, "in-proj", "proj")
	if len(res.Errors) > 0 {
		t.Fatalf("enqueue in proj: %s", res.Raw)
	}
	inProj := str(res.Data, "enqueueTask", "id")
	d := ts.mustGQL(t, amy, `mutation { createAPIKey(input: {name: "ci", project: "proj2"}) { secret apiKey { project { name } } } }`, nil)
	if got := str(d, "createAPIKey", "apiKey", "project", "name"); got != "proj2" {
		t.Fatalf("the scoped key's project is %q, want proj2", got)
	}
	scoped := str(d, "createAPIKey", "secret")

	t.Run("it enqueues in its project without naming it", func(t *testing.T) {
		res := enqueue(scoped, "in-proj2", "")
		if len(res.Errors) > 0 || str(res.Data, "enqueueTask", "project", "name") != "proj2" {
			t.Errorf("enqueue with the scoped key = %s, want a task in proj2", res.Raw)
		}
	})
	t.Run("it may not enqueue in another project", func(t *testing.T) {
		if res := enqueue(scoped, "x", "proj"); res.code() != "FORBIDDEN" {
			t.Errorf("code = %v, want FORBIDDEN: %s", res.codes(), res.Raw)
		}
	})
	t.Run("it sees only its project and its tasks", func(t *testing.T) {
		d := ts.mustGQL(t, scoped, `{ me { project { name } } projects { edges { node { name } } } tasks { edges { node { name } } } }`, nil)
		if got := nodeValues(d, "name", "projects"); strings.Join(got, ",") != "proj2" {
			t.Errorf("projects = %v, want proj2", got)
		}
		if got := nodeValues(d, "name", "tasks"); strings.Join(got, ",") != "in-proj2" {
			t.Errorf("tasks = %v, want in-proj2", got)
		}
		if got := str(d, "me", "project", "name"); got != "proj2" {
			t.Errorf("me.project = %q, want proj2", got)
		}
	})
	t.Run("it cannot read or abort a task of another project", func(t *testing.T) {
		for _, q := range []string{`query($id: ID!) { task(id: $id) { id } }`, `mutation($id: ID!) { abortTask(id: $id) { id } }`} {
			res := ts.gql(t, gqlRequest{Credential: scoped, Query: q, Vars: map[string]any{"id": inProj}})
			if res.code() != "NOT_FOUND" {
				t.Errorf("%s: code = %v, want NOT_FOUND: %s", q, res.codes(), res.Raw)
			}
		}
	})
	t.Run("it may not create API keys", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: scoped, Query: `mutation { createAPIKey(input: {name: "more"}) { secret } }`})
		if res.code() != "FORBIDDEN" {
			t.Errorf("code = %v, want FORBIDDEN: %s", res.codes(), res.Raw)
		}
	})
	t.Run("it may not revoke its owner's unscoped key", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: scoped, Query: `mutation($id: ID!) { revokeAPIKey(id: $id) { revokedAt } }`,
			Vars: map[string]any{"id": amyKeyID}})
		var failures []string
		if c := res.code(); c != "FORBIDDEN" && c != "NOT_FOUND" {
			failures = append(failures, fmt.Sprintf("code = %v, want FORBIDDEN: %s", res.codes(), res.Raw))
		}
		if r := ts.gql(t, gqlRequest{Credential: amy, Query: meQuery}); r.Status != 200 || len(r.Errors) > 0 {
			failures = append(failures, fmt.Sprintf("amy's unscoped key no longer works: %s", r.Raw))
		}
		for _, f := range failures {
			t.Error(f)
		}
	})
}

func TestLeakCheck(t *testing.T) {
	t.Parallel()
	secrets := []string{"ml-research", "vision", "0190-abc"}
	for _, c := range []struct {
		name, request, answer string
		want                  []string
	}{
		{"a secret in the answer is found", `{}`, `{"message":"no group 'ml-research'"}`, []string{"ml-research"}},
		{"a secret the caller sent is not a leak", `{"id":"ml-research"}`, `{"message":"no group 'ml-research'"}`, nil},
		{"a secret inside a longer word is not found", `{}`, `{"action":"user.provisioned","x":"vision-2"}`, nil},
		{"an id as a JSON value is found", `{}`, `{"id":"0190-abc"}`, []string{"0190-abc"}},
		{"several are all found", `{}`, `vision 0190-abc`, []string{"vision", "0190-abc"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := leaks(secrets, c.request, c.answer)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("leaks = %q, want %q", got, c.want)
			}
		})
	}
}
