package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// defaultMaxOutput bounds the output estimate of a model that says none.
const defaultMaxOutput = 4096

// serve handles one model call.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, ep wire.Endpoint) {
	start := g.o.Now()
	// began and upstream time the gateway's own share of the call on the
	// monotonic clock (Now may be a test's clock).
	began := time.Now()
	var upstream time.Duration
	ctx, ok := g.authenticate(w, r)
	if !ok {
		return
	}
	buf, err := readBody(r.Body, g.o.MaxBody, r.ContentLength)
	// Nothing the call keeps after it is served refers to the body: what
	// is read from it is copied (wire.Parse), and the upstream gets a
	// patched copy.
	defer putBuffer(buf)
	body := buf.Bytes()
	if err != nil {
		writeError(w, nil, http.StatusBadRequest, "invalid_request_error", "could not read the request body", "")
		return
	}
	if int64(len(body)) > g.o.MaxBody {
		writeError(w, nil, http.StatusRequestEntityTooLarge, "request_too_large",
			fmt.Sprintf("the request body is larger than the %d bytes allowed", g.o.MaxBody), "")
		return
	}
	req, err := wire.Parse(ep, body)
	if err != nil {
		writeError(w, nil, http.StatusBadRequest, "invalid_request_error", err.Error(), "")
		return
	}
	p, _ := identity.PrincipalFrom(ctx)
	rec := &model.ModelCall{ID: model.NewID(), TenantID: p.TenantID, At: start, UserID: p.UserID, UserName: p.UserName,
		Endpoint: string(ep), Alias: req.Model, Stream: req.Stream}
	header := http.Header{"X-Klique-Call-Id": []string{rec.ID}}

	grant, err := g.o.Service.AuthorizeModelCall(ctx, req.Model, r.Header.Get("X-Klique-Project"), start)
	if err != nil {
		g.platformError(w, header, err)
		return // not the ledger's: no project, or not allowed at all
	}
	rec.ProjectID, rec.ProjectName, rec.GroupID, rec.GroupName = grant.ProjectID, grant.ProjectName, grant.GroupID, grant.GroupName
	finish := func(status int, outcome string) {
		rec.Status, rec.Outcome = status, outcome
		rec.LatencyMicros = g.o.Now().Sub(start).Microseconds()
		g.meter.record(rec)
		g.o.Metrics.call(rec, time.Since(began)-upstream)
	}

	// Guardrails on the input, at the edge: a blocked call never goes
	// upstream.
	if rule := grant.Guard.Input(req.Input); rule != "" {
		rec.Guardrail = rule
		writeError(w, header, http.StatusBadRequest, "guardrail_blocked", "the request was blocked by the guardrail "+rule, "messages")
		finish(http.StatusBadRequest, model.CallBlocked)
		return
	}
	if grant.GuardAlias != "" && len(req.Input) > 0 &&
		!g.modelCheck(ctx, w, header, grant, rec, req.Input, "the request", "messages", finish) {
		return
	}

	// Reserve the estimate in every window at once.
	res, windows, ok := g.reserve(ctx, w, header, grant, &req, ep, rec.ID, start)
	if !ok {
		finish(refused(ctx, grant, windows))
		return
	}

	attempts := g.attempts(grant)
	c := &call{ep: ep, body: body, req: req, guard: grant.Guard, header: header}
	// A whole answer is held for the model-based check before the caller
	// sees it; a stream is checked by the patterns as it goes.
	to, held := http.ResponseWriter(w), (*bufferWriter)(nil)
	if grant.GuardAlias != "" && !req.Stream && ep != wire.Embeddings {
		held = &bufferWriter{header: http.Header{}}
		to = held
	}
	sent := time.Now()
	out := g.proxy.do(ctx, to, c, attempts)
	upstream = time.Since(sent)

	g.charge(grant, attempts, &out, res, rec)
	if held != nil && out.Status != 0 {
		var text string
		if out.Status == http.StatusOK && out.Blocked == "" {
			text = wire.OutputText(held.buf.Bytes())
		}
		if text != "" && !g.modelCheck(ctx, w, header, grant, rec, []string{text}, "the model's answer", "", finish) {
			return
		}
		held.passOn(w, nil)
	}

	switch {
	case out.Status == 0:
		msg := "every model of alias " + grant.Alias.Name + " failed"
		if len(out.Tried) > 0 {
			msg += ": " + strings.Join(out.Tried, "; ")
		}
		status := http.StatusBadGateway
		if out.Disconnected {
			finish(499, model.CallDisconnected)
			return
		}
		writeError(w, header, status, "upstream_error", msg, "")
		finish(status, model.CallUpstreamError)
	case out.Blocked != "":
		rec.Guardrail = out.Blocked
		finish(http.StatusBadRequest, model.CallBlocked)
	case out.Disconnected:
		finish(499, model.CallDisconnected)
	case out.Err != nil: // a stream cut off by the upstream
		finish(out.Status, model.CallUpstreamError)
	case out.Status >= 400:
		finish(out.Status, model.CallUpstreamError)
	default:
		finish(out.Status, model.CallOK)
	}
}

// refused is the ledger's status and outcome of a call reserve refused:
// windows is what reserve returned (the window that refused, or -1 when
// the limiter failed).
func refused(ctx context.Context, grant *platform.ModelGrant, windows int) (status int, outcome string) {
	switch {
	case windows < 0 && ctx.Err() != nil:
		return 499, model.CallDisconnected
	case windows < 0:
		return http.StatusServiceUnavailable, model.CallUpstreamError
	case grant.Windows[windows].Budget:
		return http.StatusTooManyRequests, model.CallOverBudget
	}
	return http.StatusTooManyRequests, model.CallRateLimited
}

// charge puts what an answered call used on its ledger record (the model
// that answered, where, its tokens and cost) and settles its reservation
// to it.
func (g *Gateway) charge(grant *platform.ModelGrant, attempts []Attempt, out *Outcome, res limits.Request, rec *model.ModelCall) {
	if out.Status != 0 && out.Attempt < len(attempts) {
		used := modelOf(grant, attempts[out.Attempt].Model)
		rec.Model = used.Name
		rec.Target = attempts[out.Attempt].Target()
		rec.InputTokens, rec.OutputTokens = out.Usage.Input, out.Usage.Output
		rec.CostMicros, rec.Currency = platform.Cost(used, out.Usage.Input, out.Usage.Output), used.Currency
	}
	if len(res.Windows) == 0 {
		return
	}
	actual := make([]int64, len(res.Windows))
	for i, win := range grant.Windows {
		switch win.Unit {
		case platform.UnitRequests:
			actual[i] = 1
		case platform.UnitTokens:
			actual[i] = rec.InputTokens + rec.OutputTokens
		case platform.UnitMicros:
			actual[i] = rec.CostMicros
		}
	}
	select {
	case g.settle <- limits.Settlement{Request: res, Actual: actual}:
	default: // the settlers are behind: settle here
		g.doSettle([]limits.Settlement{{Request: res, Actual: actual}})
	}
}

// Target names where an attempt went: the provider, or the route and its
// endpoint.
func (a Attempt) Target() string {
	if a.Route != "" {
		return a.Route + " " + a.BaseURL
	}
	return a.Provider
}

func modelOf(grant *platform.ModelGrant, name string) *model.LLMModel {
	for _, u := range grant.Upstreams {
		if u.Model.Name == name {
			return u.Model
		}
	}
	return &model.LLMModel{Name: name}
}

// attempts lists the upstreams of a grant in the order to try: each model
// in turn; a route's endpoints healthy first, at most two per model.
func (g *Gateway) attempts(grant *platform.ModelGrant) []Attempt {
	var out []Attempt
	turn := g.proxy.balance.turn()
	for _, u := range grant.Upstreams {
		up := u.Model.Upstream
		if up == "" {
			up = u.Model.Name
		}
		switch {
		case u.Provider != nil:
			out = append(out, Attempt{Model: u.Model.Name, Upstream: up, BaseURL: u.Provider.BaseURL, Key: u.Key,
				Timeout: u.Provider.Timeout, Provider: u.Provider.Name})
		case u.Route != nil:
			eps := g.proxy.balance.order(u.Route.Endpoints, turn)
			for i, ep := range eps {
				if i == 2 {
					break
				}
				out = append(out, Attempt{Model: u.Model.Name, Upstream: up, BaseURL: ep, Timeout: u.Route.Timeout, Route: u.Route.Name})
			}
		}
	}
	return out
}

// estimate bounds what a call can use: tokens (input counted, output
// bounded by max_tokens and by the most its models can produce, times n)
// and money (on the dearest of its models). wire.Parse bounds max_tokens,
// so the sum cannot overflow; platform.Cost saturates.
func estimate(grant *platform.ModelGrant, req *wire.Call, ep wire.Endpoint) (tokens, micros int64) {
	var out int64
	if ep != wire.Embeddings {
		// most is the most the call's models can produce (a model that
		// does not say counts as defaultMaxOutput); bounded tells whether
		// every one of them says.
		var most int64
		bounded := true
		for _, u := range grant.Upstreams {
			m := u.Model.MaxOutputTokens
			if m <= 0 {
				m, bounded = defaultMaxOutput, false
			}
			most = max(most, m)
		}
		switch out = req.MaxTokens; {
		case out == 0:
			out = most
		case bounded && most > 0:
			out = min(out, most)
		}
	}
	out *= req.Choices
	for _, u := range grant.Upstreams {
		micros = max(micros, platform.Cost(u.Model, req.InputTokens, out))
	}
	return req.InputTokens + out, micros
}

// reserve reserves a call in every window, seeding budgets from the ledger
// when their counters are new. When refused it answers the caller and
// returns the index of the window that refused (or -1 when the limiter
// failed).
func (g *Gateway) reserve(ctx context.Context, w http.ResponseWriter, header http.Header, grant *platform.ModelGrant,
	req *wire.Call, ep wire.Endpoint, id string, now time.Time) (limits.Request, int, bool) {
	tokens, micros := estimate(grant, req, ep)
	res := limits.Request{ID: id, Expires: now.Add(g.o.ReservationTTL), Windows: make([]limits.Window, len(grant.Windows))}
	for i, win := range grant.Windows {
		amount := int64(1)
		switch win.Unit {
		case platform.UnitTokens:
			amount = tokens
		case platform.UnitMicros:
			amount = micros
		}
		res.Windows[i] = limits.Window{Key: win.Key, Limit: win.Limit, Amount: amount, Ends: win.Ends, Seeded: win.Budget}
	}
	if len(res.Windows) == 0 {
		return res, 0, true
	}
	var d limits.Decision
	var err error
	for try := 0; try < 3; try++ {
		d, err = g.o.Limiter.Reserve(ctx, res, now)
		if err != nil || len(d.Unseeded) == 0 {
			break
		}
		for _, i := range d.Unseeded {
			win := grant.Windows[i]
			tok, mic, serr := g.o.Service.ModelSpend(ctx, win.Spend)
			if serr != nil {
				err = serr
				break
			}
			used := tok
			if win.Unit == platform.UnitMicros {
				used = mic
			}
			if err = g.o.Limiter.Seed(ctx, res.Windows[i], used); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if err == nil && len(d.Unseeded) > 0 {
		err = fmt.Errorf("budget counters could not be seeded")
	}
	if err != nil {
		if ctx.Err() == nil { // else the caller went away: nothing failed
			g.o.Log.Error("gateway: reserving a call's limits failed", "err", err)
		}
		writeError(w, header, http.StatusServiceUnavailable, "service_unavailable", "rate limits and budgets cannot be checked now; try again", "")
		return res, -1, false
	}
	rateHeaders(header, grant.Windows, res.Windows, d, now)
	if !d.Allowed {
		win := grant.Windows[d.Denied]
		if win.Budget {
			header.Set("X-Should-Retry", "false")
			writeError(w, header, http.StatusTooManyRequests, "insufficient_quota",
				fmt.Sprintf("this call would go past %s: %d of it is used and this call may use up to %d; it resets at %s",
					win.Describe, d.Used[d.Denied], res.Windows[d.Denied].Amount, win.Ends.UTC().Format(time.RFC3339)), "")
			return res, d.Denied, false
		}
		if amount := res.Windows[d.Denied].Amount; amount > win.Limit {
			// No wait lets this call through: say so, and keep SDKs from
			// retrying it.
			header.Set("X-Should-Retry", "false")
			writeError(w, header, http.StatusTooManyRequests, "rate_limit_exceeded",
				fmt.Sprintf("this call may use up to %d tokens, more than the whole of %s: lower max_tokens or shorten the prompt; waiting will not help",
					amount, win.Describe), "")
			return res, d.Denied, false
		}
		wait := win.Ends.Sub(now)
		header.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		header.Set("Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
		writeError(w, header, http.StatusTooManyRequests, "rate_limit_exceeded",
			fmt.Sprintf("rate limit reached: %s; try again in %s", win.Describe, wait.Round(time.Millisecond)), "")
		return res, d.Denied, false
	}
	return res, 0, true
}

// rateHeaderNames are the canonical x-ratelimit header names, per kind
// (requests, tokens): set straight into the map, not canonicalised per
// call.
var rateHeaderNames = [2][3]string{
	{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// rateHeaders sets OpenAI's x-ratelimit headers from the tightest request
// window and the tightest token window.
func rateHeaders(h http.Header, rules []platform.LimitWindow, ws []limits.Window, d limits.Decision, now time.Time) {
	for kind, unit := range [2]platform.WindowUnit{platform.UnitRequests, platform.UnitTokens} {
		best := -1
		var left int64
		for i, r := range rules {
			if r.Unit != unit || r.Budget {
				continue
			}
			l := max(r.Limit-d.Used[i], 0)
			if best < 0 || l < left {
				best, left = i, l
			}
		}
		if best < 0 {
			continue
		}
		names := &rateHeaderNames[kind]
		// One backing array for the three values.
		vals := [3]string{strconv.FormatInt(rules[best].Limit, 10), strconv.FormatInt(left, 10),
			ws[best].Ends.Sub(now).Round(time.Millisecond).String()}
		v := vals[:]
		h[names[0]], h[names[1]], h[names[2]] = v[0:1:1], v[1:2:2], v[2:3:3]
	}
}
