package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestMalformedGraphQL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, smallEstate)

	cases := []struct {
		name        string
		method      string
		body        string
		contentType string
		// want are words the first error message must hold (any case).
		want []string
	}{
		{name: "a syntax error names what the parser expected",
			body: `{"query": "{ me { user { name } "}`, want: []string{"expected"}},
		{name: "an unknown field is named",
			body: `{"query": "{ me { shoeSize } }"}`, want: []string{"shoeSize", "Viewer"}},
		{name: "a string literal where an Int is expected is named",
			body: `{"query": "mutation { createPool(input: {name: \"p1\", kind: KUBERNETES, capacityGpus: \"4\", gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"Int"}},
		{name: "a float literal where an Int is expected is named",
			body: `{"query": "mutation { createPool(input: {name: \"p2\", kind: KUBERNETES, capacityGpus: 4.5, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"Int"}},
		{name: "a string variable where an Int is expected is named",
			body: `{"query": "mutation($in: PoolInput!) { createPool(input: $in) { pool { id } } }", "variables": {"in": {"name": "v1", "kind": "KUBERNETES", "capacityGpus": "4", "gpuClass": "l4"}}}`,
			want: []string{"capacityGpus"}},
		{name: "a string for an Int variable of the operation is named",
			body: `{"query": "query($n: Int) { projects(first: $n) { edges { cursor } } }", "variables": {"n": "3"}}`,
			want: []string{"$n", "Int"}},
		{name: "a float variable where an Int is expected is named",
			body: `{"query": "mutation($in: PoolInput!) { createPool(input: $in) { pool { id } } }", "variables": {"in": {"name": "v2", "kind": "KUBERNETES", "capacityGpus": 4.5, "gpuClass": "l4"}}}`,
			want: []string{"capacityGpus"}},
		{name: "a capacity beyond any real pool is refused by name",
			body: `{"query": "mutation { createPool(input: {name: \"p3\", kind: KUBERNETES, capacityGpus: 99999999999, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"capacity"}},
		{name: "an Int beyond 64 bits is refused",
			body: `{"query": "mutation { createPool(input: {name: \"p9\", kind: KUBERNETES, capacityGpus: 99999999999999999999999, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"Int", "99999999999999999999999"}},
		{name: "an unknown enum value is named",
			body: `{"query": "mutation { createPool(input: {name: \"p4\", kind: MAINFRAME, capacityGpus: 4, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"MAINFRAME"}},
		{name: "a missing required argument is named",
			body: `{"query": "{ task { id } }"}`, want: []string{"id"}},
		{name: "an undeclared variable is named",
			body: `{"query": "{ task(id: $nope) { id } }"}`, want: []string{"nope"}},
		{name: "a body that is not JSON is refused",
			body: `{"query": `, want: []string{"json"}},
		{name: "a request without a query is refused",
			body: `{}`, want: []string{"operation"}},
		{name: "an unsupported content type is refused",
			body: `query { me { user { name } } }`, contentType: "text/plain", want: []string{"application/json"}},
		{name: "an unsupported method is refused",
			method: http.MethodPut, body: `{"query": "{ me { user { name } } }"}`, want: []string{"PUT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, ts.url+"/graphql", strings.NewReader(c.body))
			ct := c.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			req.Header.Set("Authorization", "Bearer "+adminKey)
			res := ts.doGQL(t, req)
			if res.Status >= 500 {
				t.Errorf("status %d, want < 500", res.Status)
			}
			if len(res.Errors) == 0 {
				t.Fatalf("no errors: %s", res.Raw)
			}
			if res.code() == "" {
				t.Errorf("the error has no extensions.code: %s", res.Raw)
			}
			if res.code() == "INTERNAL" {
				t.Errorf("malformed input is reported as INTERNAL: %s", res.Raw)
			}
			// The problem is named in the message or, for variables, in
			// the error's path.
			said := strings.ToLower(res.message() + " " + fmt.Sprint(res.Errors[0].Path))
			for _, w := range c.want {
				if !strings.Contains(said, strings.ToLower(w)) {
					t.Errorf("message %q (path %v) does not name %q", res.message(), res.Errors[0].Path, w)
				}
			}
			noStackTrace(t, res.Raw)
			if d := path(res.Data, "createPool"); d != nil {
				t.Errorf("a pool was created: %v", d)
			}
		})
	}
	t.Run("a mutation sent with GET is refused and does not run", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/graphql?query="+url.QueryEscape(`mutation { createProject(input: {name: "via-get"}) { project { id } } }`), nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		res := ts.doGQL(t, req)
		// gqlgen's GET transport answers this itself, without a code.
		if res.Status != http.StatusNotAcceptable || !strings.Contains(res.message(), "only allow query") {
			t.Errorf("GET mutation = %d %s, want 406 saying GET allows only queries", res.Status, res.Raw)
		}
		if contains(projectNames(t, ts), "via-get") {
			t.Errorf("a mutation sent with GET created a project")
		}
	})
	t.Run("a query sent with GET works", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/graphql?query="+url.QueryEscape(meQuery), nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if res := ts.doGQL(t, req); len(res.Errors) > 0 || str(res.Data, "me", "user", "name") != "admin" {
			t.Errorf("GET query = %d %s", res.Status, res.Raw)
		}
	})
	t.Run("none of them is logged as a server error", func(t *testing.T) {
		noErrorLogs(t, ts)
	})
	t.Run("no pool was created by any of them", func(t *testing.T) {
		d := ts.mustGQL(t, adminKey, `{ pools { edges { node { name } } } }`, nil)
		if got := nodeValues(d, "name", "pools"); len(got) != 1 || got[0] != "lab" {
			t.Errorf("pools = %v, want only lab", got)
		}
	})
}

func TestComplexityLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	// Pools and profiles refer to each other, so a query can nest without
	// end; 300 levels of eight fields each is far over the limit and within
	// the parser's nesting depth.
	var q strings.Builder
	q.WriteString("{ profiles { edges { node {")
	const depth = 300
	for i := 0; i < depth; i++ {
		q.WriteString(" pools { id name capacityGpus executionPriority { id name timeWeight")
	}
	q.WriteString(strings.Repeat(" } }", depth))
	q.WriteString(" } } } }")
	res := ts.gql(t, gqlRequest{Credential: adminKey, Query: q.String()})
	if len(res.Errors) == 0 {
		t.Fatalf("an absurdly nested query was answered: %.300s", res.Raw)
	}
	// Every field counts at least 1 towards the complexity, so a query over
	// the complexity limit is over the selection limit of DocumentLimits
	// (1000) first, which refuses it before validation.
	if res.code() != "QUERY_TOO_LARGE" {
		t.Errorf("code = %v, want QUERY_TOO_LARGE: %.500s", res.codes(), res.Raw)
	}
	if !strings.Contains(res.message(), "selections once its fragments are expanded; the limit is 1000") {
		t.Errorf("message %q does not give the limit", res.message())
	}
	if res.Status >= 500 {
		t.Errorf("status = %d, want < 500", res.Status)
	}
	if res.Data != nil {
		t.Errorf("data = %v, want none: the operation must not run", res.Data)
	}
}

func TestEstateProblems(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	apply := func(doc string) *gqlResult {
		return ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`,
			Vars: map[string]any{"doc": doc}})
	}

	t.Run("two mistakes are both listed in extensions.problems and nothing is written", func(t *testing.T) {
		res := apply(`apiVersion: klique/v1
kind: Estate
gpuClasses:
  - name: l4
    memoryGb: 24
pools:
  - name: lab
    kind: bare_metal
    capacity: 4
    gpuClass: no-such-class
profiles:
  - name: one
    size: 1
    pools: [no-such-pool]
`)
		if res.code() != "BAD_USER_INPUT" {
			t.Fatalf("code = %v, want BAD_USER_INPUT: %s", res.codes(), res.Raw)
		}
		raw, _ := res.Errors[0].Extensions["problems"].([]any)
		var problems []string
		for _, p := range raw {
			s, _ := p.(string)
			problems = append(problems, s)
		}
		if len(problems) != 2 {
			t.Fatalf("problems = %q, want the two mistakes", problems)
		}
		joined := strings.Join(problems, "\n")
		for _, w := range []string{"no-such-class", "no-such-pool"} {
			if !strings.Contains(joined, w) {
				t.Errorf("problems %q do not name %s", problems, w)
			}
		}
		d := ts.mustGQL(t, adminKey, `{ gpuClasses { edges { node { name } } } pools { edges { node { name } } } }`, nil)
		if n := len(nodes(d, "gpuClasses")) + len(nodes(d, "pools")); n != 0 {
			t.Errorf("a refused estate file wrote %d objects: %v", n, d)
		}
	})
	t.Run("one mistake is the message, without a problems list", func(t *testing.T) {
		res := apply("apiVersion: klique/v1\nkind: Estate\npools:\n  - name: lab\n    kind: bare_metal\n    capacity: 4\n    gpuClass: nope\n")
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "nope") {
			t.Fatalf("answer = %s, want BAD_USER_INPUT naming nope", res.Raw)
		}
		if _, ok := res.Errors[0].Extensions["problems"]; ok {
			t.Errorf("a single problem comes with a problems list: %s", res.Raw)
		}
	})
	t.Run("a dry run reports what it would do, writes nothing and logs no error", func(t *testing.T) {
		ts.logs.errors()
		d := ts.mustGQL(t, adminKey, `mutation($doc: String!) { applyEstate(document: $doc, dryRun: true) { dryRun summary changes { action kind name } } }`,
			map[string]any{"doc": smallEstate})
		if path(d, "applyEstate", "dryRun") != true || !strings.Contains(str(d, "applyEstate", "summary"), "dry run") {
			t.Errorf("applyEstate = %v, want a dry run that says so", d)
		}
		if n := len(path(d, "applyEstate", "changes").([]any)); n != 7 {
			t.Errorf("the dry run lists %d changes, want the 7 objects of the file", n)
		}
		if got := projectNames(t, ts); len(got) != 0 {
			t.Errorf("a dry run wrote projects %v", got)
		}
		noErrorLogs(t, ts)
	})
	t.Run("an unknown field in the file is named with its line", func(t *testing.T) {
		res := apply("apiVersion: klique/v1\nkind: Estate\npools:\n  - name: lab\n    capacty: 4\n")
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "capacty") {
			t.Errorf("answer = %s, want BAD_USER_INPUT naming capacty", res.Raw)
		}
		noStackTrace(t, res.Raw)
	})
}

func TestPagination(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, smallEstate)

	t.Run("projects page through all seven exactly once", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { deleteProject(id: "proj") { id } }`, nil)
		for i := 1; i <= 7; i++ {
			ts.mustGQL(t, adminKey, `mutation($n: String) { createProject(input: {name: $n}) { project { id } } }`,
				map[string]any{"n": fmt.Sprintf("p%d", i)})
		}
		var got []string
		var sizes []int
		var after any
		for page := 0; ; page++ {
			if page > 5 {
				t.Fatalf("more than 5 pages of 3 for 7 projects: %v", got)
			}
			d := ts.mustGQL(t, adminKey, `query($after: String) { projects(first: 3, after: $after) { edges { cursor node { name } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			names := nodeValues(d, "name", "projects")
			got = append(got, names...)
			sizes = append(sizes, len(names))
			edges, _ := path(d, "projects", "edges").([]any)
			if len(edges) > 0 && str(edges[len(edges)-1], "cursor") != str(d, "projects", "pageInfo", "endCursor") {
				t.Errorf("endCursor is not the cursor of the last edge")
			}
			if path(d, "projects", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "projects", "pageInfo", "endCursor")
		}
		if strings.Join(got, ",") != "p1,p2,p3,p4,p5,p6,p7" {
			t.Errorf("pages gave %v, want p1..p7 once each in order", got)
		}
		if fmt.Sprint(sizes) != "[3 3 1]" {
			t.Errorf("page sizes = %v, want [3 3 1]", sizes)
		}
	})

	t.Run("tasks page newest first", func(t *testing.T) {
		for i := 1; i <= 5; i++ {
			ts.mustGQL(t, adminKey, `mutation($n: String!) { enqueueTask(input: {name: $n, computeResource: "1 GPU", project: "p1", command: ["true"]}) { id } }`,
				map[string]any{"n": fmt.Sprintf("t%d", i)})
		}
		var got []string
		var after any
		for page := 0; page < 5; page++ {
			d := ts.mustGQL(t, adminKey, `query($after: String) { tasks(first: 2, after: $after) { edges { node { name position } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			got = append(got, nodeValues(d, "name", "tasks")...)
			if path(d, "tasks", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "tasks", "pageInfo", "endCursor")
		}
		if strings.Join(got, ",") != "t5,t4,t3,t2,t1" {
			t.Errorf("pages gave %v, want t5,t4,t3,t2,t1", got)
		}
		d := ts.mustGQL(t, adminKey, `{ tasks(first: 5) { edges { node { name position } } } }`, nil)
		for _, n := range nodes(d, "tasks") {
			want := float64(n["name"].(string)[1] - '0')
			if n["position"] != want {
				t.Errorf("task %s is at position %v, want %v", n["name"], n["position"], want)
			}
		}
	})

	t.Run("API keys page newest first, each once", func(t *testing.T) {
		var made []string
		for i := 0; i < 4; i++ {
			_, id := newKey(t, ts, "admin")
			made = append(made, id)
		}
		var got []string
		var after any
		for page := 0; page < 6; page++ {
			d := ts.mustGQL(t, adminKey, `query($after: String) { apiKeys(first: 2, after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			got = append(got, nodeValues(d, "id", "apiKeys")...)
			if path(d, "apiKeys", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "apiKeys", "pageInfo", "endCursor")
		}
		if len(got) != 5 {
			t.Fatalf("pages gave %d keys, want 5 (bootstrap and 4 new): %v", len(got), got)
		}
		for i, id := range made {
			if got[3-i] != id {
				t.Errorf("key %d of the newest-first list is %s, want %s", 3-i, got[3-i], id)
			}
		}
	})

	t.Run("users page by name", func(t *testing.T) {
		for _, n := range []string{"uma", "ulf", "ute"} {
			ts.mustGQL(t, adminKey, `mutation($n: String!) { createUser(input: {name: $n}) { id } }`, map[string]any{"n": n})
		}
		var got []string
		var after any
		for page := 0; page < 5; page++ {
			d := ts.mustGQL(t, adminKey, `query($after: String) { users(first: 2, after: $after) { edges { node { name } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			got = append(got, nodeValues(d, "name", "users")...)
			if path(d, "users", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "users", "pageInfo", "endCursor")
		}
		if strings.Join(got, ",") != "admin,ulf,uma,ute" {
			t.Errorf("pages gave %v, want admin,ulf,uma,ute", got)
		}
	})

	for _, c := range []struct{ name, query string }{
		{"a cursor that is not base64 is BAD_USER_INPUT for projects", `{ projects(after: "not a cursor!") { edges { cursor } } }`},
		{"a cursor that is not a sequence number is BAD_USER_INPUT for tasks", `{ tasks(after: "Zm9v") { edges { cursor } } }`},
		{"a garbage cursor is BAD_USER_INPUT for the audit trail", `{ auditLog(after: "%%%") { edges { cursor } } }`},
		{"a negative page size is BAD_USER_INPUT", `{ projects(first: -1) { edges { cursor } } }`},
		{"a page size over 500 is BAD_USER_INPUT", `{ tasks(first: 501) { edges { cursor } } }`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := ts.gql(t, gqlRequest{Credential: adminKey, Query: c.query})
			if res.code() != "BAD_USER_INPUT" {
				t.Errorf("code = %v, want BAD_USER_INPUT: %s", res.codes(), res.Raw)
			}
			if res.Status >= 500 {
				t.Errorf("status %d", res.Status)
			}
		})
	}
}

func TestAuditChannel(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	channelOf := func(t *testing.T, project string) string {
		t.Helper()
		d := ts.mustGQL(t, adminKey, `{ auditLog(filter: {objectKind: "project"}) { edges { node { action objectName channel actor } } } }`, nil)
		for _, n := range nodes(d, "auditLog") {
			if n["objectName"] == project && n["action"] == "project.created" {
				if n["actor"] != "admin" {
					t.Errorf("actor = %v, want admin", n["actor"])
				}
				return str(n, "channel")
			}
		}
		t.Fatalf("no audit entry for the creation of %s: %v", project, d)
		return ""
	}

	t.Run("a GraphQL mutation is recorded with channel graphql", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { createProject(input: {name: "via-graphql"}) { project { id } } }`, nil)
		if got := channelOf(t, "via-graphql"); got != "graphql" {
			t.Errorf("channel = %q, want graphql", got)
		}
	})
	t.Run("a mutation sent with X-Klique-Client: cli is recorded with channel cli", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation { createProject(input: {name: "via-cli"}) { project { id } } }`,
			Headers: map[string]string{"X-Klique-Client": "cli"}})
		if len(res.Errors) > 0 {
			t.Fatalf("createProject: %s", res.Raw)
		}
		if got := channelOf(t, "via-cli"); got != "cli" {
			t.Errorf("channel = %q, want cli", got)
		}
	})
	t.Run("a plain request after a cli one is recorded with channel graphql again", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { createProject(input: {name: "after-cli"}) { project { id } } }`, nil)
		if got := channelOf(t, "after-cli"); got != "graphql" {
			t.Errorf("channel = %q, want graphql: the cli header of an earlier request must not stick", got)
		}
	})
	t.Run("another client name does not pick a channel", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation { createProject(input: {name: "via-other"}) { project { id } } }`,
			Headers: map[string]string{"X-Klique-Client": "engine"}})
		if len(res.Errors) > 0 {
			t.Fatalf("createProject: %s", res.Raw)
		}
		if got := channelOf(t, "via-other"); got != "graphql" {
			t.Errorf("channel = %q, want graphql: a header must not claim another channel", got)
		}
	})
}
