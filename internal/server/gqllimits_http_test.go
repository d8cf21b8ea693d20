package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/server"
)

// fragmentBomb is issue 16's first attack: fragments that spread the one
// below twice, levels deep (17 s of complexity calculation at 30 levels).
func fragmentBomb(levels int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "query { ...F%d }\nfragment F0 on Query { __typename }\n", levels)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i-1, i-1)
	}
	return b.String()
}

// metric reads one unlabelled series (or the sum of a labelled one's
// series) from /metrics.
func metric(t *testing.T, ts *testServer, name string) float64 {
	t.Helper()
	resp, body := ts.get(t, "/metrics", metricsToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, body)
	}
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// The two attack documents of issue 16 are refused before gqlgen validates
// them or computes their complexity, without a credential, over POST, GET
// and a subscription's WebSocket, with an error that says which limit.
func TestGraphQLAttackDocumentsAreRefusedBeforeValidation(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, smallEstate)

	attacks := []struct{ name, query, want string }{
		{"fragment bomb", fragmentBomb(30), "query has 2147483647 fragment spreads once its fragments are expanded; the limit is 500"},
		{"20,000 __typename", "{" + strings.Repeat(" __typename", 20_000) + " }", "query is 220003 bytes; the limit is 65536"},
		{"5,000 __typename", "{" + strings.Repeat(" __typename", 5_000) + " }", "query has 5000 selections once its fragments are expanded; the limit is 1000"},
		{"a name repeated", "{" + strings.Repeat(" __typename", 100) + " }", `query selects "__typename" 100 times in one selection set; the limit is 20`},
	}
	validated, computed := metric(t, ts, "klique_graphql_documents_validated_total"), metric(t, ts, "klique_graphql_complexity_computed_total")
	check := func(t *testing.T, how string, status int, errs []gqlError, want string) {
		t.Helper()
		if status != http.StatusUnprocessableEntity || len(errs) != 1 || !strings.Contains(errs[0].Message, want) ||
			errs[0].Extensions["code"] != "QUERY_TOO_LARGE" {
			t.Errorf("%s answered %d %+v, want 422 QUERY_TOO_LARGE saying %q", how, status, errs, want)
		}
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			res := ts.gql(t, gqlRequest{Query: a.query})
			check(t, "POST without a credential", res.Status, res.Errors, a.want)
			res = ts.gql(t, gqlRequest{Credential: adminKey, Query: a.query})
			check(t, "POST as the platform admin", res.Status, res.Errors, a.want)
			if len(a.query) < 8<<10 { // a GET's URL is bounded anyway
				req, _ := http.NewRequest(http.MethodGet, ts.url+"/graphql?query="+url.QueryEscape(a.query), nil)
				res = ts.doGQL(t, req)
				check(t, "GET without a credential", res.Status, res.Errors, a.want)
			}
		})
	}

	t.Run("over a subscription's WebSocket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, proto := range []string{protoTransportWS, protoLegacyWS} {
			c, err := dialWS(ctx, ts.url, bearerInit(adminKey), wsDialOptions{proto: proto})
			if err != nil {
				t.Fatalf("%s: dial: %v", proto, err)
			}
			for _, a := range attacks {
				_, ch, err := c.subscribe(ctx, a.query, nil)
				if err != nil {
					t.Fatalf("%s: subscribe: %v", proto, err)
				}
				select {
				case ev := <-ch:
					if ev.Type != "error" || len(ev.Errors) == 0 || !strings.Contains(ev.Errors[0].Message, a.want) {
						t.Errorf("%s, %s: got %s %+v, want an error saying %q", proto, a.name, ev.Type, ev.Errors, a.want)
					}
				case <-ctx.Done():
					t.Fatalf("%s, %s: no answer", proto, a.name)
				}
			}
			c.close()
		}
	})

	if v := metric(t, ts, "klique_graphql_documents_validated_total"); v != validated {
		t.Errorf("%v documents validated while only attacks were sent, want none: the limits must refuse them before validation", v-validated)
	}
	if v := metric(t, ts, "klique_graphql_complexity_computed_total"); v != computed {
		t.Errorf("%v complexity calculations while only attacks were sent, want none", v-computed)
	}
	if v := metric(t, ts, "klique_graphql_documents_refused_total"); v < float64(len(attacks)*4) {
		t.Errorf("klique_graphql_documents_refused_total = %v, want at least %d", v, len(attacks)*4)
	}

	t.Run("the dashboard's queries pass", func(t *testing.T) {
		for name, q := range server.DashboardQueries(t) {
			res := ts.gql(t, gqlRequest{Credential: adminKey, Query: q, Vars: map[string]any{
				"id": "00000000-0000-0000-0000-000000000000", "ids": []any{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000001"}, "after": 0, "in": map[string]any{"from": "2026-11-01T00:00:00Z", "to": "2026-12-01T00:00:00Z"}}})
			for _, e := range res.Errors {
				if e.Extensions["code"] == "QUERY_TOO_LARGE" || e.Extensions["code"] == "GRAPHQL_VALIDATION_FAILED" || e.Extensions["code"] == "COMPLEXITY_LIMIT_EXCEEDED" {
					t.Errorf("%s: %s\n%s", name, e.Message, q)
				}
			}
		}
	})

	t.Run("a normal query still passes, and is validated once", func(t *testing.T) {
		q := `{ projects(first: 10) { edges { node { id name } } } }`
		before := metric(t, ts, "klique_graphql_documents_validated_total")
		ts.mustGQL(t, adminKey, q, nil)
		ts.mustGQL(t, adminKey, q, nil)
		if v := metric(t, ts, "klique_graphql_documents_validated_total"); v != before+1 {
			t.Errorf("validated %v times, want once (the second time from the cache)", v-before)
		}
	})
}
