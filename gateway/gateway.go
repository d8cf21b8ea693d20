// Package gateway is the OpenAI-compatible LLM gateway: one endpoint for
// every model, self-hosted or public. A call names an alias; the platform
// service decides who may call it for which project, where it goes and
// what it counts against; the gateway checks the guardrails, reserves the
// call's budgets and rate limits, sends it upstream (falling back to the
// next target on errors, timeouts and 5xx), streams the answer back,
// settles the reservation to what was used, and records the call on the
// ledger before the answer's last bytes go out. Those are the stages of a call (path, in serve.go), in that
// order; the door a call comes in by (door.go) decodes its request and
// writes its errors.
//
// The request path reads only the fields it needs and passes the body
// through (gateway/wire); credentials and the estate come from memory;
// settling happens in the background, and ledger writes are group commits
// that the answer's end waits for (see meter).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// Authority is what the gateway asks the platform service.
type Authority interface {
	AuthorizeModelCall(ctx context.Context, alias, project string, now time.Time) (*platform.ModelGrant, error)
	ModelSpend(ctx context.Context, q platform.SpendQuery) (tokens, micros int64, err error)
	RecordModelCalls(ctx context.Context, calls []*model.ModelCall) error
	ModelAliases(ctx context.Context, project string) ([]*model.Alias, error)
}

// Authenticator turns a bearer credential into a principal.
type Authenticator interface {
	AuthenticateCached(ctx context.Context, credential string) (*identity.Principal, error)
}

// Options configure a Gateway.
type Options struct {
	Service Authority
	Auth    Authenticator
	Limiter limits.Limiter
	Log     *slog.Logger
	// Client's transport sends upstream calls (default: a pooled
	// transport tuned for many calls to a few hosts). Only the transport
	// is used: redirects are not followed and the client's Timeout does
	// not apply (every attempt carries its own).
	Client *http.Client
	// MaxBody bounds a request body (default 8 MiB).
	MaxBody int64
	// ReservationTTL is how long a reservation may stay unsettled before it
	// lapses (default 15 minutes: longer than any call).
	ReservationTTL time.Duration
	Now            func() time.Time
	// Metrics, when set, counts calls and tokens.
	Metrics *Metrics
	// LedgerWait bounds how long an answer waits for its call's ledger
	// row to be written (default 10 s). An answer's last bytes go out once
	// its row is on the ledger, so that a gateway killed at any moment has
	// every call it answered recorded; a store that takes no writes for
	// this long lets answers go before their rows (which stay buffered and
	// are written when it takes writes again), rather than stall them all.
	LedgerWait time.Duration
	// Journal, when set, is the directory of the ledger's write-ahead
	// journal: an answer's last bytes go out once its row is appended
	// there, not once the ledger has it, and the next start writes what
	// the ledger lacks (see package journal). Without it, answers wait for the
	// ledger (up to LedgerWait).
	Journal string
	// Apps reaches the app instances that serve static routes (their
	// endpoints under appnet.InstanceDomain) through the default
	// transport; nil: such endpoints cannot be reached.
	Apps AppDialer
}

// Gateway serves /v1.
type Gateway struct {
	o     Options
	proxy *proxy
	meter *meter
	// seeds makes one ledger reading and seed of a budget window at an
	// epoch, however many calls found it due at once (see seed).
	seeds singleflight.Group
	// settlements takes settlements off the request path.
	settlements chan limits.Settlement
	wg          sync.WaitGroup
	closed      chan struct{}
	once        sync.Once
}

// New returns a gateway; Close flushes what it has not yet recorded.
func New(o Options) *Gateway {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 8 << 20
	}
	if o.ReservationTTL <= 0 {
		o.ReservationTTL = 15 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LedgerWait <= 0 {
		o.LedgerWait = 10 * time.Second
	}
	var transport http.RoundTripper = http.DefaultTransport
	switch {
	case o.Client == nil:
		transport = newTransport(o.Apps)
	case o.Client.Transport != nil:
		transport = o.Client.Transport
	}
	g := &Gateway{o: o, proxy: &proxy{transport: transport, balance: newBalancer()},
		meter: newMeter(o.Service, o.Log, o.LedgerWait, o.Journal), settlements: make(chan limits.Settlement, 4096), closed: make(chan struct{})}
	for i := 0; i < settlers; i++ {
		g.wg.Add(1)
		go g.settler()
	}
	// The rows an earlier process journaled reach the ledger before this
	// one serves (a store that takes no writes for LedgerWait leaves them
	// queued, and journaled, for later).
	g.meter.drain(context.Background())
	return g
}

const (
	// settlers settle calls in the background. Each gathers what is
	// waiting, and what comes within settleLinger, into one batch: one
	// round trip to Redis for many calls instead of one each, which on a
	// busy gateway saves more CPU (its own and Redis's) than anything else
	// about settling. A settlement waits a couple of milliseconds longer;
	// nothing waits for it.
	settlers     = 2
	settleBatch  = 128
	settleLinger = 2 * time.Millisecond
)

// newTransport is the default upstream transport: kept-alive connections
// enough for every concurrent call to a route endpoint to reuse one rather
// than dial (and leave a socket in TIME_WAIT), and no gzip: the gateway
// passes bodies through and would only have to inflate them.
func newTransport(apps AppDialer) *http.Transport {
	return &http.Transport{
		Proxy:               instanceProxy,
		DialContext:         instanceDial(apps, (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
	}
}

// Close settles and records everything pending.
func (g *Gateway) Close(ctx context.Context) error {
	g.once.Do(func() { close(g.closed) })
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.meter.close(ctx)
}

func (g *Gateway) settler() {
	defer g.wg.Done()
	batch := make([]limits.Settlement, 0, settleBatch)
	linger := time.NewTimer(settleLinger)
	linger.Stop()
	for {
		select {
		case s := <-g.settlements:
			batch = append(batch[:0], s)
		case <-g.closed:
			for {
				batch = batch[:0]
			drain:
				for len(batch) < settleBatch {
					select {
					case s := <-g.settlements:
						batch = append(batch, s)
					default:
						break drain
					}
				}
				if len(batch) == 0 {
					return
				}
				g.doSettle(batch)
			}
		}
		linger.Reset(settleLinger)
	gather:
		for len(batch) < settleBatch {
			select {
			case s := <-g.settlements:
				batch = append(batch, s)
			case <-linger.C:
				break gather
			case <-g.closed:
				break gather
			}
		}
		linger.Stop()
		g.doSettle(batch)
		clear(batch) // let the requests go
	}
}

func (g *Gateway) doSettle(batch []limits.Settlement) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := limits.SettleAll(ctx, g.o.Limiter, batch)
	for _, err := range errs {
		if err != nil {
			// The reservation lapses at its expiry and gives its estimate
			// back.
			g.o.Log.Warn("gateway: settling a call's limits failed; its reservation will lapse", "err", err)
			return // once per batch: the rest failed the same way
		}
	}
}

// ServeHTTP serves the OpenAI-compatible API under /v1.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/v1/")
	switch {
	case r.Method == http.MethodGet && (path == "models" || path == "models/"):
		g.models(w, r)
	case r.Method == http.MethodPost && (path == string(wire.Chat) || path == string(wire.Completions) || path == string(wire.Embeddings)):
		g.serve(w, r, openAI{}, wire.Endpoint(path))
	case r.Method == http.MethodPost && path == string(wire.Messages):
		g.serve(w, r, messagesDoor{}, wire.Messages)
	case r.Method == http.MethodPost && path == "messages/count_tokens":
		g.countTokens(w, r)
	case path == string(wire.Messages) || path == "messages/count_tokens":
		writeMessagesError(w, nil, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s: POST a Messages request", r.Method, r.URL.Path))
	case r.Method == http.MethodPost && path == string(wire.Responses):
		g.serve(w, r, responsesDoor{}, wire.Responses)
	case path == string(wire.Responses):
		writeError(w, nil, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s: the gateway stores no responses to get or delete", r.Method, r.URL.Path), "")
	case path == "models" || path == string(wire.Chat) || path == string(wire.Completions) || path == string(wire.Embeddings):
		writeError(w, nil, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path), "")
	default:
		writeError(w, nil, http.StatusNotFound, "unknown_url", fmt.Sprintf("unknown endpoint %s %s: the gateway serves POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/messages, /v1/messages/count_tokens, /v1/responses and GET /v1/models", r.Method, r.URL.Path), "")
	}
}

// caller reads the bearer credential and returns the request's context
// with the caller in it; when there is none, or it is not valid, it
// answers the request through the door d.
func (g *Gateway) caller(w http.ResponseWriter, r *http.Request, d door) (context.Context, bool) {
	cred, err := identity.ParseAuthorization(r.Header.Get("Authorization"))
	if cred == "" && err == nil {
		// Anthropic's SDKs send their api_key as x-api-key.
		cred = strings.TrimSpace(r.Header.Get("X-Api-Key"))
	}
	if err != nil || cred == "" {
		how := "send your Klique API key or access token as 'Authorization: Bearer <key>' (the OpenAI SDKs do this with api_key)"
		if _, ok := d.(messagesDoor); ok {
			how = "send your Klique API key or access token as 'x-api-key: <key>' (the Anthropic SDKs' api_key, Claude Code's ANTHROPIC_API_KEY) or 'Authorization: Bearer <key>' (their auth_token, ANTHROPIC_AUTH_TOKEN)"
		}
		d.writeError(w, nil, http.StatusUnauthorized, "invalid_api_key", how, "")
		return nil, false
	}
	p, err := g.o.Auth.AuthenticateCached(r.Context(), cred)
	if err != nil {
		if errors.Is(err, identity.ErrUnauthenticated) {
			d.writeError(w, nil, http.StatusUnauthorized, "invalid_api_key", "the API key or token is not valid: "+err.Error(), "")
		} else {
			g.o.Log.Error("gateway: authentication failed", "err", err)
			d.writeError(w, nil, http.StatusServiceUnavailable, "service_unavailable", "authentication is unavailable; try again", "")
		}
		return nil, false
	}
	ctx := identity.WithChannel(identity.WithPrincipal(r.Context(), p), identity.ChannelGateway)
	// The request's log line names the caller, and the project the call
	// is for: the credential's, else the one asked for (resolve names the
	// one the platform chose once it has).
	project := r.Header.Get("X-Klique-Project")
	if p.ProjectID != "" {
		project = p.ProjectID
	}
	identity.NoteCaller(ctx, p.UserName, project)
	return ctx, true
}

// models lists the aliases the caller may call, with their extra names.
func (g *Gateway) models(w http.ResponseWriter, r *http.Request) {
	ctx, ok := g.caller(w, r, openAI{})
	if !ok {
		return
	}
	aliases, err := g.o.Service.ModelAliases(ctx, r.Header.Get("X-Klique-Project"))
	if err != nil {
		g.platformError(w, nil, openAI{}, err)
		return
	}
	var sb strings.Builder
	sb.WriteString(`{"object":"list","data":[`)
	// Each alias is a model, and so is each of its extra names (a coding
	// agent checks that the model it is set to ask for is listed).
	first := true
	entry := func(id string) {
		if !first {
			sb.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&sb, `{"id":%s,"object":"model","created":0,"owned_by":"klique"}`, strconv.Quote(id))
	}
	for _, a := range aliases {
		entry(a.Name)
		for _, n := range a.Names {
			entry(n)
		}
	}
	sb.WriteString("]}")
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, sb.String())
}

// platformError answers a refusal of the platform service through the
// door d.
func (g *Gateway) platformError(w http.ResponseWriter, h http.Header, d door, err error) {
	msg := platform.PublicMessage(err)
	switch platform.ErrorCode(err) {
	case platform.CodeUnauthenticated:
		d.writeError(w, h, http.StatusUnauthorized, "invalid_api_key", msg, "")
	case platform.CodeForbidden:
		code, param := "model_not_allowed", "model"
		if strings.Contains(msg, "scoped to project") {
			code, param = "project_not_allowed", ""
		}
		d.writeError(w, h, http.StatusForbidden, code, msg, param)
	case platform.CodeNotFound:
		code, param := "model_not_found", "model"
		if strings.Contains(msg, "project") {
			code, param = "project_not_found", ""
		}
		d.writeError(w, h, http.StatusNotFound, code, msg, param)
	case platform.CodeInvalid:
		d.writeError(w, h, http.StatusBadRequest, "invalid_request_error", msg, "")
	case platform.CodeUnavailable:
		d.writeError(w, h, http.StatusServiceUnavailable, "service_unavailable", msg, "")
	default:
		g.o.Log.Error("gateway: the platform service failed", "err", err)
		d.writeError(w, h, http.StatusInternalServerError, "internal_error", "internal error; the server log has the details", "")
	}
}
