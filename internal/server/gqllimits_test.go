package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/klique-ai/klique/graph"
)

// fragmentBomb is the first attack of issue 16: about 1 kB of fragments
// that spread the one below twice, levels deep. Expanded, it has 2^levels
// spreads; gqlgen's complexity calculation walked every one (17 s of CPU at
// 30 levels).
func fragmentBomb(levels int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "query { ...F%d }\nfragment F0 on Query { __typename }\n", levels)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i-1, i-1)
	}
	return b.String()
}

// typenameFlood is the second attack: one field repeated n times, which
// gqlparser's overlapping-fields check compares pairwise (34 s at 20,000).
func typenameFlood(n int) string {
	return "{" + strings.Repeat(" __typename", n) + " }"
}

// aliases selects __typename n times, each under its own alias.
func aliases(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " a%d:__typename", i)
	}
	return b.String()
}

func TestDocumentLimits(t *testing.T) {
	l := DefaultDocumentLimits
	for _, c := range []struct {
		name, query string
		// want is what the refusal says, "" for a document that passes.
		want string
	}{
		{"a small query passes", `{ me { name } }`, ""},
		{"fragments used a few times pass", `query { ...A ...A } fragment A on Query { me { ...B } } fragment B on User { name id }`, ""},
		{"the fragment bomb is refused by its spreads", fragmentBomb(30),
			fmt.Sprintf("query has %d fragment spreads once its fragments are expanded; the limit is 500", 1<<31-1)},
		{"a fragment bomb too deep to count is refused", fragmentBomb(60),
			"query has more than 1099511627776 fragment spreads once its fragments are expanded; the limit is 500"},
		{"an unused fragment bomb is refused too", `{ __typename } ` + strings.SplitN(fragmentBomb(30), "\n", 2)[1], "fragment spreads once its fragments are expanded"},
		{"20,000 __typename are refused by size", typenameFlood(20_000), "query is 220003 bytes; the limit is 65536"},
		{"5,000 __typename under the byte limit are refused by selections", typenameFlood(5_000),
			"query has 5000 selections once its fragments are expanded; the limit is 1000"},
		{"selections hidden in fragments are counted", `query { ...A ...A ...A } fragment A on Query { ` + aliases(350) + `}`,
			"query has 1050 selections once its fragments are expanded; the limit is 1000"},
		{"one name selected 21 times is refused", typenameFlood(21),
			`query selects "__typename" 21 times in one selection set; the limit is 20`},
		{"one name selected 20 times passes", typenameFlood(20), ""},
		{"one name repeated through inline fragments and spreads is counted", `query { me { id ... on User { id ...U ...U } } } fragment U on User { id ... { id } }`,
			""},
		{"one name repeated through nested spreads is refused", `query { me { ...U ...U ...U } } fragment U on User { ...V ...V } fragment V on User { id id id id }`,
			`query selects "id" 24 times in one selection set; the limit is 20`},
		{"many distinct aliases pass", `{` + aliases(900) + `}`, ""},
		{"too many tokens are refused while parsing", "{" + strings.Repeat("a ", 16_000) + "}",
			"query has more than 15000 tokens; the limit is 15000"},
		{"a fragment cycle is refused", `query { ...A } fragment A on Query { ...B } fragment B on Query { ...A }`,
			"fragment A spreads itself (A → B → A)"},
		{"a fragment spreading itself is refused", `query { ...A } fragment A on Query { __typename ...A }`,
			"fragment A spreads itself (A → A)"},
		{"a syntax error is left to the parser", `{ me { `, ""},
		{"an unknown fragment is left to the validator", `{ ...Nope }`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := l.check(c.query)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("check = %v, want the document to pass", err)
			case c.want != "" && err == nil:
				t.Fatalf("check passed, want %q", c.want)
			case err != nil && !strings.Contains(err.Message, c.want):
				t.Fatalf("check = %q, want it to say %q", err.Message, c.want)
			case err != nil && err.Extensions["code"] != documentCode:
				t.Fatalf("code = %v, want %s", err.Extensions["code"], documentCode)
			}
		})
	}
}

// countingCounter counts Inc calls.
type countingCounter struct {
	prometheus.Counter
	n atomic.Int64
}

func (c *countingCounter) Inc() { c.n.Add(1) }

// An operation whose request has ended is dropped before the complexity
// limit, and a new document is not even checked.
func TestCancelledOperationsStopBeforeComplexity(t *testing.T) {
	es := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}})
	exec := executor.New(es)
	computed := &countingCounter{Counter: prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})}
	exec.Use(documentGuard{limits: DefaultDocumentLimits})
	exec.Use(stopWhenGone{})
	exec.Use(countedComplexity{ComplexityLimit: extension.FixedComplexityLimit(ComplexityLimit), computed: computed})

	ctx, cancel := context.WithCancel(graphql.StartOperationTrace(context.Background()))
	if _, errs := exec.CreateOperationContext(ctx, &graphql.RawParams{Query: `{ __typename }`}); len(errs) != 0 {
		t.Fatalf("a live request: %v", errs)
	}
	cancel()
	_, errs := exec.CreateOperationContext(ctx, &graphql.RawParams{Query: `{ __typename }`})
	if len(errs) != 1 || errs[0].Message != "request cancelled" || errs[0].Extensions["code"] != "CANCELLED" {
		t.Fatalf("a cancelled request: %v, want request cancelled", errs)
	}
	if n := computed.n.Load(); n != 1 {
		t.Fatalf("complexity computed %v times, want once (for the live request only)", n)
	}
	// Past the guard (as a cached document would be), stopWhenGone stops it.
	oc := &graphql.OperationContext{}
	if err := (stopWhenGone{}).MutateOperationContext(ctx, oc); err == nil || err.Message != "request cancelled" {
		t.Fatalf("stopWhenGone = %v, want request cancelled", err)
	}
}

// DashboardQueries lets the HTTP tests send the dashboard's queries.
var DashboardQueries = dashboardQueries

// dashboardQueries are the GraphQL documents of the web dashboard's pages,
// as the browser sends them.
func dashboardQueries(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "web", "static", "js", "*", "*.js"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("..", "..", "web", "static", "js", "*.js"))
	files = append(files, more...)
	tmpl := regexp.MustCompile("(?s)`\\s*((?:query|subscription|mutation)\\b[^`]*|\\{[^`]*)`")
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range tmpl.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "${") || !strings.Contains(m[1], "{") {
				continue
			}
			out[fmt.Sprintf("%s#%d", filepath.Base(f), i)] = m[1]
		}
	}
	if len(out) < 4 {
		t.Fatalf("found %d dashboard queries in web/static/js, want the pages' queries", len(out))
	}
	return out
}

// The dashboard's queries, the largest real documents, are far inside the
// limits: a quarter of each.
func TestDashboardQueriesPassTheDocumentLimits(t *testing.T) {
	quarter := DocumentLimits{
		MaxBytes: DefaultDocumentLimits.MaxBytes / 4, MaxTokens: DefaultDocumentLimits.MaxTokens / 4,
		MaxSelections: DefaultDocumentLimits.MaxSelections / 4, MaxSpreads: DefaultDocumentLimits.MaxSpreads / 4,
	}
	for name, q := range dashboardQueries(t) {
		if err := quarter.check(q); err != nil {
			t.Errorf("%s: %v\n%s", name, err, q)
		}
	}
}

// BenchmarkDocumentRefusal is what refusing each attack costs.
func BenchmarkDocumentRefusal(b *testing.B) {
	for _, c := range []struct{ name, query string }{
		{"fragment_bomb_30_levels", fragmentBomb(30)},
		{"typename_20000", typenameFlood(20_000)},
		{"typename_5000", typenameFlood(5_000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if DefaultDocumentLimits.check(c.query) == nil {
					b.Fatal("the attack passed")
				}
			}
		})
	}
}

// BenchmarkDocumentAtLimits is what gqlgen's parse, validation and
// complexity cost for the worst documents the limits let through: the
// bound on what one request can make the server spend before its resolvers.
func BenchmarkDocumentAtLimits(b *testing.B) {
	es := graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{}})
	exec := executor.New(es)
	exec.Use(extension.FixedComplexityLimit(ComplexityLimit))
	for _, c := range []struct{ name, query string }{
		{"typename_20", typenameFlood(20)},
		{"aliases_1000", "{" + aliases(1_000) + "}"},
		{"fragment_bomb_4_levels", fragmentBomb(4)},
	} {
		if err := DefaultDocumentLimits.check(c.query); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				ctx := graphql.StartOperationTrace(context.Background())
				exec.CreateOperationContext(ctx, &graphql.RawParams{Query: c.query})
			}
		})
	}
}
