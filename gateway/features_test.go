package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway"
	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/redistest"
)

// TestARouteBalancesAcrossItsHealthyEndpoints pins the static route's
// balancer (balance.go, attempts in serve.go): calls spread evenly over
// the healthy endpoints of a route, though the alias's fallback stands on
// the same route; an endpoint answering 5xx is set aside (tried again
// only after its rest) while the others answer every call; an endpoint
// nothing listens on costs the caller nothing either. The ledger's Target
// names the endpoint that answered, so spend can be traced to a server.
func TestARouteBalancesAcrossItsHealthyEndpoints(t *testing.T) {
	ups := []*upstream{newUpstream(t), newUpstream(t), newUpstream(t)}
	urls := make([]string, len(ups))
	for i, u := range ups {
		urls[i] = u.URL + "/v1"
	}
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Routes[0].Endpoints = urls
	})
	call := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			// vic's "chat" is llama, on the route.
			r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":5`))
			if r.status != 200 || r.json("model").Str != "meta/llama" || r.json("choices.0.message.content").Str != "hello from meta/llama" {
				t.Fatalf("call %d: %d %s", i, r.status, r.body)
			}
		}
	}
	// All healthy: 60 calls, each endpoint answers a fair share.
	call(60)
	first := make([]int, len(ups))
	for i, u := range ups {
		first[i] = len(u.calls())
		if first[i] < 17 || first[i] > 23 {
			t.Fatalf("endpoint %d answered %d of 60 calls; want a share of about 20 each: %v", i, first[i], first)
		}
	}
	if first[0]+first[1]+first[2] != 60 {
		t.Fatalf("the endpoints saw %v calls, want 60 in all (one each)", first)
	}

	// The first endpoint answers 500: every call still succeeds, on the
	// other two, and the failing one is set aside rather than tried first
	// on a third of the calls.
	ups[0].set("meta/llama", behaviour{status: 500})
	ups[0].set("backup-model", behaviour{status: 500})
	call(30)
	if n := len(ups[0].calls()) - first[0]; n < 1 || n > 2 {
		t.Fatalf("the failing endpoint was tried %d times in 30 calls; want once (then set aside)", n)
	}
	// The two healthy ones share the calls evenly (not two to one, as a
	// turn taken over all three would give them).
	for i := 1; i < 3; i++ {
		if n := len(ups[i].calls()) - first[i]; n < 12 || n > 18 {
			t.Fatalf("healthy endpoint %d answered %d of 30 calls while another was failing; want about 15", i, n)
		}
	}
	calls := e.ledger(90)
	if len(calls) != 90 {
		t.Fatalf("%d calls on the ledger, want 90", len(calls))
	}
	byTarget := map[string]int{}
	for _, c := range calls {
		if c.Outcome != model.CallOK || c.Status != 200 || c.Model != "llama" {
			t.Fatalf("a call on the ledger: %s", dump(c))
		}
		byTarget[c.Target]++
	}
	// Each endpoint is charged for the calls it answered: the first only
	// for those before it failed, the others for everything they saw.
	want := map[string]int{"local " + urls[0]: first[0], "local " + urls[1]: len(ups[1].calls()), "local " + urls[2]: len(ups[2].calls())}
	if fmt.Sprint(byTarget) != fmt.Sprint(want) {
		t.Fatalf("ledger targets %v, want %v (the endpoint that answered)", byTarget, want)
	}

	// An endpoint nothing listens on (a server that went away): calls go
	// to the others and succeed, and it is never the Target.
	dead := closedURL(t)
	live := []*upstream{newUpstream(t), newUpstream(t)}
	e2 := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Routes[0].Endpoints = []string{dead, live[0].URL + "/v1", live[1].URL + "/v1"}
	})
	for i := 0; i < 30; i++ {
		r := e2.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":5`))
		if r.status != 200 || r.json("model").Str != "meta/llama" {
			t.Fatalf("call %d with an endpoint down: %d %s", i, r.status, r.body)
		}
	}
	byTarget = map[string]int{}
	for _, c := range e2.ledger(30) {
		byTarget[c.Target]++
	}
	if byTarget["local "+dead] != 0 || byTarget["local "+live[0].URL+"/v1"] < 12 || byTarget["local "+live[1].URL+"/v1"] < 12 ||
		byTarget["local "+live[0].URL+"/v1"]+byTarget["local "+live[1].URL+"/v1"] != 30 {
		t.Fatalf("ledger targets %v: want the 30 calls on the two live endpoints", byTarget)
	}
}

// A route of two endpoints, both healthy, behind an alias whose fallback
// is on the same route: they take the calls in turn.
func TestTheTwoEndpointsOfARouteTakeCallsInTurn(t *testing.T) {
	pair := []*upstream{newUpstream(t), newUpstream(t)}
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Routes[0].Endpoints = []string{pair[0].URL + "/v1", pair[1].URL + "/v1"}
	})
	for i := 0; i < 20; i++ {
		if r := e.post("vic", "detect", "chat/completions", chat("chat", "")); r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	if a, b := len(pair[0].calls()), len(pair[1].calls()); a != 10 || b != 10 {
		t.Fatalf("the endpoints answered %d and %d of 20 calls, want 10 each", a, b)
	}
}

// closedURL is the base URL of a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	must(t, ln.Close())
	return "http://" + addr + "/v1"
}

// TestAliasTargetWeightsSplitTheCalls pins weighted targets
// (platform.upstreamOrder): a rule's first model is drawn by weight for
// every call, so 3:1 sends about three quarters of the calls to the first
// target, and a target of weight 0 (which validation allows beside a
// positive one) gets none. The bounds are six standard deviations wide
// (400 calls at 3/4: 300 ± 8.7), so the test cannot flake while a split
// that ignored the weights (200) or always took the first target (400)
// fails.
func TestAliasTargetWeightsSplitTheCalls(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Models = append(g.Models,
			&model.LLMModel{Name: "heavy", Route: "local", Upstream: "heavy-model", Currency: "USD", MaxOutputTokens: 100},
			&model.LLMModel{Name: "light", Route: "local", Upstream: "light-model", Currency: "USD", MaxOutputTokens: 100})
		g.Aliases = append(g.Aliases,
			&model.Alias{Name: "split", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "heavy", Weight: 3}, {Model: "light", Weight: 1}}}}},
			&model.Alias{Name: "pinned", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "heavy", Weight: 0}, {Model: "light", Weight: 1}}}}})
	})
	count := func(alias string, n int) map[string]int {
		t.Helper()
		before := len(e.up.calls())
		for i := 0; i < n; i++ {
			if r := e.post("vic", "detect", "chat/completions", chat(alias, `,"max_tokens":5`)); r.status != 200 {
				t.Fatalf("%s call %d: %d %s", alias, i, r.status, r.body)
			}
		}
		got := map[string]int{}
		for _, c := range e.up.calls()[before:] {
			got[c.Model]++
		}
		return got
	}
	split := count("split", 400)
	if split["heavy-model"]+split["light-model"] != 400 || split["heavy-model"] < 240 || split["heavy-model"] > 360 {
		t.Fatalf("a 3:1 rule sent %v of 400 calls; want about 300 to heavy-model and the rest to light-model", split)
	}
	pinned := count("pinned", 100)
	if pinned["light-model"] != 100 {
		t.Fatalf("a rule with a target of weight 0 sent %v of 100 calls; want all to light-model", pinned)
	}
	// The ledger agrees on which model answered.
	models := map[string]int{}
	for _, c := range e.ledger(500) {
		models[c.Alias+" "+c.Model]++
	}
	if models["split heavy"] != split["heavy-model"] || models["split light"] != split["light-model"] || models["pinned light"] != 100 || models["pinned heavy"] != 0 {
		t.Fatalf("ledger %v, upstream %v and %v", models, split, pinned)
	}
}

// TestAProjectScopedKeyNeedsNoHeader pins project-scoped credentials at the
// gateway (platform.gatewayProject): an API key scoped to a project, and
// an access token issued from it, call without X-Klique-Project and are
// charged to that project; a header naming their own project (by name or
// id) is accepted, one naming another project is refused with a 403 that
// says which project the credential is scoped to, before anything goes
// upstream. An unscoped access token works at the gateway like an
// unscoped key: it must say the project.
func TestAProjectScopedKeyNeedsNoHeader(t *testing.T) {
	e := newEnv(t, standard)
	_, secret, err := e.svc.CreateAPIKey(e.admin, platform.APIKeyInput{Name: "fraud-key", User: "alice", Project: "fraud"})
	must(t, err)
	e.keys["alice@fraud"] = secret
	scopedToken, _, err := e.svc.IssueToken(e.signIn(secret))
	must(t, err)
	e.keys["alice@fraud token"] = scopedToken
	token, _, err := e.svc.IssueToken(e.signIn(e.keys["alice"]))
	must(t, err)
	e.keys["alice token"] = token

	ids := map[string]string{} // call id → what it was
	ok := func(what, cred, project string) {
		t.Helper()
		r := e.post(cred, project, "chat/completions", chat("chat", ""))
		// alice is in ml: her "chat" is the frontier model.
		if r.status != 200 || r.json("model").Str != "gpt-x" {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		ids[r.header.Get("X-Klique-Call-Id")] = what
	}
	refused := func(what, cred, project string, status int, typ string, words ...string) {
		t.Helper()
		r := e.post(cred, project, "chat/completions", chat("chat", ""))
		msg := r.json("error.message").Str
		if r.status != status || r.json("error.type").Str != typ {
			t.Fatalf("%s: %d %s; want %d %s", what, r.status, r.body, status, typ)
		}
		for _, w := range words {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: message %q does not say %q", what, msg, w)
			}
		}
	}

	ok("scoped key, no header", "alice@fraud", "")
	ok("scoped key, its project by name", "alice@fraud", "fraud")
	refused("scoped key, another project", "alice@fraud", "detect", 403, "permission_error", "scoped to project fraud", "'detect'")
	refused("scoped key, a project that does not exist", "alice@fraud", "nope", 403, "permission_error", "scoped to project fraud", "'nope'")
	ok("scoped token, no header", "alice@fraud token", "")
	refused("scoped token, another project", "alice@fraud token", "detect", 403, "permission_error", "scoped to project fraud")
	refused("unscoped token, no header", "alice token", "", 400, "invalid_request_error", "X-Klique-Project")
	ok("unscoped token, with header", "alice token", "fraud")

	calls := e.ledger(4)
	if len(calls) != 4 {
		t.Fatalf("%d calls on the ledger, want the 4 answered (refusals are not the ledger's): %s", len(calls), dump(calls))
	}
	fraudID := calls[0].ProjectID
	ok("scoped key, its project by id", "alice@fraud", fraudID)
	calls = e.ledger(5)
	for _, c := range calls {
		what, known := ids[c.ID]
		if !known || c.UserName != "alice" || c.ProjectName != "fraud" || c.ProjectID != fraudID || c.GroupName != "ml" ||
			c.Alias != "chat" || c.Model != "frontier" || c.Outcome != model.CallOK {
			t.Fatalf("%q on the ledger: %s; want alice's call charged to fraud", what, dump(c))
		}
	}
	if n := len(e.up.calls()); n != 5 {
		t.Fatalf("the upstream saw %d calls, want the 5 answered", n)
	}
}

// recorder is a model server that keeps each request's path and body as
// they arrived, and answers as answer says.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	got    []recorded
	answer func(w http.ResponseWriter, path string, body []byte)
}

type recorded struct{ path, body string }

func newRecorder(t *testing.T, answer func(w http.ResponseWriter, path string, body []byte)) *recorder {
	r := &recorder{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, recorded{req.URL.Path, string(body)})
		r.mu.Unlock()
		r.answer(w, req.URL.Path, body)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.got...)
}

// What the recorder answers: a legacy completion, a chat answer that
// calls a tool, and the same as a stream (its usage chunk last).
const (
	completionAnswer = `{"id":"cmpl-7","object":"text_completion","created":1,"model":"tool-model","choices":[{"text":" upon a time","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}}`
	toolAnswer       = `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"tool-model","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"celsius\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":57,"completion_tokens":18,"total_tokens":75}}`
	toolChunks       = `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n"
	usageChunk = `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[],"usage":{"prompt_tokens":61,"completion_tokens":9,"total_tokens":70}}` + "\n\n"
)

// TestCompletionsAndToolsPassThrough pins the pass-through promise of
// gateway/wire: the gateway swaps the model name (and, for a stream, asks
// for usage) and changes nothing else of a request, so tools, tool_choice
// and a conversation with tool results reach the model as the caller
// wrote them; the model's answer, a tool call included, reaches the
// caller byte for byte (a stream less the usage chunk it did not ask
// for). POST /v1/completions works end to end: sent to the upstream's
// /completions, answered unchanged, on the ledger as endpoint
// "completions" with the upstream's usage and its cost.
func TestCompletionsAndToolsPassThrough(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, path string, body []byte) {
		switch {
		case path == "/v1/completions":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, completionAnswer)
		case path == "/v1/chat/completions" && gjson.GetBytes(body, "stream").Bool():
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, toolChunks+usageChunk+"data: [DONE]\n\n")
		case path == "/v1/chat/completions":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, toolAnswer)
		default:
			http.NotFound(w, nil)
		}
	})
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Routes = append(g.Routes, &model.Route{Name: "raw", Endpoints: []string{rec.URL + "/v1"}, Timeout: 2 * time.Second})
		g.Models = append(g.Models, &model.LLMModel{Name: "toolsmith", Route: "raw", Upstream: "tool-model",
			InputPriceMicros: 1_000_000, OutputPriceMicros: 2_000_000, Currency: "USD", MaxOutputTokens: 1000})
		g.Aliases = append(g.Aliases, &model.Alias{Name: "tools", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "toolsmith", Weight: 1}}}}})
	})
	swapped := func(body string) string { return strings.Replace(body, `"model":"tools"`, `"model":"tool-model"`, 1) }

	// A legacy completion.
	completion := `{"model":"tools","prompt":"Once","max_tokens":4,"temperature":0,"logprobs":null,"echo":false}`
	c := e.post("vic", "detect", "completions", completion)
	if c.status != 200 || c.body != completionAnswer || !strings.HasPrefix(c.header.Get("Content-Type"), "application/json") {
		t.Fatalf("completions: %d %s", c.status, c.body)
	}

	// A chat call that offers a tool and forces it.
	tools := `[{"type":"function","function":{"name":"get_weather","description":"Current weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false},"strict":true}}]`
	toolChoice := `{"type":"function","function":{"name":"get_weather"}}`
	ask := `{"model":"tools","messages":[{"role":"system","content":"You call tools."},{"role":"user","content":"Weather in Paris?"}],` +
		`"tools":` + tools + `,"tool_choice":` + toolChoice + `,"parallel_tool_calls":false,"max_tokens":64}`
	r := e.post("vic", "detect", "chat/completions", ask)
	if r.status != 200 || r.body != toolAnswer {
		t.Fatalf("a tool call: %d %s\nwant the upstream's answer unchanged: %s", r.status, r.body, toolAnswer)
	}

	// The next turn, streamed: the tool's result goes back, and the
	// model's tool-call chunks come back as they were sent.
	history := `[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_abc","content":"{\"temp\":21}"}]`
	streamed := `{"model":"tools","messages":` + history + `,"tools":` + tools + `,"tool_choice":"required","stream":true}`
	s := e.post("vic", "detect", "chat/completions", streamed)
	if s.status != 200 || s.header.Get("Content-Type") != "text/event-stream" || s.body != toolChunks+"data: [DONE]\n\n" {
		t.Fatalf("a streamed tool call: %d %q\nwant %q", s.status, s.body, toolChunks+"data: [DONE]\n\n")
	}

	got := rec.requests()
	if len(got) != 3 {
		t.Fatalf("the upstream saw %d requests, want 3", len(got))
	}
	if got[0].path != "/v1/completions" || got[0].body != swapped(completion) {
		t.Fatalf("the completion reached the upstream as %s %s\nwant %s", got[0].path, got[0].body, swapped(completion))
	}
	if got[1].path != "/v1/chat/completions" || got[1].body != swapped(ask) {
		t.Fatalf("the tool call reached the upstream as %s\nwant %s", got[1].body, swapped(ask))
	}
	up := gjson.Parse(got[2].body)
	if got[2].path != "/v1/chat/completions" || up.Get("model").Str != "tool-model" || up.Get("messages").Raw != history ||
		up.Get("tools").Raw != tools || up.Get("tool_choice").Raw != `"required"` || !up.Get("stream_options.include_usage").Bool() {
		t.Fatalf("the streamed call reached the upstream as %s", got[2].body)
	}

	// On the ledger: each with the upstream's usage, priced at 1 and 2
	// per million tokens.
	byID := map[string]*model.ModelCall{}
	for _, call := range e.ledger(3) {
		byID[call.ID] = call
	}
	for _, w := range []struct {
		id, endpoint string
		stream       bool
		in, out      int64
	}{
		{c.header.Get("X-Klique-Call-Id"), "completions", false, 11, 4},
		{r.header.Get("X-Klique-Call-Id"), "chat/completions", false, 57, 18},
		{s.header.Get("X-Klique-Call-Id"), "chat/completions", true, 61, 9},
	} {
		call := byID[w.id]
		if call == nil || call.Endpoint != w.endpoint || call.Stream != w.stream || call.Alias != "tools" || call.Model != "toolsmith" ||
			call.Target != "raw "+rec.URL+"/v1" || call.InputTokens != w.in || call.OutputTokens != w.out ||
			call.CostMicros != w.in+2*w.out || call.Currency != "USD" || call.Status != 200 || call.Outcome != model.CallOK {
			t.Fatalf("call %s on the ledger: %s; want %s, %d and %d tokens", w.id, dump(call), w.endpoint, w.in, w.out)
		}
	}
}

// TestAMoneyBudgetHoldsInMicros pins budgets in money
// (model.TokenBudget.Micros): each call reserves what it may cost on the
// dearest of its models, in millionths, and settles to what it did cost;
// a call that would go past the budget is refused with 429
// insufficient_quota and X-Should-Retry: false, saying the budget and the
// call's estimate. The budget starts from what the ledger already holds
// of the period, in money; 20 concurrent callers never make the ledger's
// summed CostMicros pass the budget, and they stop only when no call's
// estimate fits what is left. In memory and in Redis.
func TestAMoneyBudgetHoldsInMicros(t *testing.T) {
	backends(t, func(t *testing.T, opts ...envOption) {
		const budget, estimate, earlier = 20_000, 1090, 12_000
		var settled settleCounter
		opts = append(opts[:len(opts):len(opts)], countSettlements(&settled))
		e := newEnv(t, func(g *model.Gateway, up string) {
			standard(g, up)
			for _, m := range g.Models {
				if m.Name == "llama" {
					// 10 and 30 per million: 10 and 30 micros a token.
					m.InputPriceMicros, m.OutputPriceMicros = 10_000_000, 30_000_000
				}
			}
			g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Micros: budget}}
		}, opts...)
		// What the ledger holds of the month already counts: 300 and 300
		// tokens on llama, 12000 micros of the 20000.
		ctx := e.admin
		tenant := mustPrincipal(ctx).TenantID
		detect, err := e.store.GetProjectByName(ctx, tenant, "detect")
		must(t, err)
		vic := e.signIn(e.keys["vic"])
		must(t, e.store.InsertModelCalls(ctx, []*model.ModelCall{{ID: model.NewID(), TenantID: tenant, At: time.Now(),
			UserID: mustPrincipal(vic).UserID, UserName: "vic", ProjectID: detect.ID, ProjectName: "detect", GroupID: detect.GroupID,
			GroupName: "vision", Endpoint: "chat/completions", Alias: "chat", Model: "llama", Target: "local",
			InputTokens: 300, OutputTokens: 300, CostMicros: earlier, Currency: "USD", Status: 200, Outcome: model.CallOK}}))
		// vic's "chat" is llama, falling back to the cheaper backup: a
		// call reserves 19 prompt tokens at 10 and 30 output tokens at
		// 30, on llama: 1090 micros.
		body := chat("chat", `,"max_tokens":30`)
		var answered, refusedN atomic.Int64
		var mu sync.Mutex
		var refusals []response
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for answered.Load() < 300 {
					r, err := e.postErr("vic", "detect", "chat/completions", body)
					if err != nil {
						t.Error(err)
						return
					}
					if r.status == 200 {
						answered.Add(1)
						continue
					}
					refusedN.Add(1)
					mu.Lock()
					refusals = append(refusals, r)
					mu.Unlock()
					return
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if n := answered.Load(); n < (budget-earlier)/estimate || n >= 300 {
			t.Fatalf("%d calls answered; want at least %d (what is left of the budget holds that many estimates) and the budget to end them",
				n, (budget-earlier)/estimate)
		}
		// Then calls go on one at a time, each once every answered call
		// is settled, until none fits: with no reservation held for more
		// than a call used, a refusal is final.
		for {
			settled.wait(t, answered.Load())
			r, err := e.postErr("vic", "detect", "chat/completions", body)
			must(t, err)
			if r.status == 200 {
				if answered.Add(1) >= 300 {
					t.Fatalf("%d calls answered: the budget never ended them", answered.Load())
				}
				continue
			}
			refusedN.Add(1)
			refusals = append(refusals, r)
			break
		}
		for _, r := range refusals {
			msg := r.json("error.message").Str
			if r.status != 429 || r.json("error.code").Str != "insufficient_quota" || r.json("error.type").Str != "insufficient_quota" ||
				r.header.Get("X-Should-Retry") != "false" || !strings.Contains(msg, "the monthly budget of project detect (0.02)") ||
				!strings.Contains(msg, fmt.Sprintf("may use up to %d;", estimate)) {
				t.Fatalf("a refusal: %d %v %s", r.status, r.header, r.body)
			}
		}
		calls := e.ledger(int(answered.Load() + refusedN.Load() + 1))
		var spent, ok, over int64
		for _, c := range calls {
			switch c.Outcome {
			case model.CallOK:
				ok++
				spent += c.CostMicros
				if c.Model != "llama" || c.CostMicros != 10*c.InputTokens+30*c.OutputTokens || c.CostMicros <= 0 {
					t.Fatalf("an answered call on the ledger: %s; want llama's price", dump(c))
				}
			case model.CallOverBudget:
				over++
				if c.Status != 429 || c.CostMicros != 0 || c.Model != "" {
					t.Fatalf("a refused call on the ledger: %s", dump(c))
				}
			default:
				t.Fatalf("a call on the ledger: %s", dump(c))
			}
		}
		if ok != answered.Load()+1 || over != refusedN.Load() {
			t.Fatalf("ledger has %d answered and %d refused, want %d (and the earlier one) and %d", ok, over, answered.Load(), refusedN.Load())
		}
		t.Logf("%d calls answered, %d refused, %d micros spent of %d", ok, over, spent, budget)
		if spent > budget || budget-spent >= estimate {
			t.Fatalf("%d calls spent %d micros of a budget of %d; want at most the budget, and less than one estimate (%d) left",
				ok, spent, budget, estimate)
		}
		// The budget is detect's alone.
		if r := e.post("alice", "fraud", "chat/completions", body); r.status != 200 {
			t.Fatalf("another project's call: %d %s", r.status, r.body)
		}
	})
}

// withLimiter gives the gateway the limiter newLimiter makes, and
// metrics m.
func withLimiter(m *gateway.Metrics, newLimiter func(t testing.TB) limits.Limiter) envOption {
	return func(c *envConfig) {
		c.limiter = newLimiter
		c.metrics = m
	}
}

// gauge reads an unlabelled gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestAGatewayFallsBackWhenRedisIsUnreachable pins the gateway's side of
// limits.Failover, as the server wires it (internal/server/gateway.go): a
// gateway whose Redis cannot be reached keeps answering calls, keeps its
// rate limits and budgets in the process (a limit still refuses, with its
// own 429, not a 503, until its minute ends), and reports
// klique_gateway_limits_degraded 1; once Redis is back it shares its
// limits there again and the gauge returns to 0. The gateway's clock
// stands still, so that the minute the calls are counted in does not end
// under the test.
func TestAGatewayFallsBackWhenRedisIsUnreachable(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	limited := func(g *model.Gateway, up string) {
		standard(g, up)
		g.RateLimits = []*model.RateLimit{{Scope: model.RateLimitUser, RequestsPerMinute: 3}}
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 1_000_000}}
	}
	const degraded = "klique_gateway_limits_degraded"

	t.Run("unreachable", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := gateway.NewMetrics(reg)
		must(t, err)
		clk := newClock()
		e := newEnv(t, limited, withClock(clk), withLimiter(m, func(testing.TB) limits.Limiter {
			addr := strings.TrimSuffix(strings.TrimPrefix(closedURL(t), "http://"), "/v1")
			client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
			t.Cleanup(func() { _ = client.Close() })
			return &limits.Failover{Primary: limits.NewRedis(client, "x:"), Fallback: limits.NewMemory(), Retry: time.Hour,
				Log: quiet, OnChange: m.SetDegraded}
		}))
		if v := gauge(t, reg, degraded); v != 0 {
			t.Fatalf("degraded %v before any call", v)
		}
		for i := 0; i < 3; i++ {
			if r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`)); r.status != 200 || r.header.Get("X-Ratelimit-Remaining-Requests") != fmt.Sprint(2-i) {
				t.Fatalf("call %d with Redis unreachable: %d %v %s", i, r.status, r.header, r.body)
			}
		}
		if v := gauge(t, reg, degraded); v != 1 {
			t.Fatalf("degraded %v with Redis unreachable, want 1", v)
		}
		r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`))
		if r.status != 429 || r.json("error.code").Str != "rate_limit_exceeded" || !strings.Contains(r.json("error.message").Str, "3 requests per minute for user vic") {
			t.Fatalf("the fourth call in a minute, limits in the process: %d %s", r.status, r.body)
		}
		if r := e.post("alice", "fraud", "chat/completions", chat("chat", "")); r.status != 200 {
			t.Fatalf("another user: %d %s", r.status, r.body)
		}
		outcomes := map[string]int{}
		for _, c := range e.ledger(5) {
			outcomes[c.Outcome]++
		}
		if outcomes[model.CallOK] != 4 || outcomes[model.CallRateLimited] != 1 {
			t.Fatalf("ledger outcomes %v", outcomes)
		}
		// The next minute has room again.
		clk.Add(time.Minute)
		if r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`)); r.status != 200 || r.header.Get("X-Ratelimit-Remaining-Requests") != "2" {
			t.Fatalf("a call in the next minute: %d %v %s", r.status, r.header, r.body)
		}
	})

	t.Run("recovers", func(t *testing.T) {
		direct, prefix := redistest.Require(t)
		proxy := startSwitch(t, direct.Options().Addr)
		reg := prometheus.NewRegistry()
		m, err := gateway.NewMetrics(reg)
		must(t, err)
		e := newEnv(t, limited, withClock(newClock()), withLimiter(m, func(testing.TB) limits.Limiter {
			opts := *direct.Options()
			opts.Addr, opts.MaxRetries, opts.DialTimeout = proxy.addr(), -1, 200*time.Millisecond
			opts.ReadTimeout, opts.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
			client := redis.NewClient(&opts)
			t.Cleanup(func() { _ = client.Close() })
			return &limits.Failover{Primary: limits.NewRedis(client, prefix), Fallback: limits.NewMemory(), Retry: 50 * time.Millisecond,
				Log: quiet, OnChange: m.SetDegraded}
		}))
		post := func() response { return e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`)) }
		if r := post(); r.status != 200 || gauge(t, reg, degraded) != 0 {
			t.Fatalf("with Redis: %d %s, degraded %v", r.status, r.body, gauge(t, reg, degraded))
		}
		keys, err := direct.Keys(t.Context(), prefix+"*").Result()
		must(t, err)
		if len(keys) == 0 {
			t.Fatal("the limits are not in Redis")
		}
		proxy.set(false)
		// The process counts on its own: three calls, then the limit.
		for i := 0; i < 3; i++ {
			if r := post(); r.status != 200 {
				t.Fatalf("call %d with Redis down: %d %s", i, r.status, r.body)
			}
		}
		if v := gauge(t, reg, degraded); v != 1 {
			t.Fatalf("degraded %v with Redis down, want 1", v)
		}
		if r := post(); r.status != 429 || r.json("error.code").Str != "rate_limit_exceeded" {
			t.Fatalf("the fourth call with Redis down: %d %s", r.status, r.body)
		}
		proxy.set(true)
		// Within a few retries the primary answers again: Redis held one
		// call of this minute, so the next is let through.
		deadline := time.Now().Add(10 * time.Second)
		for gauge(t, reg, degraded) != 0 {
			if time.Now().After(deadline) {
				t.Fatal("still degraded 10 s after Redis came back")
			}
			time.Sleep(60 * time.Millisecond)
			post()
		}
		if r := post(); r.status != 200 {
			t.Fatalf("a call with Redis back: %d %s", r.status, r.body)
		}
	})
}

// redisSwitch forwards connections to a TCP address while on; while off it
// drops the connections it holds and every new one.
type redisSwitch struct {
	ln     net.Listener
	target string
	on     atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func startSwitch(t *testing.T, target string) *redisSwitch {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	s := &redisSwitch{ln: ln, target: target, conns: map[net.Conn]bool{}}
	s.on.Store(true)
	go s.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		s.set(false)
	})
	return s
}

func (s *redisSwitch) addr() string { return s.ln.Addr().String() }

func (s *redisSwitch) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if !s.on.Load() {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", s.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		s.mu.Lock()
		s.conns[c], s.conns[up] = true, true
		s.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close(); _ = c.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = up.Close(); _ = c.Close() }()
	}
}

// set turns the switch on or off; off closes every connection it holds.
func (s *redisSwitch) set(on bool) {
	s.on.Store(on)
	if on {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
	clear(s.conns)
}

// A key scoped to a project narrows what its owner may use and grants
// nothing: once the owner leaves the project's group, the key no longer
// spends the project's budget, as an unscoped key naming the project no
// longer may.
func TestAScopedKeyStopsWhenItsOwnerLeavesTheGroup(t *testing.T) {
	e := newEnv(t, standard)
	_, scoped, err := e.svc.CreateAPIKey(e.admin, platform.APIKeyInput{Name: "fraud-key", User: "alice", Project: "fraud"})
	must(t, err)
	e.keys["alice@fraud"] = scoped
	if r := e.post("alice@fraud", "", "chat/completions", chat("chat", "")); r.status != 200 {
		t.Fatalf("a member's scoped key: %d %s", r.status, r.body)
	}
	must(t, e.svc.RemoveGroupMember(e.admin, "ml", "alice"))
	e.auth.Invalidate()
	r := e.post("alice@fraud", "", "chat/completions", chat("chat", ""))
	if r.status != 403 || r.json("error.code").Str != "project_not_allowed" || !strings.Contains(r.json("error.message").Str, "no longer use") {
		t.Fatalf("the scoped key of one who left the group: %d %s", r.status, r.body)
	}
	if r := e.post("alice", "fraud", "chat/completions", chat("chat", "")); r.status != 404 {
		t.Fatalf("the unscoped key naming the project: %d %s", r.status, r.body)
	}
	if seen := e.up.calls(); len(seen) != 1 {
		t.Fatalf("the upstream saw %d calls, want the member's one", len(seen))
	}
	// Nor does it list the project's aliases any more.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+scoped)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || strings.Contains(string(body), `"chat"`) {
		t.Fatalf("the scoped key of one who left the group lists the project's aliases: %d %s", resp.StatusCode, body)
	}
}
