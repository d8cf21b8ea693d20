package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
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
