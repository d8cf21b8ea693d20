package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// A model call goes through the gateway as a fixed sequence of stages
// (path), each a method of Gateway over the call's exchange: what the
// stages before it found out, and what it leaves for those after it.
// Every stage can be run and tested alone, given an exchange filled as
// the stages before it would fill it. The door the call came in by (see
// door) decodes its request and writes its refusals; the stages are the
// same for every door.
//
// A stage either passes the call on (true) or ends it (false): it has
// answered the caller, and set the ledger's status and outcome (end)
// when the call is the ledger's. The call and settle stages never end a
// call: once a call went upstream, its reservation is settled to what it
// used whatever comes after. record closes every call the ledger knows
// of (every call resolve let through), whichever stage ended it.
type stage func(g *Gateway, x *exchange) bool

// path is the order of the stages. Settling comes before the check of a
// held answer: that check is a call of its own to the guard alias, which
// may meet the same windows (a user's tokens a minute), and should find
// them holding what this call used rather than its estimate.
var path = [...]stage{
	(*Gateway).authenticate, // the credential names the caller
	(*Gateway).decode,       // the door reads the request into the common call
	(*Gateway).resolve,      // the platform: the alias's targets, limits and guardrails
	(*Gateway).guardInput,   // pattern guardrails, then the model-based check
	(*Gateway).reserve,      // the estimate, in every budget and rate window at once
	(*Gateway).callUpstream, // each target in turn until one answers; the answer goes out (or is held)
	(*Gateway).settle,       // what was used goes on the ledger row and settles the reservation
	(*Gateway).guardOutput,  // the model-based check of a held answer, then the answer
}

// exchange is one call on its way through the stages. It is taken from a
// pool per call and given back once the call is served, so that the path
// allocates nothing of its own for it: nothing the call leaves behind (its
// ledger row, its settlement, the answer's headers) points into it.
type exchange struct {
	// What the call came with: the door it came in by and the operation.
	w    http.ResponseWriter
	r    *http.Request
	door door
	ep   wire.Endpoint
	// start is when the call came in on Options.Now (the ledger's time,
	// and the limit windows' clock); began on the monotonic clock and
	// upstream, the time of the exchange with the model server, time the
	// gateway's own share of the call.
	start    time.Time
	began    time.Time
	upstream time.Duration

	// ctx carries the caller (authenticate).
	ctx context.Context
	// buf holds the request body (decode); body is what goes upstream and
	// req what the stages read of it. Nothing the call keeps after it is
	// served refers to buf: what is read from it is copied (wire.Parse),
	// and the upstream gets a patched copy.
	buf  *bytes.Buffer
	body []byte
	req  wire.Call
	// rec is the call's ledger row, and header the headers of every answer
	// to it: its id (resolve), then the rate limit headers (reserve).
	rec    *model.ModelCall
	header http.Header
	// grant is the platform's decision (resolve); res the reservation
	// (reserve).
	grant *platform.ModelGrant
	res   limits.Request
	// maxOut is the output bound reserved for each choice (reserve): what
	// the upstream is asked for at most.
	maxOut int64
	// attempts, c, held and out are the exchange with the model server
	// (callUpstream): held is the answer kept back for the model-based
	// check (guardOutput).
	attempts []Attempt
	c        call
	held     *bufferWriter
	out      Outcome

	// status and outcome are the ledger's verdict (end).
	status  int
	outcome string
	// settlement is the call's settlement, made by settle and handed to
	// the settlers once its ledger row is buffered (sendSettlement) while
	// settling.
	settlement limits.Settlement
	settling   bool

	// check marks the gateway's own call to a guard alias (modelGuard):
	// the metrics count the calls callers make, not the checks made for
	// them.
	check bool
}

var exchanges = sync.Pool{New: func() any { return &exchange{header: make(http.Header, 8)} }}

// end sets the ledger's status and outcome of the call.
func (x *exchange) end(status int, outcome string) { x.status, x.outcome = status, outcome }

// release gives the exchange back to the pool, with its request body's
// buffer, keeping the header map and the attempts' array.
func (x *exchange) release() {
	putBuffer(x.buf)
	header, attempts := x.header, x.attempts
	clear(header)
	clear(attempts) // the providers' keys
	*x = exchange{header: header, attempts: attempts[:0]}
	exchanges.Put(x)
}

// serve handles one model call: the stages in turn until one ends it, then
// its ledger row.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, d door, ep wire.Endpoint) {
	x := exchanges.Get().(*exchange)
	x.w, x.r, x.door, x.ep = w, r, d, ep
	x.start, x.began = g.o.Now(), time.Now()
	for _, s := range path {
		if !s(g, x) {
			break
		}
	}
	if ticket := g.record(x); ticket != 0 && x.r.Context().Err() == nil {
		// The answer's last bytes (the end of its body, or a stream's
		// [DONE]) go out once its row is on the ledger, or, with a
		// journal, once it is journaled (record answers 0 then).
		g.meter.await(x.r.Context(), ticket)
	}
	if x.out.Held != nil {
		_, _ = x.w.Write(x.out.Held)
		if fl, ok := x.w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	x.release()
}

// doneEvent ends a stream: held back until the call is on the ledger.
var doneEvent = []byte("data: [DONE]\n\n")

// authenticate reads the bearer credential and puts the caller in x.ctx.
func (g *Gateway) authenticate(x *exchange) bool {
	ctx, ok := g.caller(x.w, x.r, x.door)
	x.ctx = ctx
	return ok
}

// decode reads the request body and has the door decode it. A request the
// door cannot read is refused before it is the ledger's: it names no alias
// to count it against.
func (g *Gateway) decode(x *exchange) bool {
	var err error
	x.buf, err = readBody(x.r.Body, g.o.MaxBody, x.r.ContentLength)
	body := x.buf.Bytes()
	if err != nil {
		x.door.writeError(x.w, nil, http.StatusBadRequest, "invalid_request_error", "could not read the request body", "")
		return false
	}
	if int64(len(body)) > g.o.MaxBody {
		x.door.writeError(x.w, nil, http.StatusRequestEntityTooLarge, "request_too_large",
			fmt.Sprintf("the request body is larger than the %d bytes allowed", g.o.MaxBody), "")
		return false
	}
	if err := x.door.decode(x, body); err != nil {
		x.door.writeError(x.w, nil, http.StatusBadRequest, "invalid_request_error", err.Error(), "")
		return false
	}
	return true
}

// resolve gives the call its id and ledger row, and asks the platform
// whether the caller may call the alias for the project, and where the
// call goes and what it counts against. A refusal here is not the
// ledger's (no project, or not allowed at all); from here on every call
// is.
func (g *Gateway) resolve(x *exchange) bool {
	p, _ := identity.PrincipalFrom(x.ctx)
	x.rec = &model.ModelCall{ID: model.NewID(), TenantID: p.TenantID, At: x.start, UserID: p.UserID, UserName: p.UserName,
		Endpoint: string(x.ep), Alias: x.req.Model, Stream: x.req.Stream}
	x.header["X-Klique-Call-Id"] = []string{x.rec.ID}
	grant, err := g.o.Service.AuthorizeModelCall(x.ctx, x.req.Model, x.r.Header.Get("X-Klique-Project"), x.start)
	if err != nil {
		g.platformError(x.w, x.header, x.door, err)
		return false
	}
	x.grant = grant
	// A call by one of the alias's extra names (claude-sonnet-4-5) is the
	// alias's: the ledger and the metrics name the alias, as for a call by
	// its own name.
	x.rec.Alias = grant.Alias.Name
	identity.NoteCaller(x.ctx, "", grant.ProjectName)
	x.rec.ProjectID, x.rec.ProjectName, x.rec.GroupID, x.rec.GroupName = grant.ProjectID, grant.ProjectName, grant.GroupID, grant.GroupName
	return true
}

// guardInput checks the input at the edge, so that a blocked call never
// goes upstream: the pattern guardrails first (cheap), then the guard
// alias's model-based check.
func (g *Gateway) guardInput(x *exchange) bool {
	if rule := x.grant.Guard.Input(x.req.Input); rule != "" {
		x.rec.Guardrail = rule
		x.door.writeError(x.w, x.header, http.StatusBadRequest, "guardrail_blocked", "the request was blocked by the guardrail "+rule, "messages")
		x.end(http.StatusBadRequest, model.CallBlocked)
		return false
	}
	if x.grant.GuardAlias != "" && len(x.req.Input) > 0 {
		return g.modelCheck(x, x.req.Input, "the request", "messages")
	}
	return true
}

// callUpstream sends the call to its targets in turn until one answers,
// and passes the answer on as it comes (the pattern guardrails check it on
// the way). A whole answer is held instead when the guard alias is to
// check it first (guardOutput). It sets the ledger's verdict from what
// happened, which the check may still change, and never ends the call:
// its reservation is still to be settled.
func (g *Gateway) callUpstream(x *exchange) bool {
	x.attempts = g.attempts(x.attempts, x.grant)
	if len(x.attempts) == 0 {
		// Every target is a route with no endpoint now (its instances
		// stopped): nothing to call, nor to fall back to.
		for _, u := range x.grant.Upstreams {
			if u.Route != nil && x.rec.Target == "" {
				x.rec.Target = u.Route.Name // the ledger row names the empty route
			}
		}
		x.door.writeError(x.w, x.header, http.StatusServiceUnavailable, "service_unavailable", noEndpoint(x.grant), "")
		x.end(http.StatusServiceUnavailable, model.CallUpstreamError)
		return true
	}
	x.c = call{ep: x.ep, body: x.body, req: x.req, guard: x.grant.Guard, header: x.header, door: x.door, maxOut: x.maxOut}
	if x.r != nil {
		x.c.in = x.r.Header
	}
	to := x.w
	if x.grant.GuardAlias != "" && !x.req.Stream && x.ep != wire.Embeddings {
		x.held = &bufferWriter{header: http.Header{}}
		to = x.held
		x.c.wantText = true
	}
	sent := time.Now()
	x.out = g.proxy.do(x.ctx, to, &x.c, x.attempts)
	x.upstream = time.Since(sent)

	switch out := &x.out; {
	case out.Status == 0 && out.Disconnected:
		x.end(499, model.CallDisconnected)
	case out.Status == 0 && out.Unreachable > 0 && out.Unreachable == len(x.attempts):
		// No target speaks what this call needs (a server tool a chat
		// model cannot run): the caller's to change, and nothing was
		// called.
		x.door.writeError(x.w, x.header, http.StatusBadRequest, "invalid_request_error",
			"no model of alias "+x.grant.Alias.Name+" can take this call: "+strings.Join(out.Tried, "; "), "")
		x.end(http.StatusBadRequest, model.CallUpstreamError)
	case out.Status == 0:
		msg := "every model of alias " + x.grant.Alias.Name + " failed"
		if len(out.Tried) > 0 {
			msg += ": " + strings.Join(out.Tried, "; ")
		}
		x.door.writeError(x.w, x.header, http.StatusBadGateway, "upstream_error", msg, "")
		x.end(http.StatusBadGateway, model.CallUpstreamError)
	case out.Blocked != "":
		x.rec.Guardrail = out.Blocked
		x.end(http.StatusBadRequest, model.CallBlocked)
	case out.Disconnected:
		x.end(499, model.CallDisconnected)
	case out.Err != nil: // a stream cut off by the upstream
		x.end(out.Status, model.CallUpstreamError)
	case out.Status >= 400:
		x.end(out.Status, model.CallUpstreamError)
	default:
		x.end(out.Status, model.CallOK)
	}
	return true
}

// guardOutput has the guard alias check an answer held for it, and passes
// the answer on when it is safe. An answer that is not the model's text
// (an error, or one the patterns blocked) goes on unchecked.
func (g *Gateway) guardOutput(x *exchange) bool {
	if x.held == nil || x.out.Status == 0 {
		return true
	}
	var text string
	if x.out.Status == http.StatusOK && x.out.Blocked == "" {
		text = x.out.Text
	}
	if text != "" && !g.modelCheck(x, []string{text}, "the model's answer", "") {
		return false
	}
	x.held.passOn(x.w, nil)
	return true
}

// record buffers the call's ledger row for the next group commit (see
// meter), journals it where the gateway has a journal, and counts it,
// unless it ended before it was the ledger's. It returns the row's ticket,
// for the caller to wait on before the answer ends (0: nothing to wait
// for: the row is journaled, or was not kept). A guard check's row needs no wait of its
// own: rows are written in order, and the checked call's comes after it.
func (g *Gateway) record(x *exchange) uint64 {
	if x.grant == nil {
		return 0
	}
	rec := x.rec
	rec.Status, rec.Outcome = x.status, x.outcome
	rec.LatencyMicros = g.o.Now().Sub(x.start).Microseconds()
	ticket := g.meter.record(rec)
	g.sendSettlement(x)
	if !x.check {
		g.o.Metrics.call(rec, time.Since(x.began)-x.upstream)
	}
	return ticket
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

// attempts appends to dst the upstreams of a grant in the order to try:
// each model in turn; a route's endpoints healthy first, at most two per
// model.
func (g *Gateway) attempts(dst []Attempt, grant *platform.ModelGrant) []Attempt {
	turn := g.proxy.balance.turn()
	for _, u := range grant.Upstreams {
		up := u.Model.Upstream
		if up == "" {
			up = u.Model.Name
		}
		switch {
		case u.Provider != nil:
			dst = append(dst, Attempt{Model: u.Model.Name, Upstream: up, BaseURL: u.Provider.BaseURL, Key: u.Key,
				Timeout: u.Provider.Timeout, Provider: u.Provider.Name, API: model.APIOr(u.Provider.API), MaxOutput: u.Model.MaxOutputTokens})
		case u.Route != nil:
			eps := g.proxy.balance.order(u.Route.Endpoints, turn)
			for i, ep := range eps {
				if i == 2 {
					break
				}
				dst = append(dst, Attempt{Model: u.Model.Name, Upstream: up, BaseURL: ep, Timeout: u.Route.Timeout, Route: u.Route.Name,
					API: model.APIOr(u.Route.API), MaxOutput: u.Model.MaxOutputTokens})
			}
		}
	}
	return dst
}
