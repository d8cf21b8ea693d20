package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/redistest"
	"github.com/klique-ai/klique/internal/store/pgtest"
)

// holdingModel answers chat completions with 10 tokens of usage; a call
// whose prompt says "hold" is held (arrived is told) until release closes,
// so that its reservation is in flight while the test looks.
func holdingModel(t *testing.T) (srv *httptest.Server, arrived chan struct{}, release chan struct{}) {
	arrived, release = make(chan struct{}, 1), make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "hold") {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, arrived, release
}

const budgetViewQuery = `query($p: ID) { tokenBudgetView(project: $p) { projectName userName period money limit used reserved left burnRate runsOutAt resetsAt } }`

// budgetRows reads tokenBudgetView as cred, by "project/user" ("project/"
// for the project's whole budget).
func budgetRows(t *testing.T, ts *testServer, cred, project string) map[string]map[string]any {
	t.Helper()
	var p any
	if project != "" {
		p = project
	}
	d := ts.mustGQL(t, cred, budgetViewQuery, map[string]any{"p": p})
	out := map[string]map[string]any{}
	list, _ := path(d, "tokenBudgetView").([]any)
	for _, item := range list {
		m, _ := item.(map[string]any)
		user, _ := m["userName"].(string)
		out[str(m, "projectName")+"/"+user] = m
	}
	return out
}

func num(m map[string]any, k string) float64 {
	f, _ := m[k].(float64)
	return f
}

// waitBudget reads alice's budgets until ok holds of them (settling and
// the ledger's writes happen just after the answer), failing after 15 s.
func waitBudget(t *testing.T, ts *testServer, cred, what string, ok func(rows map[string]map[string]any) bool) map[string]map[string]any {
	t.Helper()
	var rows map[string]map[string]any
	if !eventually.Poll(15*time.Second, func() bool { rows = budgetRows(t, ts, cred, ""); return ok(rows) }) {
		t.Fatalf("%s: budgets %v", what, rows)
	}
	return rows
}

func budgetCall(t *testing.T, url, key, content string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":%q}]}`, content)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Klique-Project", "fraud-models")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestTokenBudgetsOverGraphQL reads a project's token budget and a user's
// part of it over GraphQL as the gateway enforces them: a call recorded
// moves used, a call in flight shows under reserved, left is the limit
// less both; a member sees their own projects and part, an admin all;
// budgetBurn carries them. On SQLite with the in-process limiter, on
// PostgreSQL with it, and on PostgreSQL with the limiter in Redis.
func TestTokenBudgetsOverGraphQL(t *testing.T) {
	t.Parallel()
	t.Run("SQLite, in-process limiter", func(t *testing.T) {
		t.Parallel()
		runTokenBudgets(t, startServer(t))
	})
	t.Run("PostgreSQL, in-process limiter", func(t *testing.T) {
		t.Parallel()
		runTokenBudgets(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t))))
	})
	t.Run("PostgreSQL, limiter in Redis", func(t *testing.T) {
		t.Parallel()
		runTokenBudgets(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t)), withRedis(redistest.RequireURL(t))))
	})
}

func runTokenBudgets(t *testing.T, ts *testServer) {
	mdl, arrived, release := holdingModel(t)
	f := newFixture(t, ts)
	ts.mustGQL(t, f.admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`, map[string]any{"d": fmt.Sprintf(`apiVersion: klique/v1
kind: Estate
gateway:
  routes:
    - {name: local, endpoints: ["%s/v1"], timeout: 30s}
  models:
    - {name: llama, route: local, inputPrice: 0.20, outputPrice: 0.20}
  aliases:
    - name: chat
      rules:
        - {groups: [ml-research], targets: [{model: llama}]}
  budgets:
    - {project: fraud-models, period: month, tokens: 1000000, perUserTokens: 50000}
`, mdl.URL)})

	rows := budgetRows(t, ts, f.alice, "")
	whole, mine := rows["fraud-models/"], rows["fraud-models/alice"]
	if len(rows) != 2 || whole == nil || mine == nil || num(whole, "limit") != 1_000_000 || num(mine, "limit") != 50_000 ||
		num(whole, "used") != 0 || num(whole, "reserved") != 0 || num(whole, "left") != 1_000_000 || whole["money"] != false || str(whole, "period") != "MONTH" {
		t.Fatalf("alice's budgets before any call: %v", rows)
	}

	if code, body := budgetCall(t, ts.url, f.alice, "hello"); code != 200 {
		t.Fatalf("call: %d %s", code, body)
	}
	rows = waitBudget(t, ts, f.alice, "a call recorded moves used", func(r map[string]map[string]any) bool {
		return num(r["fraud-models/"], "used") == 10 && num(r["fraud-models/alice"], "used") == 10
	})
	if w := rows["fraud-models/"]; num(w, "reserved") != 0 || num(w, "left") != 1_000_000-10 || num(w, "burnRate") <= 0 || w["runsOutAt"] != nil {
		t.Errorf("after one call: %v", w)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		if code, body := budgetCall(t, ts.url, f.alice, "hold"); code != 200 {
			t.Errorf("held call: %d %s", code, body)
		}
	}()
	select {
	case <-arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the held call never reached the model")
	}
	rows = budgetRows(t, ts, f.alice, "fraud-models")
	for _, k := range []string{"fraud-models/", "fraud-models/alice"} {
		r := rows[k]
		// The reservation: the prompt's bound plus max_tokens.
		if res := num(r, "reserved"); res < 100 || num(r, "used") != 10 || num(r, "left") != num(r, "limit")-10-res {
			t.Errorf("%s while a call is in flight: %v", k, r)
		}
	}
	close(release)
	<-done
	waitBudget(t, ts, f.alice, "the held call settled", func(r map[string]map[string]any) bool {
		return num(r["fraud-models/"], "used") == 20 && num(r["fraud-models/"], "reserved") == 0 && num(r["fraud-models/"], "left") == 1_000_000-20
	})

	// The admin sees the project and every user who spent; victor, in
	// another group, sees none of it.
	if rows := budgetRows(t, ts, f.admin, ""); len(rows) != 2 || num(rows["fraud-models/alice"], "used") != 20 {
		t.Errorf("the admin's budgets: %v", rows)
	}
	if rows := budgetRows(t, ts, f.victor, ""); len(rows) != 0 {
		t.Errorf("victor sees %v", rows)
	}
	if res := ts.gql(t, gqlRequest{Credential: f.victor, Query: budgetViewQuery, Vars: map[string]any{"p": "fraud-models"}}); res.code() != "NOT_FOUND" {
		t.Errorf("victor asking for fraud-models: %s", res.Raw)
	}

	// budgetBurn carries the group's token budgets beside its time budget.
	_, ch := subscribeWS(t, ts, f.alice, `subscription($p: ID!) { budgetBurn(policy: $p) { kind tokenBudgets { projectName userName used left } } }`,
		map[string]any{"p": "ml-research"})
	u := nextUpdate(t, ch, 10*time.Second)
	list, _ := path(u.Data, "budgetBurn", "tokenBudgets").([]any)
	if len(list) != 2 || str(list[0], "projectName") != "fraud-models" || num(list[0].(map[string]any), "used") != 20 {
		t.Errorf("budgetBurn's token budgets: %s", u.Raw)
	}
}
