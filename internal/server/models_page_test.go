package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/store/pgtest"
)

// modelsCall makes one chat completion as key for project with content.
func modelsCall(t *testing.T, url, key, project, content string) (int, string) {
	t.Helper()
	return modelsCallBody(t, url, key, project, fmt.Sprintf(`{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":%q}]}`, content))
}

// modelsCallBody posts a chat completion request as key for project.
func modelsCallBody(t *testing.T, url, key, project, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Klique-Project", project)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

const trafficSubscription = `subscription { gatewayTraffic { at windowSeconds callsPerMinute tokensPerMinute aliases { alias callsPerMinute tokensPerMinute inputTokensPerMinute outputTokensPerMinute } } }`

// trafficOf reads an update's calls and tokens per minute, over all
// aliases and for alias chat.
func trafficOf(u *wsUpdate) (calls, tokens, chatCalls, chatTokens float64) {
	calls, _ = path(u.Data, "gatewayTraffic", "callsPerMinute").(float64)
	tokens, _ = path(u.Data, "gatewayTraffic", "tokensPerMinute").(float64)
	list, _ := path(u.Data, "gatewayTraffic", "aliases").([]any)
	for _, a := range list {
		m, _ := a.(map[string]any)
		if m["alias"] == "chat" {
			chatCalls, _ = m["callsPerMinute"].(float64)
			chatTokens, _ = m["tokensPerMinute"].(float64)
		}
	}
	return
}

// TestModelsPageReads reads what the dashboard's Models page shows of the
// gateway over GraphQL and its WebSocket, on SQLite and PostgreSQL:
// gatewayTraffic counts each call's tokens live, llmRefusals lists the
// calls a guardrail blocked with the reason, llmEndpointHealth shows the
// endpoint a call found dead set aside. A member sees only the calls of
// their group's projects, in the subscription and in the refusals; an
// admin sees all; the endpoints' health is for admins only.
func TestModelsPageReads(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		runModelsPageReads(t, startServer(t))
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		runModelsPageReads(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t))))
	})
}

func runModelsPageReads(t *testing.T, ts *testServer) {
	mdl, _, _ := holdingModel(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/v1"
	dead.Close() // nothing listens there: a call to it fails at once
	f := newFixture(t, ts)
	ts.mustGQL(t, f.admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`, map[string]any{"d": fmt.Sprintf(`apiVersion: klique/v1
kind: Estate
gateway:
  routes:
    - {name: local, endpoints: ["%s/v1", "%s"], timeout: 30s}
  models:
    - {name: llama, route: local, inputPrice: 0.20, outputPrice: 0.20}
  aliases:
    - name: chat
      rules:
        - {groups: [ml-research, vision], targets: [{model: llama}]}
      guardrails: {deny: ["(?i)forbidden"]}
`, mdl.URL, deadURL)})

	// Subscribed before any call: each sees the calls it may see come in.
	_, aliceCh := subscribeWS(t, ts, f.alice, trafficSubscription, nil)
	_, victorCh := subscribeWS(t, ts, f.victor, trafficSubscription, nil)
	_, adminCh := subscribeWS(t, ts, f.admin, trafficSubscription, nil)
	for who, ch := range map[string]<-chan wsEvent{"alice": aliceCh, "victor": victorCh, "admin": adminCh} {
		u := nextUpdate(t, ch, 10*time.Second)
		if calls, tokens, _, _ := trafficOf(u); calls != 0 || tokens != 0 || path(u.Data, "gatewayTraffic", "windowSeconds") != float64(60) {
			t.Fatalf("%s's first traffic update, before any call: %s", who, u.Raw)
		}
	}

	for _, c := range []struct{ key, project, content string }{
		{f.alice, "fraud-models", "hello"},
		{f.alice, "fraud-models", "something forbidden"},
		{f.victor, "vision-detect", "hello"},
		{f.victor, "vision-detect", "forbidden again"},
		{f.victor, "vision-detect", "hello once more"},
	} {
		want := 200
		if strings.Contains(c.content, "forbidden") {
			want = 400
		}
		if code, body := modelsCall(t, ts.url, c.key, c.project, c.content); code != want {
			t.Fatalf("call %q: HTTP %d %s, want %d", c.content, code, body, want)
		}
	}

	// Each answered call used 10 tokens; a blocked one none.
	for _, w := range []struct {
		who           string
		ch            <-chan wsEvent
		calls, tokens float64
	}{{"alice", aliceCh, 2, 10}, {"victor", victorCh, 3, 20}, {"admin", adminCh, 5, 30}} {
		u := waitUpdate(t, w.ch, 15*time.Second, w.who+"'s traffic", func(u *wsUpdate) bool {
			calls, _, _, _ := trafficOf(u)
			return calls >= w.calls
		})
		calls, tokens, chatCalls, chatTokens := trafficOf(u)
		if calls != w.calls || tokens != w.tokens || chatCalls != w.calls || chatTokens != w.tokens {
			t.Errorf("%s sees %v calls and %v tokens a minute (chat: %v, %v), want %v and %v: %s", w.who, calls, tokens, chatCalls, chatTokens, w.calls, w.tokens, u.Raw)
		}
	}
	// Later updates still hold alice to her group's calls.
	u := nextUpdate(t, aliceCh, 10*time.Second)
	if calls, tokens, _, _ := trafficOf(u); calls != 2 || tokens != 10 {
		t.Errorf("alice's next update: %s", u.Raw)
	}

	// Refusals: each member their group's, the admin all, newest first.
	const refusals = `query($since: Time, $limit: Int) { llmRefusals(since: $since, limit: $limit) { id at userName projectName groupName alias endpoint status outcome guardrail reason } }`
	read := func(cred string) []map[string]any {
		d := ts.mustGQL(t, cred, refusals, nil)
		return items(d, "llmRefusals")
	}
	alice := read(f.alice)
	if len(alice) != 1 || alice[0]["userName"] != "alice" || alice[0]["projectName"] != "fraud-models" || alice[0]["outcome"] != "blocked" ||
		alice[0]["status"] != float64(400) || alice[0]["alias"] != "chat" || !strings.Contains(str(alice[0], "reason"), "guardrail") {
		t.Errorf("alice's refusals: %v", alice)
	}
	victor := read(f.victor)
	if len(victor) != 1 || victor[0]["userName"] != "victor" || victor[0]["projectName"] != "vision-detect" {
		t.Errorf("victor's refusals: %v", victor)
	}
	admin := read(f.admin)
	if len(admin) != 2 || admin[0]["userName"] != "victor" || admin[1]["userName"] != "alice" {
		t.Errorf("the admin's refusals, newest first: %v", admin)
	}
	if d := ts.mustGQL(t, f.admin, refusals, map[string]any{"limit": 1}); len(items(d, "llmRefusals")) != 1 {
		t.Errorf("limit 1: %v", d)
	}
	if last, err := time.Parse(time.RFC3339Nano, str(admin[0], "at")); err != nil {
		t.Errorf("refusal time %v: %v", admin[0]["at"], err)
	} else if d := ts.mustGQL(t, f.admin, refusals, map[string]any{"since": last.Add(time.Millisecond).Format(time.RFC3339Nano)}); len(items(d, "llmRefusals")) != 0 {
		t.Errorf("since after the last refusal the admin sees %v", d)
	}
	for _, bad := range []map[string]any{{"limit": 0}, {"limit": 501}, {"since": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		{"since": time.Now().Add(-40 * 24 * time.Hour).UTC().Format(time.RFC3339)}} {
		res := ts.gql(t, gqlRequest{Credential: f.admin, Query: refusals, Vars: bad})
		if res.code() != "BAD_USER_INPUT" || res.message() == "" {
			t.Errorf("llmRefusals%v: %s", bad, res.Raw)
		}
	}

	// The dead endpoint took a call's first try at least once (the two
	// endpoints take answered calls in turn) and is set aside.
	const health = `{ llmEndpointHealth { route endpoint healthy setAsideUntil } }`
	d := ts.mustGQL(t, f.admin, health, nil)
	var list []map[string]any
	for _, e := range items(d, "llmEndpointHealth") {
		if e["route"] == "local" { // the example estate's route llama-70b was never called
			list = append(list, e)
		} else if e["healthy"] != true {
			t.Errorf("an endpoint no call went to is not healthy: %v", e)
		}
	}
	if len(list) != 2 || list[0]["endpoint"] != mdl.URL+"/v1" || list[0]["healthy"] != true || list[0]["setAsideUntil"] != nil ||
		list[1]["endpoint"] != deadURL || list[1]["healthy"] != false || list[1]["setAsideUntil"] == nil || list[1]["route"] != "local" {
		t.Errorf("endpoint health: %v", list)
	}
	if res := ts.gql(t, gqlRequest{Credential: f.alice, Query: health}); res.code() != "FORBIDDEN" {
		t.Errorf("alice reading endpoint health: %s", res.Raw)
	}
}

// items returns a list field's objects.
func items(v any, steps ...any) []map[string]any {
	list, _ := path(v, steps...).([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
