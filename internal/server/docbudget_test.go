package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
)

// The alias bombs of issue 39 sent over GraphQL on loopback: a member's
// runPipeline with a definition of about 560 bytes nesting anchors 8
// levels deep, 10 aliases a level (it ran the server out of memory), and
// a tenant admin's applyEstate with the same anchors in an app's launch
// form. Each is refused by its document budget at once, with a message
// that names the limit, and nothing is written.
func TestAliasBombsAreRefusedOverGraphQL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	state := func() string {
		b := ts.mustGQL(t, f.admin, `{ pipelineRuns { id } apps { name } }`, nil)
		return f.snapshot(t) + strings.Join(listValues(b, "id", "pipelineRuns"), ",") + strings.Join(listValues(b, "name", "apps"), ",")
	}
	before := state()

	cases := []struct {
		name, cred, query, doc string
		want                   []string
	}{
		{"a member's runPipeline", f.alice, `mutation($d: String!) { runPipeline(input: {definition: $d}) { id } }`, docbudgettest.Pipeline(8, 10),
			[]string{"pipeline definition: ", "aliases expanded; the limit is 1,000: use fewer anchors and aliases"}},
		{"an admin's applyEstate", f.admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`, docbudgettest.Estate(8, 10),
			[]string{"estate file: ", "aliases expanded; the limit is 10,000: use fewer anchors and aliases"}},
		{"an admin's dry run of applyEstate", f.admin, `mutation($d: String!) { applyEstate(document: $d, dryRun: true) { summary } }`, docbudgettest.Estate(8, 10),
			[]string{"estate file: ", "aliases expanded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused at once", func(t *testing.T) {
			start := time.Now()
			res := ts.gql(t, gqlRequest{Credential: tc.cred, Query: tc.query, Vars: map[string]any{"d": tc.doc}})
			// Without the budget the request runs for minutes and takes
			// gigabytes; the bound is generous for a loaded test machine.
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("the refusal took %v", took)
			}
			if res.code() != "BAD_USER_INPUT" {
				t.Fatalf("answer %s, want BAD_USER_INPUT", res.Raw)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.message(), w) {
					t.Fatalf("message %q lacks %q", res.message(), w)
				}
			}
		})
	}
	if after := state(); after != before {
		t.Fatalf("a refused document changed the tenant:\n%s", diffLines(before, after))
	}
}
