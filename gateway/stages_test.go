package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/guard"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// The tests here run the stages of a call one at a time, against fakes of
// the platform, the limiter and the model server; the end-to-end tests
// (gateway_test.go and the rest) run them together against the real ones.

// stageAuthority is the platform service of the stage tests: it grants
// every call grant (or refuses with err) and keeps what is recorded.
type stageAuthority struct {
	grant *platform.ModelGrant
	err   error
	mu    sync.Mutex
	calls []*model.ModelCall
}

func (a *stageAuthority) AuthorizeModelCall(context.Context, string, string, time.Time) (*platform.ModelGrant, error) {
	return a.grant, a.err
}

func (a *stageAuthority) ModelSpend(context.Context, platform.SpendQuery) (int64, int64, error) {
	return 0, 0, nil
}

func (a *stageAuthority) RecordModelCalls(_ context.Context, calls []*model.ModelCall) error {
	a.mu.Lock()
	a.calls = append(a.calls, calls...)
	a.mu.Unlock()
	return nil
}

func (a *stageAuthority) ModelAliases(context.Context, string) ([]*model.Alias, error) {
	return nil, nil
}

func (a *stageAuthority) recorded() []*model.ModelCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*model.ModelCall(nil), a.calls...)
}

// stageAuth knows one credential, "kq_good", as vic.
type stageAuth struct{}

func (stageAuth) AuthenticateCached(_ context.Context, cred string) (*identity.Principal, error) {
	if cred != "kq_good" {
		return nil, fmt.Errorf("unknown credential: %w", identity.ErrUnauthenticated)
	}
	return &identity.Principal{TenantID: "t1", UserID: "u1", UserName: "vic", Role: model.RoleMember}, nil
}

// stageLimiter answers every Reserve with decision (or err) and keeps the
// settlements.
type stageLimiter struct {
	decision limits.Decision
	err      error
	mu       sync.Mutex
	settled  []limits.Settlement
}

func (l *stageLimiter) Reserve(ctx context.Context, r limits.Request, _ time.Time) (limits.Decision, error) {
	if l.err != nil {
		return limits.Decision{}, l.err
	}
	d := l.decision
	if d.Used == nil {
		d.Used = make([]int64, len(r.Windows))
	}
	return d, nil
}

func (l *stageLimiter) Settle(_ context.Context, r limits.Request, actual []int64) error {
	l.mu.Lock()
	l.settled = append(l.settled, limits.Settlement{Request: r, Actual: actual})
	l.mu.Unlock()
	return nil
}

func (l *stageLimiter) Seed(context.Context, limits.Window, int64, int64) error { return nil }

func (l *stageLimiter) Peek(_ context.Context, ws []limits.Window, _ time.Time) ([]int64, error) {
	return make([]int64, len(ws)), nil
}

// roundTrip is a model server in the test's process: it answers each
// upstream request, and counts them.
type roundTrip struct {
	n      atomic.Int32
	answer func(*http.Request) (*http.Response, error)
}

func (rt *roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.n.Add(1)
	return rt.answer(r)
}

// answers says the same chat completion to every call: 20 tokens in, 5
// out.
func answers(r *http.Request) (*http.Response, error) {
	body := `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"a fox"}}],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

// stageNow is the stage tests' clock.
var stageNow = time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)

// stageGrant is a grant of alias chat for project detect: model llama on
// a route, at 2 micros a token in and 3 out, a guardrail on "password",
// and windows (a rate window of requests and a monthly token budget).
func stageGrant(t testing.TB) *platform.ModelGrant {
	set, err := guard.Compile(model.Guardrails{Deny: []string{`(?i)\bpassword\b`}}, "chat", model.Guardrails{})
	if err != nil {
		t.Fatal(err)
	}
	minute := stageNow.Truncate(time.Minute).Add(time.Minute)
	return &platform.ModelGrant{TenantID: "t1", UserID: "u1", UserName: "vic", ProjectID: "p1", ProjectName: "detect",
		GroupID: "g1", GroupName: "vision", Alias: &model.Alias{Name: "chat"},
		Upstreams: []platform.Upstream{{
			Model: &model.LLMModel{Name: "llama", Upstream: "meta/llama", InputPriceMicros: 2_000_000, OutputPriceMicros: 3_000_000, Currency: "USD"},
			Route: &model.Route{Name: "r", Endpoints: []string{"http://upstream.test/v1"}},
		}},
		Guard: set,
		Windows: []platform.LimitWindow{
			{Key: "t1/rpm/u1", Limit: 10, Unit: platform.UnitRequests, Ends: minute, Describe: "10 requests per minute for user vic"},
			{Key: "t1/budget/p1", Limit: 1000, Unit: platform.UnitTokens, Ends: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Budget: true,
				Describe: "the monthly token budget of project detect"},
		},
	}
}

// stageGateway is a gateway over fakes; Close flushes it.
func stageGateway(t *testing.T, svc *stageAuthority, l *stageLimiter, rt *roundTrip) *Gateway {
	t.Helper()
	if rt == nil {
		rt = &roundTrip{answer: func(*http.Request) (*http.Response, error) {
			t.Error("the call went upstream")
			return nil, errors.New("not here")
		}}
	}
	g := New(Options{Service: svc, Auth: stageAuth{}, Limiter: l, Client: &http.Client{Transport: rt},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return stageNow }})
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// resolved is an exchange as the stages up to resolve leave it: a chat
// call of vic's with input, granted grant.
func resolved(t *testing.T, grant *platform.ModelGrant, input string) (*exchange, *httptest.ResponseRecorder) {
	t.Helper()
	w := httptest.NewRecorder()
	body := []byte(`{"model":"chat","max_tokens":50,"messages":[{"role":"user","content":"` + input + `"}]}`)
	req, err := wire.Parse(wire.Chat, body)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := stageAuth{}.AuthenticateCached(context.Background(), "kq_good")
	x := &exchange{w: w, door: openAI{}, ep: wire.Chat, start: stageNow, began: time.Now(),
		ctx: identity.WithPrincipal(context.Background(), p), body: body, req: req, grant: grant,
		header: http.Header{"X-Klique-Call-Id": {"call-1"}},
		rec: &model.ModelCall{ID: "call-1", TenantID: "t1", At: stageNow, UserID: "u1", UserName: "vic", ProjectID: "p1",
			Endpoint: string(wire.Chat), Alias: "chat"}}
	return x, w
}

func TestTheAuthenticateStageReadsTheBearerCredential(t *testing.T) {
	g := stageGateway(t, &stageAuthority{}, &stageLimiter{}, nil)
	const how = "send your Klique API key or access token as 'Authorization: Bearer <key>' (the OpenAI SDKs do this with api_key)"
	for _, c := range []struct {
		header string
		status int
		msg    string
	}{
		{"Bearer kq_good", 200, ""},
		{"bearer kq_good", 200, ""},
		{"", 401, how},
		{"Bearer ", 401, how},
		{"Basic a3FfZ29vZA==", 401, how},
		{"kq_good", 401, how},
		{"Bearer kq_bad", 401, "the API key or token is not valid: unknown credential: unauthenticated"},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		x := &exchange{w: w, r: r, door: openAI{}}
		ok := g.authenticate(x)
		if c.status == 200 {
			p, _ := identity.PrincipalFrom(x.ctx)
			if !ok || p == nil || p.UserName != "vic" || identity.ChannelFrom(x.ctx) != identity.ChannelGateway || w.Body.Len() != 0 {
				t.Errorf("%q: ok %v, principal %+v, answered %d %s", c.header, ok, p, w.Code, w.Body)
			}
			continue
		}
		if ok || w.Code != c.status || gjson.Get(w.Body.String(), "error.code").Str != "invalid_api_key" ||
			gjson.Get(w.Body.String(), "error.message").Str != c.msg || gjson.Get(w.Body.String(), "error.type").Str != "authentication_error" {
			t.Errorf("%q: ok %v, %d %s", c.header, ok, w.Code, w.Body)
		}
	}
}

func TestTheDecodeStageRefusesWhatItCannotRead(t *testing.T) {
	svc := &stageAuthority{}
	g := stageGateway(t, svc, &stageLimiter{}, nil)
	g.o.MaxBody = 64
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, 200, ""},
		{`not json`, 400, "invalid_request_error"},
		{`{"model":"chat"}`, 400, "invalid_request_error"},
		{`{"model":"chat","messages":[{"role":"user","content":"` + strings.Repeat("a", 64) + `"}]}`, 413, "request_too_large"},
	} {
		w := httptest.NewRecorder()
		x := &exchange{w: w, r: httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(c.body)), door: openAI{}, ep: wire.Chat}
		ok := g.decode(x)
		if c.status == 200 {
			if !ok || x.req.Model != "chat" || string(x.body) != c.body || len(x.req.Input) != 1 {
				t.Errorf("%s: ok %v, %+v", c.body, ok, x.req)
			}
			continue
		}
		if ok || w.Code != c.status || gjson.Get(w.Body.String(), "error.code").Str != c.code {
			t.Errorf("%s: ok %v, %d %s", c.body, ok, w.Code, w.Body)
		}
		// Refused before resolve: not the ledger's.
		g.record(x)
	}
	must(t, g.Close(context.Background()))
	if calls := svc.recorded(); len(calls) != 0 {
		t.Errorf("calls refused before resolve were recorded: %+v", calls)
	}
}

func TestTheResolveStageGivesTheCallItsLedgerRow(t *testing.T) {
	grant := stageGrant(t)
	svc := &stageAuthority{grant: grant}
	g := stageGateway(t, svc, &stageLimiter{}, nil)
	x, w := resolved(t, nil, "hi")
	x.r = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	x.header = http.Header{}
	x.rec = nil
	if !g.resolve(x) || x.grant != grant {
		t.Fatalf("resolve refused: %d %s", w.Code, w.Body)
	}
	if r := x.rec; r.ID == "" || x.header.Get("X-Klique-Call-Id") != r.ID || r.Alias != "chat" || r.At != stageNow ||
		r.UserName != "vic" || r.ProjectName != "detect" || r.GroupName != "vision" {
		t.Fatalf("the ledger row: %+v, header %v", r, x.header)
	}

	// A refusal of the platform is answered with the call's id, and is not
	// the ledger's.
	svc.grant, svc.err = nil, &platform.Error{Code: platform.CodeNotFound, Message: "no model alias 'nope'"}
	x, w = resolved(t, nil, "hi")
	x.r = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	x.header = http.Header{}
	if g.resolve(x) || w.Code != 404 || gjson.Get(w.Body.String(), "error.code").Str != "model_not_found" ||
		w.Header().Get("X-Klique-Call-Id") != x.rec.ID {
		t.Fatalf("a refused alias: %d %v %s", w.Code, w.Header(), w.Body)
	}
	g.record(x)
	must(t, g.Close(context.Background()))
	if calls := svc.recorded(); len(calls) != 0 {
		t.Fatalf("a call the platform refused was recorded: %+v", calls)
	}
}

func TestTheGuardInputStageBlocksACallBeforeItGoesUpstream(t *testing.T) {
	grant := stageGrant(t)
	svc := &stageAuthority{grant: grant}
	g := stageGateway(t, svc, &stageLimiter{}, nil) // nil: a call that goes upstream fails the test

	x, w := resolved(t, grant, "my password is hunter2")
	if g.guardInput(x) {
		t.Fatal("the guard let a blocked input through")
	}
	if w.Code != 400 || gjson.Get(w.Body.String(), "error.code").Str != "guardrail_blocked" ||
		gjson.Get(w.Body.String(), "error.param").Str != "messages" || w.Header().Get("X-Klique-Call-Id") != "call-1" ||
		x.status != 400 || x.outcome != model.CallBlocked || x.rec.Guardrail != "global deny 1" {
		t.Fatalf("blocked: %d %v %s; ledger %d %s %q", w.Code, w.Header(), w.Body, x.status, x.outcome, x.rec.Guardrail)
	}
	if x, _ := resolved(t, grant, "hello"); !g.guardInput(x) {
		t.Fatal("the guard blocked a harmless input")
	}

	// The whole path stops there: the call is on the ledger as blocked,
	// nothing went upstream, and nothing was reserved.
	l := &stageLimiter{decision: limits.Decision{Allowed: true}}
	g = stageGateway(t, svc, l, nil)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"my password is hunter2"}]}`))
	r.Header.Set("Authorization", "Bearer kq_good")
	w = httptest.NewRecorder()
	g.ServeHTTP(w, r)
	must(t, g.Close(context.Background()))
	calls := svc.recorded()
	if w.Code != 400 || len(calls) != 1 || calls[0].Outcome != model.CallBlocked || calls[0].Status != 400 ||
		calls[0].Guardrail != "global deny 1" || calls[0].ID != w.Header().Get("X-Klique-Call-Id") || len(l.settled) != 0 {
		t.Fatalf("the path: %d %s; ledger %+v; settled %d", w.Code, w.Body, calls, len(l.settled))
	}
}

func TestTheReserveStageMapsARefusalToTheLedger(t *testing.T) {
	for _, c := range []struct {
		name     string
		limiter  *stageLimiter
		gone     bool
		status   int
		code     string
		outcome  string
		header   string
		contains string
	}{
		{name: "rate limited", limiter: &stageLimiter{decision: limits.Decision{Denied: 0, Used: []int64{10, 0}}},
			status: 429, code: "rate_limit_exceeded", outcome: model.CallRateLimited, header: "Retry-After",
			contains: "rate limit reached: 10 requests per minute for user vic; try again in 30s"},
		{name: "over budget", limiter: &stageLimiter{decision: limits.Decision{Denied: 1, Used: []int64{0, 990}}},
			status: 429, code: "insufficient_quota", outcome: model.CallOverBudget, header: "X-Should-Retry",
			contains: "this call would go past the monthly token budget of project detect: 990 of it is used"},
		{name: "limiter down", limiter: &stageLimiter{err: limits.ErrUnavailable},
			status: 503, code: "service_unavailable", outcome: model.CallUpstreamError, contains: "cannot be checked now"},
		{name: "caller gone", limiter: &stageLimiter{err: context.Canceled}, gone: true,
			status: 499, code: "service_unavailable", outcome: model.CallDisconnected},
	} {
		t.Run(c.name, func(t *testing.T) {
			grant := stageGrant(t)
			g := stageGateway(t, &stageAuthority{grant: grant}, c.limiter, nil)
			x, w := resolved(t, grant, "hello")
			if c.gone {
				ctx, cancel := context.WithCancel(x.ctx)
				cancel()
				x.ctx = ctx
			}
			if g.reserve(x) {
				t.Fatal("reserve let a refused call through")
			}
			body := w.Body.String()
			if x.status != c.status || x.outcome != c.outcome || gjson.Get(body, "error.code").Str != c.code ||
				!strings.Contains(gjson.Get(body, "error.message").Str, c.contains) ||
				(c.header != "" && w.Header().Get(c.header) == "") || w.Header().Get("X-Klique-Call-Id") != "call-1" {
				t.Fatalf("ledger %d %s; answered %d %v %s", x.status, x.outcome, w.Code, w.Header(), body)
			}
		})
	}

	t.Run("allowed", func(t *testing.T) {
		grant := stageGrant(t)
		g := stageGateway(t, &stageAuthority{grant: grant}, &stageLimiter{decision: limits.Decision{Allowed: true, Used: []int64{3, 100}}}, nil)
		x, w := resolved(t, grant, "hello")
		if !g.reserve(x) || w.Body.Len() != 0 || x.outcome != "" {
			t.Fatalf("refused: %d %s", w.Code, w.Body)
		}
		// One request; the prompt's bound plus max_tokens.
		if len(x.res.Windows) != 2 || x.res.ID != "call-1" || x.res.Windows[0].Amount != 1 ||
			x.res.Windows[1].Amount != x.req.InputTokens+50 || !x.res.Windows[1].Seeded || !x.res.Expires.Equal(stageNow.Add(15*time.Minute)) {
			t.Fatalf("the reservation: %+v", x.res)
		}
		if x.header.Get("X-Ratelimit-Remaining-Requests") != "7" || x.header.Get("X-Ratelimit-Reset-Requests") != "30s" {
			t.Fatalf("the rate headers: %v", x.header)
		}
	})
}

func TestTheCallAndSettleStagesChargeWhatWasUsed(t *testing.T) {
	grant := stageGrant(t)
	l := &stageLimiter{decision: limits.Decision{Allowed: true}}
	rt := &roundTrip{answer: answers}
	g := stageGateway(t, &stageAuthority{grant: grant}, l, rt)
	x, w := resolved(t, grant, "hello")
	if !g.reserve(x) || !g.callUpstream(x) || !g.settle(x) {
		t.Fatal("a stage ended the call")
	}
	// The settlement waits for the call's ledger row (issue 39 defect 8:
	// a seed reads the ledger after the rows buffered so far are written).
	if !x.settling || len(g.settlements) != 0 {
		t.Fatalf("the call was settled before its ledger row was buffered")
	}
	g.record(x)
	if rt.n.Load() != 1 || w.Code != 200 || gjson.Get(w.Body.String(), "choices.0.message.content").Str != "a fox" ||
		w.Header().Get("X-Klique-Call-Id") != "call-1" || x.status != 200 || x.outcome != model.CallOK {
		t.Fatalf("the answer: %d upstream calls; %d %v %s; ledger %d %s", rt.n.Load(), w.Code, w.Header(), w.Body, x.status, x.outcome)
	}
	if r := x.rec; r.Model != "llama" || r.Target != "r http://upstream.test/v1" || r.InputTokens != 20 || r.OutputTokens != 5 ||
		r.CostMicros != 2*20+3*5 || r.Currency != "USD" {
		t.Fatalf("the ledger row: %+v", r)
	}
	must(t, g.Close(context.Background()))
	if len(l.settled) != 1 || l.settled[0].Request.ID != "call-1" || fmt.Sprint(l.settled[0].Actual) != "[1 25]" {
		t.Fatalf("settled %+v, want the request and its 25 tokens", l.settled)
	}

	// A call no target answers is answered 502, and settles to a request
	// and no tokens.
	l = &stageLimiter{decision: limits.Decision{Allowed: true}}
	rt = &roundTrip{answer: func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") }}
	g = stageGateway(t, &stageAuthority{grant: grant}, l, rt)
	x, w = resolved(t, grant, "hello")
	if !g.reserve(x) || !g.callUpstream(x) || !g.settle(x) {
		t.Fatal("a stage ended the call")
	}
	g.record(x)
	if w.Code != 502 || gjson.Get(w.Body.String(), "error.code").Str != "upstream_error" ||
		!strings.Contains(w.Body.String(), "every model of alias chat failed: llama: ") ||
		x.status != 502 || x.outcome != model.CallUpstreamError || x.rec.Model != "" {
		t.Fatalf("no answer: %d %s; ledger %d %s %+v", w.Code, w.Body, x.status, x.outcome, x.rec)
	}
	must(t, g.Close(context.Background()))
	if len(l.settled) != 1 || fmt.Sprint(l.settled[0].Actual) != "[1 0]" {
		t.Fatalf("settled %+v, want a request and no tokens", l.settled)
	}
}

func TestTheRecordStageFillsTheLedgerRow(t *testing.T) {
	grant := stageGrant(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	must(t, err)
	svc := &stageAuthority{grant: grant}
	g := stageGateway(t, svc, &stageLimiter{}, nil)
	g.o.Metrics = m
	now := stageNow
	g.o.Now = func() time.Time { return now }
	x, _ := resolved(t, grant, "hello")
	x.rec.InputTokens, x.rec.OutputTokens = 20, 5
	x.end(429, model.CallRateLimited)
	now = stageNow.Add(1500 * time.Microsecond)
	g.record(x)
	// The gateway's own check of a call is on the ledger, not in the
	// metrics of calls.
	check, _ := resolved(t, grant, "hello")
	check.rec.ID = "check-1"
	check.check = true
	check.end(200, model.CallOK)
	g.record(check)
	must(t, g.Close(context.Background()))
	calls := svc.recorded()
	if len(calls) != 2 || calls[0] != x.rec || calls[1] != check.rec {
		t.Fatalf("recorded %+v", calls)
	}
	if r := x.rec; r.Status != 429 || r.Outcome != model.CallRateLimited || r.LatencyMicros != 1500 || r.At != stageNow ||
		r.InputTokens != 20 || r.ProjectID != "p1" {
		t.Fatalf("the ledger row: %+v", r)
	}
	if r := check.rec; r.Status != 200 || r.Outcome != model.CallOK {
		t.Fatalf("the check's ledger row: %+v", r)
	}
	if got := counted(t, reg); fmt.Sprint(got) != "map[chat/rate_limited:1]" {
		t.Fatalf("counted %v, want the call and not the check", got)
	}
}

// counted reads klique_gateway_calls_total by alias and outcome.
func counted(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "klique_gateway_calls_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out[strings.Join(labels, "/")] = s.GetCounter().GetValue()
		}
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
