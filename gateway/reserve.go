package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// defaultMaxOutput bounds the output estimate of a model that says none,
// and defaultMaxImage what it bills for one image (the estate's defaults,
// for a model stored before it said).
const (
	defaultMaxOutput = 4096
	defaultMaxImage  = 4096
)

// completionsDefaultOutput is what OpenAI's completions API (and vLLM's)
// produces when a call says no max_tokens: the bound reserved, and sent,
// for such a call.
const completionsDefaultOutput = 16

// reserve reserves the call's estimate in every window at once, seeding
// budgets from the ledger when their counters are new or are to be
// reconciled with it (limits.Reconciler). A refusal answers
// the caller (why, and when to try again) and ends the call as over
// budget or rate limited; a limiter that cannot be reached refuses it too
// (503), as does a caller that went away meanwhile (499).
func (g *Gateway) reserve(x *exchange) bool {
	e := estimate(x.grant, &x.req, x.ep)
	// From here on the prompt's bound counts its images and files too:
	// it is what a call is charged for its prompt when its upstream says
	// no usage.
	x.req.InputTokens, x.maxOut = e.input, e.output
	denied, ok := g.hold(x, e)
	if !ok {
		x.end(refused(x.ctx, x.grant, denied))
	}
	return ok
}

// refused is the ledger's status and outcome of a call reserve refused:
// denied is the window that refused, or -1 when the limiter failed.
func refused(ctx context.Context, grant *platform.ModelGrant, denied int) (status int, outcome string) {
	switch {
	case denied < 0 && ctx.Err() != nil:
		return 499, model.CallDisconnected
	case denied < 0:
		return http.StatusServiceUnavailable, model.CallUpstreamError
	case grant.Windows[denied].Budget:
		return http.StatusTooManyRequests, model.CallOverBudget
	}
	return http.StatusTooManyRequests, model.CallRateLimited
}

// hold is reserve's work: it fills x.res and takes it from the limiter.
// When refused it answers the caller and returns the index of the window
// that refused (or -1 when the limiter failed).
func (g *Gateway) hold(x *exchange, e callEstimate) (int, bool) {
	grant, now := x.grant, x.start
	tokens, micros := e.tokens, e.micros
	res := limits.Request{ID: x.rec.ID, Expires: now.Add(g.o.ReservationTTL), Windows: make([]limits.Window, len(grant.Windows))}
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
	x.res = res
	if len(res.Windows) == 0 {
		return 0, true
	}
	ctx := x.ctx
	var d limits.Decision
	var err error
	for try := 0; try < 3; try++ {
		d, err = g.o.Limiter.Reserve(ctx, res, now)
		if err != nil || len(d.Unseeded) == 0 {
			break
		}
		for _, i := range d.Unseeded {
			if err = g.seed(ctx, grant.Windows[i], res.Windows[i], d.Epoch); err != nil {
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
	w, header := x.w, x.header
	if err != nil {
		if ctx.Err() == nil { // else the caller went away: nothing failed
			g.o.Log.Error("gateway: reserving a call's limits failed", "err", err)
		}
		x.door.writeError(w, header, http.StatusServiceUnavailable, "service_unavailable", "rate limits and budgets cannot be checked now; try again", "")
		return -1, false
	}
	rateHeaders(header, grant.Windows, res.Windows, d, now)
	if !d.Allowed {
		win := grant.Windows[d.Denied]
		if win.Budget {
			header.Set("X-Should-Retry", "false")
			x.door.writeError(w, header, http.StatusTooManyRequests, "insufficient_quota",
				fmt.Sprintf("this call would go past %s: %d of it is used and this call may use up to %d; it resets at %s",
					win.Describe, d.Used[d.Denied], res.Windows[d.Denied].Amount, win.Ends.UTC().Format(time.RFC3339)), "")
			return d.Denied, false
		}
		if amount := res.Windows[d.Denied].Amount; amount > win.Limit {
			// No wait lets this call through: say so, and keep SDKs from
			// retrying it.
			header.Set("X-Should-Retry", "false")
			x.door.writeError(w, header, http.StatusTooManyRequests, "rate_limit_exceeded",
				fmt.Sprintf("this call may use up to %d tokens, more than the whole of %s: lower max_tokens or shorten the prompt; waiting will not help",
					amount, win.Describe), "")
			return d.Denied, false
		}
		wait := win.Ends.Sub(now)
		header.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		header.Set("Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
		x.door.writeError(w, header, http.StatusTooManyRequests, "rate_limit_exceeded",
			fmt.Sprintf("rate limit reached: %s; try again in %s", win.Describe, wait.Round(time.Millisecond)), "")
		return d.Denied, false
	}
	return 0, true
}

// seed reads what the ledger says was spent in a budget window and seeds
// its counter with it, at epoch. The calls that find the window due at
// once (all of them, after a partition) share one reading and one seed:
// only the first seed at an epoch counts, and each reading of the day's
// or the month's calls costs the ledger a scan.
func (g *Gateway) seed(ctx context.Context, rule platform.LimitWindow, w limits.Window, epoch int64) error {
	key := w.Key + "\x00" + strconv.FormatInt(epoch, 10)
	_, err, _ := g.seeds.Do(key, func() (any, error) {
		// Shared: the first caller's going away does not end it.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		g.meter.drain(sctx) // the ledger's sum counts every call recorded so far
		q := rule.Spend
		except, err := g.outstanding(sctx, w, epoch)
		if err != nil {
			return nil, err
		}
		q.Except = except
		tok, mic, err := g.o.Service.ModelSpend(sctx, q)
		if err != nil {
			return nil, err
		}
		used := tok
		if rule.Unit == platform.UnitMicros {
			used = mic
		}
		return nil, g.o.Limiter.Seed(sctx, w, used, epoch)
	})
	return err
}

// maxExcept bounds the calls a ledger reading leaves out (see
// outstanding): past it, none is, and a seed counts those twice until the
// next one, on the side of refusing early.
const maxExcept = 5000

// outstanding lists the calls a seed of w counts from the limiter itself,
// which the ledger's sum it is made from leaves out (limits.Outstanding).
func (g *Gateway) outstanding(ctx context.Context, w limits.Window, epoch int64) ([]string, error) {
	var ids []string
	var err error
	switch o := g.o.Limiter.(type) {
	case interface {
		OutstandingAt(context.Context, limits.Window, int64) ([]string, error)
	}:
		ids, err = o.OutstandingAt(ctx, w, epoch)
	case limits.Outstanding:
		ids, err = o.Outstanding(ctx, w)
	}
	if len(ids) > maxExcept {
		return nil, err
	}
	return ids, err
}

// settle puts what an answered call used on its ledger row (the model that
// answered, where, its tokens and cost) and settles its reservation to it,
// in the background (see Gateway.settler), once the row is buffered
// (sendSettlement). A call that no target answered
// settles to what it consumed: a request, no tokens.
func (g *Gateway) settle(x *exchange) bool {
	rec, out := x.rec, &x.out
	if out.Status != 0 && out.Attempt < len(x.attempts) {
		a := &x.attempts[out.Attempt]
		used := modelOf(x.grant, a.Model)
		rec.Model = used.Name
		rec.Target = a.Target()
		rec.InputTokens, rec.OutputTokens = out.Usage.Input, out.Usage.Output
		rec.CostMicros, rec.Currency = platform.Cost(used, out.Usage.Input, out.Usage.Output), used.Currency
	}
	res := x.res
	if len(res.Windows) == 0 {
		return true
	}
	actual := make([]int64, len(res.Windows))
	for i, win := range x.grant.Windows {
		switch win.Unit {
		case platform.UnitRequests:
			actual[i] = 1
		case platform.UnitTokens:
			actual[i] = rec.InputTokens + rec.OutputTokens
		case platform.UnitMicros:
			actual[i] = rec.CostMicros
		}
	}
	// Settled once the call's ledger row is buffered (see sendSettlement).
	x.settlement, x.settling = limits.Settlement{Request: res, Actual: actual}, true
	return true
}

// sendSettlement hands the call's settlement to the settlers (see
// Gateway.settler), once its ledger row is buffered (record): a budget
// counter is seeded from the ledger after the rows buffered so far are
// written (meter.drain), so a call whose settle reached the limiter
// before its row was buffered could be in neither the counter nor the
// ledger's sum that a seed reads. A guard check held after the settle
// can take a while.
func (g *Gateway) sendSettlement(x *exchange) {
	if !x.settling {
		return
	}
	s := x.settlement
	x.settlement, x.settling = limits.Settlement{}, false
	select {
	case g.settlements <- s:
	default: // the settlers are behind: settle here
		g.doSettle([]limits.Settlement{s})
	}
}

// callEstimate is the most a call can use: its prompt (input, on the
// model of the alias that counts it highest), what each choice may
// produce (output: the bound the upstream is sent), and in all, tokens
// and money (micros, on the dearest model).
type callEstimate struct {
	input, output, tokens, micros int64
}

// estimate bounds what a call can use: tokens (input counted, with its
// images and the files it names counted for each of its models; output
// bounded by max_tokens and by the most its models can produce, times n)
// and money (on the dearest of its models). wire.Parse bounds max_tokens
// and n, and the body's size bounds the media, so the sums cannot
// overflow; platform.Cost saturates.
func estimate(grant *platform.ModelGrant, req *wire.Call, ep wire.Endpoint) callEstimate {
	var e callEstimate
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
		switch e.output = req.MaxTokens; {
		case e.output == 0 && ep == wire.Completions:
			e.output = min(completionsDefaultOutput, max(most, 1))
		case e.output == 0:
			e.output = most
		case bounded && most > 0:
			e.output = min(e.output, most)
		}
	}
	out := e.output * req.Choices
	e.input = req.InputTokens
	for _, u := range grant.Upstreams {
		in := req.InputTokens + req.MediaTokens(billing(u), maxImage(u.Model))
		e.input = max(e.input, in)
		e.micros = max(e.micros, platform.Cost(u.Model, in, out))
	}
	e.tokens = e.input + out
	return e
}

// billing is how an upstream bills an image whose size is known: by
// OpenAI's or Anthropic's rule, or, for a server of another kind (a
// self-hosted model, whose vision encoder the gateway does not know),
// as the most the model bills for one.
func billing(u platform.Upstream) wire.Billing {
	api := ""
	switch {
	case u.Provider != nil:
		api = u.Provider.API
	case u.Route != nil:
		api = u.Route.API
	}
	switch api {
	case model.APIOpenAI:
		return wire.BillsOpenAI
	case model.APIAnthropic:
		return wire.BillsAnthropic
	}
	return wire.BillsPerImage
}

// maxImage is the most a model bills for one image: its estate's
// maxImageTokens, or the default.
func maxImage(m *model.LLMModel) int64 {
	if m.MaxImageTokens > 0 {
		return m.MaxImageTokens
	}
	return defaultMaxImage
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
