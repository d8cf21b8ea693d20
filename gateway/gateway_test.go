package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/model"
)

// standard is the configuration most tests use: a public provider and a
// self-hosted route on the fake upstream; "chat" sends ml to the frontier
// model and everyone else to llama, both falling back to backup.
func standard(g *model.Gateway, up string) {
	g.Providers = []*model.Provider{{Name: "openai", BaseURL: up, KeySecret: "OPENAI_API_KEY", Timeout: 2 * time.Second}}
	g.Routes = []*model.Route{{Name: "local", Endpoints: []string{up}, Timeout: 2 * time.Second}}
	g.Models = []*model.LLMModel{
		{Name: "frontier", Provider: "openai", Upstream: "gpt-x", InputPriceMicros: 2_500_000, OutputPriceMicros: 10_000_000, Currency: "USD", MaxOutputTokens: 1000},
		{Name: "llama", Route: "local", Upstream: "meta/llama", InputPriceMicros: 200_000, OutputPriceMicros: 200_000, Currency: "USD", MaxOutputTokens: 1000},
		{Name: "backup", Route: "local", Upstream: "backup-model", InputPriceMicros: 100_000, OutputPriceMicros: 100_000, Currency: "USD", MaxOutputTokens: 1000},
		{Name: "embedder", Route: "local", Upstream: "bge", InputPriceMicros: 10_000, Currency: "USD"},
	}
	g.Aliases = []*model.Alias{
		{Name: "chat", Rules: []model.AliasRule{
			{Groups: []string{"ml"}, Targets: []model.Target{{Model: "frontier", Weight: 1}}, Fallbacks: []string{"backup"}},
			{Targets: []model.Target{{Model: "llama", Weight: 1}}, Fallbacks: []string{"backup"}},
		}},
		{Name: "embed", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "embedder", Weight: 1}}}}},
		{Name: "ml-only", Rules: []model.AliasRule{{Groups: []string{"ml"}, Targets: []model.Target{{Model: "llama", Weight: 1}}}}},
	}
}

func TestAnAliasResolvesByTheCallersGroup(t *testing.T) {
	e := newEnv(t, standard)
	a := e.post("alice", "fraud", "chat/completions", chat("chat", `,"max_tokens":50`))
	v := e.post("vic", "detect", "chat/completions", chat("chat", ""))
	if a.status != 200 || a.json("model").Str != "gpt-x" || a.json("choices.0.message.content").Str != "hello from gpt-x" {
		t.Fatalf("alice: %d %s", a.status, a.body)
	}
	if v.status != 200 || v.json("model").Str != "meta/llama" {
		t.Fatalf("vic: %d %s", v.status, v.body)
	}
	seen := e.up.calls()
	if len(seen) != 2 || seen[0].Model != "gpt-x" || seen[0].Auth != "Bearer "+providerKey || seen[1].Model != "meta/llama" || seen[1].Auth != "" {
		t.Fatalf("upstream saw %+v", seen)
	}
	calls := e.ledger(2)
	c := calls[0]
	if c.UserName != "alice" || c.ProjectName != "fraud" || c.GroupName != "ml" || c.Alias != "chat" || c.Model != "frontier" ||
		c.Target != "openai" || c.Outcome != model.CallOK || c.Status != 200 || c.InputTokens == 0 || c.OutputTokens != 3 {
		t.Fatalf("alice's call on the ledger: %s", dump(c))
	}
	// 2.50 and 10.00 per million tokens.
	if want := (c.InputTokens*2_500_000 + c.OutputTokens*10_000_000 + 999_999) / 1_000_000; c.CostMicros != want || c.Currency != "USD" {
		t.Fatalf("cost %d %s, want %d", c.CostMicros, c.Currency, want)
	}
	if calls[1].UserName != "vic" || calls[1].GroupName != "vision" || calls[1].Model != "llama" || !strings.HasPrefix(calls[1].Target, "local ") {
		t.Fatalf("vic's call on the ledger: %s", dump(calls[1]))
	}
	if id := a.header.Get("X-Klique-Call-Id"); id != c.ID {
		t.Fatalf("call id header %q, ledger %q", id, c.ID)
	}
}

func TestRefusalsSayWhatToChange(t *testing.T) {
	e := newEnv(t, standard)
	cases := []struct {
		user, project, path, body string
		status                    int
		code, words               string
	}{
		{"alice", "fraud", "chat/completions", chat("nope", ""), 404, "model_not_found", "GET /v1/models lists"},
		{"vic", "detect", "chat/completions", chat("ml-only", ""), 403, "model_not_allowed", "not open to you"},
		{"vic", "fraud", "chat/completions", chat("chat", ""), 404, "project_not_found", "no project 'fraud'"},
		{"alice", "fraud", "chat/completions", `{"model":"chat"}`, 400, "invalid_request_error", "messages is required"},
		{"alice", "fraud", "chat/completions", `not json`, 400, "invalid_request_error", "not valid JSON"},
		{"alice", "fraud", "images/generations", `{}`, 404, "unknown_url", "the gateway serves"},
	}
	for _, c := range cases {
		r := e.post(c.user, c.project, c.path, c.body)
		if r.status != c.status || r.json("error.code").Str != c.code || !strings.Contains(r.json("error.message").Str, c.words) ||
			r.json("error.type").Str == "" {
			t.Errorf("%s %s: %d %s; want %d %s %q", c.user, c.body, r.status, r.body, c.status, c.code, c.words)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(chat("chat", "")))
	req.Header.Set("Authorization", "Bearer kq_not_a_key")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a bad key: %d", resp.StatusCode)
	}
	if n := len(e.up.calls()); n != 0 {
		t.Fatalf("refused calls reached the upstream %d times", n)
	}
}

func TestFallbackOnServerErrorsAndTimeoutsButNotOnTheCallersMistakes(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Providers[0].Timeout = 300 * time.Millisecond
	})
	e.up.set("gpt-x", behaviour{status: 500})
	r := e.post("alice", "fraud", "chat/completions", chat("chat", ""))
	if r.status != 200 || r.json("model").Str != "backup-model" {
		t.Fatalf("after a 500: %d %s", r.status, r.body)
	}
	e.up.set("gpt-x", behaviour{delay: 2 * time.Second})
	start := time.Now()
	r = e.post("alice", "fraud", "chat/completions", chat("chat", ""))
	if r.status != 200 || r.json("model").Str != "backup-model" || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("after a timeout: %d %s in %s", r.status, r.body, time.Since(start))
	}
	e.up.set("gpt-x", behaviour{status: 400, errorBody: `{"error":{"message":"context too long","type":"invalid_request_error"}}`})
	r = e.post("alice", "fraud", "chat/completions", chat("chat", ""))
	if r.status != 400 || !strings.Contains(r.body, "context too long") {
		t.Fatalf("a 400 is the caller's, passed through: %d %s", r.status, r.body)
	}
	// Everything fails: a 502 that names what was tried.
	e.up.set("gpt-x", behaviour{status: 503})
	e.up.set("backup-model", behaviour{status: 500})
	r = e.post("alice", "fraud", "chat/completions", chat("chat", ""))
	if r.status != 500 && r.status != 502 {
		t.Fatalf("all failing: %d %s", r.status, r.body)
	}
	calls := e.ledger(4)
	// The calls that fell back and were answered are ok, the one after a
	// timeout included.
	if calls[0].Model != "backup" || calls[1].Model != "backup" || calls[0].Outcome != model.CallOK || calls[1].Outcome != model.CallOK ||
		calls[2].Model != "frontier" || calls[2].Outcome != model.CallUpstreamError {
		t.Fatalf("ledger %s", dump(calls))
	}
}

// stream posts a streaming call and returns the events' data.
func (e *env) stream(user, project, body string, stopAfter int) ([]string, http.Header) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys[user])
	req.Header.Set("X-Klique-Project", project)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		e.t.Fatalf("stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
			if stopAfter > 0 && len(events) == stopAfter {
				cancel() // the caller goes away
				break
			}
		}
	}
	return events, resp.Header
}

func TestStreamsPassThroughWithTheirUsageCounted(t *testing.T) {
	e := newEnv(t, standard)
	e.up.set("meta/llama", behaviour{reply: "one two three four five"})
	events, _ := e.stream("vic", "detect", chat("chat", `,"stream":true`), 0)
	var text strings.Builder
	for _, ev := range events {
		if strings.Contains(ev, `"usage"`) {
			t.Fatalf("the caller did not ask for usage but got %s", ev)
		}
		if ev != "[DONE]" {
			text.WriteString(jsonField(ev, "choices.0.delta.content"))
		}
	}
	if text.String() != "one two three four five" || events[len(events)-1] != "[DONE]" {
		t.Fatalf("streamed %q, events %v", text.String(), events)
	}
	if seen := e.up.calls(); !seen[0].IncludeUsage {
		t.Fatal("the gateway did not ask the upstream for usage")
	}
	// A caller that asks gets the usage chunk.
	events, _ = e.stream("vic", "detect", chat("chat", `,"stream":true,"stream_options":{"include_usage":true}`), 0)
	if !strings.Contains(events[len(events)-2], `"completion_tokens":5`) {
		t.Fatalf("usage not passed to a caller who asked: %v", events)
	}
	calls := e.ledger(2)
	for _, c := range calls {
		if !c.Stream || c.OutputTokens != 5 || c.InputTokens == 0 || c.CostMicros == 0 || c.Outcome != model.CallOK {
			t.Fatalf("a streamed call on the ledger: %s", dump(c))
		}
	}
}

func jsonField(s, path string) string { return response{body: s}.json(path).Str }

func TestACallerWhoGoesAwayMidStreamIsChargedWhatWasProduced(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		// The stream reserves 19 + 200 tokens: the budget has room for a
		// call of 19 + 1 beside what it produced, not beside its estimate.
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodDay, Tokens: 230}}
	})
	e.up.set("meta/llama", behaviour{reply: strings.Repeat("word ", 100), chunkDelay: 20 * time.Millisecond})
	events, _ := e.stream("vic", "detect", chat("chat", `,"stream":true,"max_tokens":200`), 5)
	if len(events) != 5 {
		t.Fatalf("%d events", len(events))
	}
	c := e.ledger(1)[0]
	if c.Outcome != model.CallDisconnected || c.OutputTokens < 5 || c.OutputTokens >= 100 || c.InputTokens == 0 {
		t.Fatalf("the call on the ledger: %s", dump(c))
	}
	// The budget holds what was produced, not the 200-token estimate.
	eventually.True(t, "", func() bool {
		r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":1`))
		return r.status == 200
	})
}

func TestRateLimitsAnswer429WithAccurateHeaders(t *testing.T) {
	clk := newClock() // in mid-minute: the window cannot roll over between calls
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.RateLimits = []*model.RateLimit{{Scope: model.RateLimitUser, RequestsPerMinute: 2, TokensPerMinute: 100_000}}
	}, withClock(clk))
	first := e.post("alice", "fraud", "chat/completions", chat("chat", `,"max_tokens":10`))
	if first.status != 200 || first.header.Get("X-Ratelimit-Limit-Requests") != "2" || first.header.Get("X-Ratelimit-Remaining-Requests") != "1" ||
		first.header.Get("X-Ratelimit-Limit-Tokens") != "100000" || first.header.Get("X-Ratelimit-Reset-Requests") == "" {
		t.Fatalf("first call: %d %v", first.status, first.header)
	}
	e.post("alice", "fraud", "chat/completions", chat("chat", `,"max_tokens":10`))
	third := e.post("alice", "fraud", "chat/completions", chat("chat", `,"max_tokens":10`))
	after, _ := strconv.Atoi(third.header.Get("Retry-After"))
	afterMs, _ := strconv.Atoi(third.header.Get("Retry-After-Ms"))
	untilMinute := clk.Now().Truncate(time.Minute).Add(time.Minute).Sub(clk.Now())
	if third.status != 429 || third.json("error.code").Str != "rate_limit_exceeded" || third.json("error.type").Str != "rate_limit_error" ||
		after != int(untilMinute.Seconds()) || time.Duration(afterMs)*time.Millisecond != untilMinute ||
		third.header.Get("X-Ratelimit-Remaining-Requests") != "0" || !strings.Contains(third.json("error.message").Str, "2 requests per minute for user alice") {
		t.Fatalf("third call: %d %v %s", third.status, third.header, third.body)
	}
	// Another user has their own window.
	if r := e.post("bob", "fraud", "chat/completions", chat("chat", "")); r.status != 200 {
		t.Fatalf("bob: %d %s", r.status, r.body)
	}
	if calls := e.ledger(4); calls[2].Outcome != model.CallRateLimited || calls[2].Status != 429 {
		t.Fatalf("the refused call on the ledger: %s", dump(calls[2]))
	}
}

// budgetWorld is a project budget of 20,000 tokens, each user held to
// 12,000 of it, for 200 concurrent callers.
func budgetWorld(g *model.Gateway, up string) {
	standard(g, up)
	g.Budgets = []*model.TokenBudget{{Project: "fraud", Period: model.PeriodMonth, Tokens: 20_000, PerUserTokens: 12_000}}
}

// spend fires calls from n goroutines for user until each is refused, and
// returns how many were answered.
func (e *env) spend(users []string, n int) (answered int64, refusals map[string]int, last response) {
	return e.spendOn(users, n, "chat/completions", chat("chat", `,"max_tokens":100`), func(r response) string { return r.json("error.code").Str })
}

// spendOn is spend through any door: the call is body at path, and code
// names a refusal in the door's error shape.
func (e *env) spendOn(users []string, n int, path, body string, code func(response) string) (answered int64, refusals map[string]int, last response) {
	var ok atomic.Int64
	var mu sync.Mutex
	refusals = map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := users[i%len(users)]
			for {
				// Not post: a goroutine must not stop the test.
				r, err := e.postErr(user, "fraud", path, body)
				if err == nil && r.status == 200 {
					ok.Add(1)
					continue
				}
				mu.Lock()
				if err != nil {
					refusals["transport error: "+err.Error()]++
				} else {
					refusals[code(r)+" "+r.header.Get("X-Should-Retry")]++
				}
				last = r
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	return ok.Load(), refusals, last
}

func TestBudgetsHoldUnder200ConcurrentCallers(t *testing.T) {
	backends(t, func(t *testing.T, opts ...envOption) {
		e := newEnv(t, budgetWorld, opts...)
		answered, refusals, r := e.spend([]string{"alice", "bob"}, 200)
		if refusals["insufficient_quota false"] != 200 {
			t.Fatalf("refusals %v", refusals)
		}
		calls := e.ledger(int(answered))
		var total, alice int64
		for _, c := range calls {
			total += c.InputTokens + c.OutputTokens
			if c.UserName == "alice" {
				alice += c.InputTokens + c.OutputTokens
			}
		}
		// Every call reserved its estimate first (input bytes, plus 100
		// output tokens), so the sum never passes the budget.
		if total > 20_000 || alice > 12_000 {
			t.Fatalf("charged %d (alice %d) of a budget of 20000 (12000 each)", total, alice)
		}
		if answered < 50 {
			t.Fatalf("only %d calls answered", answered)
		}
		// (A call made now might fit again: settles still in flight give
		// back what the estimates held beyond what was used.)
		msg := r.json("error.message").Str
		if r.status != 429 || r.json("error.type").Str != "insufficient_quota" ||
			!(strings.Contains(msg, "token budget of project fraud") || strings.Contains(msg, "your monthly token limit in project fraud")) ||
			!strings.Contains(msg, "resets at") {
			t.Fatalf("refusal %d %s", r.status, r.body)
		}
		// Another project's calls are not held by this budget.
		if r := e.post("vic", "detect", "chat/completions", chat("chat", "")); r.status != 200 {
			t.Fatalf("vic: %d %s", r.status, r.body)
		}
	})
}

func TestPerUserLimitsHoldOneUserOnly(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Budgets = []*model.TokenBudget{{Project: "fraud", Period: model.PeriodDay, Tokens: 1_000_000, PerUserTokens: 1_000}}
	})
	n := 0
	for {
		r := e.post("alice", "fraud", "chat/completions", chat("chat", `,"max_tokens":100`))
		if r.status != 200 {
			if r.status != 429 || !strings.Contains(r.json("error.message").Str, "your daily token limit in project fraud (1000 tokens)") {
				t.Fatalf("alice refused with %d %s", r.status, r.body)
			}
			break
		}
		n++
		if n > 100 {
			t.Fatal("alice was never held")
		}
	}
	if r := e.post("bob", "fraud", "chat/completions", chat("chat", `,"max_tokens":100`)); r.status != 200 {
		t.Fatalf("bob is held by alice's limit: %d %s", r.status, r.body)
	}
}

func TestGuardrailsBlockInputAtTheEdgeAndStreamedOutput(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Guardrails = model.Guardrails{Deny: []string{`(?i)\bpassword\b`}}
		g.Aliases[0].Guardrails = model.Guardrails{Deny: []string{`secret plan`}}
	})
	r := e.post("vic", "detect", "chat/completions", `{"model":"chat","messages":[{"role":"user","content":"my Password is hunter2"}]}`)
	if r.status != 400 || r.json("error.code").Str != "guardrail_blocked" || !strings.Contains(r.json("error.message").Str, "global deny 1") {
		t.Fatalf("input: %d %s", r.status, r.body)
	}
	if n := len(e.up.calls()); n != 0 {
		t.Fatal("a blocked call reached the upstream")
	}
	e.up.set("meta/llama", behaviour{reply: "here is the secret plan in full detail"})
	events, _ := e.stream("vic", "detect", chat("chat", `,"stream":true`), 0)
	all := strings.Join(events, "\n")
	if !strings.Contains(all, "guardrail_blocked") || strings.Contains(all, "full detail") || strings.Contains(all, "[DONE]") {
		t.Fatalf("stream %v", events)
	}
	// Non-streamed output is checked whole.
	r = e.post("vic", "detect", "chat/completions", chat("chat", ""))
	if r.status != 400 || strings.Contains(r.body, "full detail") || !strings.Contains(r.body, "alias chat deny 1") {
		t.Fatalf("output: %d %s", r.status, r.body)
	}
	calls := e.ledger(3)
	if calls[0].Outcome != model.CallBlocked || calls[0].Guardrail != "global deny 1" || calls[0].Model != "" ||
		calls[1].Outcome != model.CallBlocked || calls[1].Guardrail != "alias chat deny 1" || calls[1].OutputTokens == 0 {
		t.Fatalf("ledger %s", dump(calls))
	}
}

// The model-based check asks the guard alias about the input, before the
// call goes upstream, and about a whole answer, before the caller sees it.
// Each check is a call of the caller's to the guard alias: on the ledger,
// and held to the limits that cover the guard alias.
func TestAModelBasedGuardrailBlocksOnItsVerdict(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Models = append(g.Models, &model.LLMModel{Name: "llama-guard", Route: "local", Upstream: "guard-model", Currency: "USD"})
		g.Aliases = append(g.Aliases, &model.Alias{Name: "guard", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "llama-guard", Weight: 1}}}}})
		g.Aliases[0].Guardrails.GuardAlias = "guard"
		g.RateLimits = []*model.RateLimit{{Scope: model.RateLimitAlias, Name: "guard", RequestsPerMinute: 5}}
	}, withClock(newClock()))
	models := func() (out []string) {
		for _, c := range e.up.calls() {
			out = append(out, c.Model)
		}
		return out
	}
	// Unsafe input never goes upstream.
	e.up.set("guard-model", behaviour{unsafeIf: "hello there"})
	r := e.post("vic", "detect", "chat/completions", chat("chat", ""))
	if r.status != 400 || r.json("error.code").Str != "guardrail_blocked" || !strings.Contains(r.json("error.message").Str, "request was blocked by the model-based guardrail guard") {
		t.Fatalf("unsafe input: %d %s", r.status, r.body)
	}
	if got := models(); !slices.Equal(got, []string{"guard-model"}) {
		t.Fatalf("the upstream saw %v, want the check alone", got)
	}
	// Safe input, safe answer: the input is checked, the call made, the
	// answer checked, and the caller gets it.
	e.up.set("guard-model", behaviour{unsafeIf: "forbidden"})
	r = e.post("vic", "detect", "chat/completions", chat("chat", ""))
	if r.status != 200 || r.json("choices.0.message.content").Str != "hello from meta/llama" {
		t.Fatalf("safe: %d %s", r.status, r.body)
	}
	if got := models(); !slices.Equal(got, []string{"guard-model", "guard-model", "meta/llama", "guard-model"}) {
		t.Fatalf("the upstream saw %v", got)
	}
	// An unsafe answer is withheld.
	e.up.set("meta/llama", behaviour{reply: "a forbidden answer"})
	r = e.post("vic", "detect", "chat/completions", chat("chat", ""))
	if r.status != 400 || r.json("error.code").Str != "guardrail_blocked" || !strings.Contains(r.json("error.message").Str, "answer was blocked by the model-based guardrail guard") ||
		strings.Contains(r.body, "forbidden") {
		t.Fatalf("unsafe answer: %d %s", r.status, r.body)
	}
	// Three calls, five checks.
	var chats, checks []*model.ModelCall
	for _, c := range e.ledger(8) {
		if c.Alias == "guard" {
			checks = append(checks, c)
		} else {
			chats = append(chats, c)
		}
	}
	if len(chats) != 3 || len(checks) != 5 {
		t.Fatalf("%d calls and %d checks on the ledger, want 3 and 5", len(chats), len(checks))
	}
	if c := chats[0]; c.Outcome != model.CallBlocked || c.Guardrail != "model check guard" || c.Model != "" {
		t.Fatalf("the call blocked at its input on the ledger: %s", dump(c))
	}
	if c := chats[1]; c.Outcome != model.CallOK || c.Guardrail != "" {
		t.Fatalf("the call let through on the ledger: %s", dump(c))
	}
	if c := chats[2]; c.Outcome != model.CallBlocked || c.Guardrail != "model check guard" || c.OutputTokens == 0 {
		t.Fatalf("the call whose answer was blocked on the ledger (charged what it used): %s", dump(c))
	}
	// Five checks used the guard alias's five requests a minute: the next
	// call's check is refused, and so is the call, with the limit's answer.
	r = e.post("vic", "detect", "chat/completions", chat("chat", ""))
	if r.status != 429 || r.json("error.code").Str != "rate_limit_exceeded" || !strings.Contains(r.json("error.message").Str, "alias guard") ||
		r.header.Get("Retry-After") == "" || r.header.Get("X-Klique-Call-Id") == "" {
		t.Fatalf("a call whose check is over the guard alias's limit: %d %v %s", r.status, r.header, r.body)
	}
	if got := models(); len(got) != 7 {
		t.Fatalf("the upstream saw %v: the refused check or its call went upstream", got)
	}
}

func TestProviderKeysNeverLeave(t *testing.T) {
	e := newEnv(t, standard)
	r := e.post("alice", "fraud", "chat/completions", chat("chat", ""))
	if r.status != 200 || e.up.calls()[0].Auth != "Bearer "+providerKey {
		t.Fatalf("%d %s; upstream saw %+v", r.status, r.body, e.up.calls())
	}
	// A provider refusing the key and quoting it: the caller never sees it.
	e.up.set("gpt-x", behaviour{status: 401, errorBody: `{"error":{"message":"Incorrect API key provided: ` + providerKey + `","code":"invalid_api_key"}}`})
	e.up.set("backup-model", behaviour{status: 401, errorBody: `{"error":{"message":"no"}}`})
	r2 := e.post("alice", "fraud", "chat/completions", chat("chat", ""))
	for _, out := range []string{r.body, r2.body, dump(r.header), dump(r2.header), e.logs.String()} {
		if strings.Contains(out, providerKey) || strings.Contains(out, providerKey[8:]) {
			t.Fatalf("the provider key leaked: %s", out)
		}
	}
	if !strings.Contains(r2.body, "[redacted]") {
		t.Fatalf("refusal %s", r2.body)
	}
	calls := e.ledger(2)
	if strings.Contains(dump(calls), providerKey) {
		t.Fatal("the provider key is on the ledger")
	}
}

func TestTheModelsListShowsTheAliasesTheCallerMayUse(t *testing.T) {
	e := newEnv(t, standard)
	list := func(user, project string) string {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+e.keys[user])
		if project != "" {
			req.Header.Set("X-Klique-Project", project)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		var ids []string
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		body := response{body: b.String()}
		for _, id := range body.json("data.#.id").Array() {
			ids = append(ids, id.Str)
		}
		return strings.Join(ids, ",")
	}
	if got := list("alice", ""); got != "chat,embed,ml-only" {
		t.Fatalf("alice: %s", got)
	}
	if got := list("vic", "detect"); got != "chat,embed" {
		t.Fatalf("vic: %s", got)
	}
}

func TestEmbeddingsAndCompletions(t *testing.T) {
	e := newEnv(t, standard)
	r := e.post("vic", "detect", "embeddings", `{"model":"embed","input":["a","b"]}`)
	if r.status != 200 || r.json("data.0.embedding.1").Float() != 0.2 {
		t.Fatalf("embeddings: %d %s", r.status, r.body)
	}
	c := e.ledger(1)[0]
	if c.Endpoint != "embeddings" || c.Model != "embedder" || c.OutputTokens != 0 || c.InputTokens == 0 {
		t.Fatalf("ledger %s", dump(c))
	}
}

// TestBudgetsHoldAcrossReplicas runs two gateways over one store and one
// Redis: the budget is shared, so together they never pass it.
func TestBudgetsHoldAcrossReplicas(t *testing.T) {
	e := newEnv(t, budgetWorld, withRedis())
	second := e.replica()
	var answered atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv := e.srv.URL
			if i%2 == 1 {
				srv = second
			}
			user := []string{"alice", "bob"}[i%2]
			for {
				req, _ := http.NewRequest(http.MethodPost, srv+"/v1/chat/completions", strings.NewReader(chat("chat", `,"max_tokens":100`)))
				req.Header.Set("Authorization", "Bearer "+e.keys[user])
				req.Header.Set("X-Klique-Project", "fraud")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return
				}
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	var total int64
	for _, c := range e.ledger(int(answered.Load())) {
		total += c.InputTokens + c.OutputTokens
	}
	if total > 20_000 {
		t.Fatalf("two replicas charged %d of a budget of 20000", total)
	}
}
