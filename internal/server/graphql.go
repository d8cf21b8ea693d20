package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/klique-ai/klique/graph"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/server/admission"
)

// ComplexityLimit bounds how much one GraphQL operation may ask for, so that
// a deeply nested query cannot tie up the server.
const ComplexityLimit = 2000

// newGraphQL builds the GraphQL handler: explicit transports (no deprecated
// default server), a complexity limit, introspection for signed-in callers
// only, and errors that carry extensions.code and never internal details.
func newGraphQL(resolve graph.Platforms, subs LiveAPI, log *slog.Logger, m *metrics, sockets *liveSockets, limits DocumentLimits, readSlots int) *handler.Server {
	schema := graph.ShareRenders(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Svc: resolve}}))
	registerRenderMetrics(m, schema)
	srv := handler.New(schema)
	srv.AddTransport(subscriptionTransport(subs, log, sockets))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.AddTransport(unsupportedTransport{})
	cache := lru.New[*ast.QueryDocument](1000)
	srv.SetQueryCache(cache)
	srv.SetParserTokenLimit(limits.MaxTokens)
	srv.SetValidationRulesFn(func() *rules.Rules {
		m.graphqlValidated.Inc()
		return rules.NewDefaultRules()
	})
	srv.Use(extension.Introspection{})
	// The persisted-query extension comes first, so that the guard sees the
	// query text a hash stands for; the guard runs before gqlgen parses and
	// validates the query, and stopWhenGone before the complexity limit.
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.Use(documentGuard{limits: limits, cache: cache, refused: func(reason string) {
		m.graphqlRefused.WithLabelValues(reason).Inc()
	}})
	srv.Use(stopWhenGone{})
	srv.Use(countedComplexity{ComplexityLimit: extension.FixedComplexityLimit(ComplexityLimit), computed: m.graphqlComplexity})
	srv.Use(strictNumbers{schema: schema.Schema()})
	srv.AroundRootFields(guardRootFields)
	srv.AroundOperations(countOperations(m))
	// Inside the count, so that a query's time includes its wait.
	reads := admission.New(readSlots)
	reads.Register(m.registry)
	srv.AroundOperations(reads.Middleware)
	srv.SetErrorPresenter(presentError(log))
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		log.ErrorContext(ctx, "graphql resolver panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()), "request_id", identity.RequestIDFrom(ctx))
		return errors.New("internal error")
	})
	return srv
}

// registerRenderMetrics exports how subscription updates are rendered:
// executed for a subscriber, or shared as another subscriber's bytes, and
// how many renderings are held for sharing, so that the saving shows.
func registerRenderMetrics(m *metrics, schema *graph.SharedRenders) {
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "klique_subscription_updates_rendered_total",
			Help: "Subscription updates rendered by executing the subscriber's selection.",
		}, func() float64 { r, _ := schema.Stats(); return float64(r) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "klique_subscription_updates_shared_total",
			Help: "Subscription updates sent as the bytes another subscriber's rendering of the same update and operation left.",
		}, func() float64 { _, n := schema.Stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "klique_subscription_updates_held",
			Help: "Subscription updates whose renderings are kept for other subscribers (dropped when the update is collected).",
		}, func() float64 { return float64(schema.Held()) }),
	)
}

// guardRootFields runs around every root field. Introspection needs a
// signed-in caller: DisableIntrospection (countOperations) stops it for
// anonymous callers; refusing the root fields here first gives them an
// UNAUTHENTICATED error instead of an internal one.
func guardRootFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	// A request that has ended (the client hung up) starts no more
	// root fields: nobody will read what they would compute.
	if ctx.Err() != nil {
		graphql.AddError(ctx, cancelledError())
		return graphql.Null
	}
	if _, ok := identity.PrincipalFrom(ctx); !ok {
		if f := graphql.GetRootFieldContext(ctx); f != nil && (f.Field.Name == "__schema" || f.Field.Name == "__type") {
			graphql.AddError(ctx, &platform.Error{Code: platform.CodeUnauthenticated,
				Message: "sign in to read the schema: send an API key or access token as 'Authorization: Bearer <credential>'"})
			return graphql.Null
		}
	}
	return next(ctx)
}

// countOperations counts and times every operation by kind and outcome,
// and turns introspection off for anonymous callers.
func countOperations(m *metrics) graphql.OperationMiddleware {
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		oc := graphql.GetOperationContext(ctx)
		if _, ok := identity.PrincipalFrom(ctx); !ok {
			oc.DisableIntrospection = true
		}
		start := time.Now()
		h := next(ctx)
		if oc.Operation != nil && oc.Operation.Operation == ast.Subscription {
			// A subscription's handler is called once per update, for as
			// long as it lives: it is counted by its first response (an
			// update, or the error that refused it), and its updates are
			// not timed against its start.
			var counted atomic.Bool
			return func(ctx context.Context) *graphql.Response {
				resp := h(ctx)
				if !counted.Load() && counted.CompareAndSwap(false, true) {
					outcome := "ok"
					if resp != nil && len(resp.Errors) > 0 {
						outcome = "error"
					}
					m.graphqlOps.WithLabelValues(string(ast.Subscription), outcome).Inc()
				}
				return resp
			}
		}
		return func(ctx context.Context) *graphql.Response {
			resp := h(ctx)
			kind := "unknown"
			if oc.Operation != nil {
				kind = string(oc.Operation.Operation)
			}
			outcome := "ok"
			if resp != nil && len(resp.Errors) > 0 {
				outcome = "error"
			}
			m.graphqlOps.WithLabelValues(kind, outcome).Inc()
			m.graphqlSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds())
			return resp
		}
	}
}

// presentError makes every error carry extensions.code: a platform error
// its own code and message, parse, validation and coercion errors as
// gqlgen words them, and anything else an INTERNAL error with the request
// id, logged here, whose details never reach the caller.
func presentError(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gerr := graphql.DefaultErrorPresenter(ctx, err)
		var pe *platform.Error
		if errors.As(err, &pe) {
			gerr.Message = pe.Message
			ext := map[string]any{"code": string(pe.Code)}
			if len(pe.Problems) > 1 {
				ext["problems"] = pe.Problems
			}
			if pe.Reason != "" {
				ext["reason"] = pe.Reason
			}
			gerr.Extensions = ext
			return gerr
		}
		if errors.Is(err, identity.ErrUnauthenticated) {
			gerr.Message = err.Error()
			gerr.Extensions = map[string]any{"code": string(platform.CodeUnauthenticated)}
			return gerr
		}
		var ge *gqlerror.Error
		if errors.As(err, &ge) && ge.Extensions != nil {
			// Parse and validation errors already say what is wrong.
			return gerr
		}
		if errors.As(err, &ge) && ge.Err == nil && ge.Rule != "" {
			return gerr
		}
		if errors.Is(err, context.Canceled) {
			gerr.Message = "request cancelled"
			gerr.Extensions = map[string]any{"code": "CANCELLED"}
			return gerr
		}
		if ge, ok := err.(*gqlerror.Error); ok && ge.Err != nil {
			// A variable a scalar could not read (a StringMap that is not
			// an object, a Time that is not RFC 3339): gqlgen hands it
			// over wrapped on the argument's path, where a resolver's own
			// failure comes bare. The scalar's message says what to change.
			gerr.Message = ge.Err.Error()
			gerr.Extensions = map[string]any{"code": string(platform.CodeInvalid)}
			return gerr
		}
		if ge != nil && ge.Err == nil {
			// Argument coercion errors from gqlgen ("cannot be null", a bad
			// enum value) say what is wrong as they are.
			if gerr.Extensions == nil {
				gerr.Extensions = map[string]any{"code": string(platform.CodeInvalid)}
			}
			return gerr
		}
		log.ErrorContext(ctx, "graphql resolver failed", "err", err, "path", gerr.Path.String(), "request_id", identity.RequestIDFrom(ctx))
		gerr.Message = platform.PublicMessage(err)
		gerr.Extensions = map[string]any{"code": string(platform.CodeInternal), "requestId": identity.RequestIDFrom(ctx)}
		return gerr
	}
}

// WebSocket close codes for a refused connection_init, as graphql-ws
// clients expect them.
const (
	closeUnauthorized = 4401
	closeForbidden    = 4403
	closeInternal     = 4500
)

// subscriptionTransport serves subscriptions over WebSocket with gqlgen's
// transport on github.com/coder/websocket: graphql-transport-ws, and the
// legacy graphql-ws subprotocol. Browsers cannot set headers on a
// WebSocket, so the credential comes in connection_init; the live domain
// checks it (and the user's connection cap) and closes with 4401 or
// 4403 when it does not hold.
func subscriptionTransport(subs LiveAPI, log *slog.Logger, sockets *liveSockets) transport.Websocket {
	return transport.Websocket{
		Implementation:        deadlineFreeWebsocket{sockets: sockets},
		InitTimeout:           10 * time.Second,
		KeepAlivePingInterval: 15 * time.Second,
		InitFunc: func(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
			sub, release, err := subs.OpenSubscriptions(ctx, initCredential(payload))
			if err != nil {
				code := closeInternal
				var pe *platform.Error
				if errors.As(err, &pe) {
					switch pe.Code {
					case platform.CodeUnauthenticated:
						code = closeUnauthorized
					case platform.CodeForbidden:
						code = closeForbidden
					}
				}
				if code == closeInternal {
					log.ErrorContext(ctx, "open a subscription connection", "err", err, "request_id", identity.RequestIDFrom(ctx))
					err = errors.New("could not check the credential right now; try again")
				}
				ctx = transport.WithWebsocketCloseCode(ctx, code)
				return transport.AppendCloseReason(ctx, initCloseReason(code, err)), nil, err
			}
			// The request's context ends when the connection does.
			context.AfterFunc(ctx, release)
			return sub, nil, nil
		},
	}
}

// maxCloseReason is the most bytes a WebSocket close reason may hold (RFC
// 6455: a control frame carries 125 bytes, two of them the code). A longer
// reason would make the close frame itself fail to go out.
const maxCloseReason = 123

// initCloseReason is the close reason of a refused connection_init. Many
// clients show only the close event (a browser's CloseEvent.reason), not
// the connection_error message before it, so the reason says what was
// wrong and what to change, instead of gqlgen's bare "terminated".
func initCloseReason(code int, err error) string {
	var reason string
	switch code {
	case closeUnauthorized:
		reason = "unauthenticated: " + err.Error()
		if msg := err.Error(); !strings.Contains(msg, ";") && !strings.Contains(msg, "connection_init") {
			// The authenticator's reasons ("unknown credential") say what
			// is wrong, not what to send instead.
			reason += `; send {"Authorization": "Bearer <API key or access token>"} in connection_init`
		}
	case closeForbidden:
		reason = "forbidden: " + err.Error()
	default:
		reason = "unavailable: " + err.Error()
	}
	if len(reason) <= maxCloseReason {
		return reason
	}
	// Cut at a rune boundary, leaving room for the ellipsis (3 bytes).
	cut := maxCloseReason - len("…")
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + "…"
}

// initCredential reads the credential of a connection_init payload:
// "Authorization" (or "authorization") as "Bearer <credential>" or bare,
// or "token".
func initCredential(p transport.InitPayload) string {
	v := strings.TrimSpace(p.Authorization())
	if cred, err := identity.ParseAuthorization(v); err == nil {
		v = cred
	}
	if v == "" {
		v = strings.TrimSpace(p.GetString("token"))
	}
	return v
}

// deadlineFreeWebsocket accepts WebSockets with the server's read deadline
// lifted: http.Server's ReadTimeout stays on a hijacked connection and
// would cut every subscription after a minute.
type deadlineFreeWebsocket struct {
	transport.CoderWebsocketImplementation
	// sockets keeps the connection until it closes, for shutdown.
	sockets *liveSockets
}

func (d deadlineFreeWebsocket) Accept(w http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	c, err := d.CoderWebsocketImplementation.Accept(w, r, o)
	if err != nil || d.sockets == nil {
		return c, err
	}
	return d.sockets.track(c), nil
}

// unsupportedTransport answers what no other transport takes (a POST that is
// not JSON, a PUT) with an error that carries a code, instead of gqlgen's
// bare "transport not supported". It must be added last.
type unsupportedTransport struct{}

func (unsupportedTransport) Supports(*http.Request) bool { return true }

func (unsupportedTransport) Do(w http.ResponseWriter, r *http.Request, _ graphql.GraphExecutor) {
	if r.Method == http.MethodPost {
		writeError(w, r, http.StatusUnsupportedMediaType, string(platform.CodeInvalid),
			"send GraphQL requests as JSON with 'Content-Type: application/json'")
		return
	}
	w.Header().Set("Allow", "GET, POST, OPTIONS")
	writeError(w, r, http.StatusMethodNotAllowed, string(platform.CodeInvalid),
		fmt.Sprintf("GraphQL takes GET or POST requests, not %s", r.Method))
}

// strictNumbers refuses variables that give an Int or a Float as a JSON
// string ("4" for 4). The GraphQL spec requires that, and gqlparser's
// variable coercion lets numeric strings through.
type strictNumbers struct{ schema *ast.Schema }

func (strictNumbers) ExtensionName() string                   { return "StrictNumbers" }
func (strictNumbers) Validate(graphql.ExecutableSchema) error { return nil }

func (s strictNumbers) MutateOperationContext(_ context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	if rc.Operation == nil {
		return nil
	}
	for _, def := range rc.Operation.VariableDefinitions {
		if err := s.check(def.Type, rc.Variables[def.Variable], "$"+def.Variable); err != nil {
			return err
		}
	}
	return nil
}

func (s strictNumbers) check(t *ast.Type, v any, where string) *gqlerror.Error {
	if t == nil || v == nil {
		return nil
	}
	if t.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			return s.check(t.Elem, v, where) // one value given for a list
		}
		for i, e := range list {
			if err := s.check(t.Elem, e, fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	switch t.NamedType {
	case "Int", "Float":
		if str, ok := v.(string); ok {
			err := gqlerror.Errorf("%s must be a number (%s), not the string %q", where, t.NamedType, str)
			errcode.Set(err, errcode.ValidationFailed)
			return err
		}
		return nil
	}
	def := s.schema.Types[t.NamedType]
	obj, ok := v.(map[string]any)
	if def == nil || def.Kind != ast.InputObject || !ok {
		return nil
	}
	for _, f := range def.Fields {
		if err := s.check(f.Type, obj[f.Name], where+"."+f.Name); err != nil {
			return err
		}
	}
	return nil
}

// bridgeEvents carries the event bus between replicas over Redis when
// KLIQUE_REDIS_URL is set, so that a subscriber connected to one replica
// sees what another replica's engine decided. Like the gateway, the replica
// does not refuse to start when Redis does not answer: its events stay in
// process, it says so, and it keeps trying. It returns how to stop.
func bridgeEvents(ctx context.Context, cfg *config.Config, log *slog.Logger, bus *events.Bus) (func(), error) {
	if cfg.RedisURL == "" {
		return func() {}, nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("KLIQUE_REDIS_URL: %w", err)
	}
	client := redis.NewClient(opts)
	log = log.With("component", "events")
	connect := func(ctx context.Context) *events.Bridge {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		b, err := events.BridgeRedis(cctx, bus, client, events.RedisChannel, log)
		if err != nil {
			log.Warn("events stay on this replica until Redis answers: subscribers here will not see other replicas' changes", "err", err)
			return nil
		}
		return b
	}
	var mu sync.Mutex
	b := connect(ctx)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			mu.Lock()
			ok := b != nil
			mu.Unlock()
			if ok {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Second):
			}
			if nb := connect(context.Background()); nb != nil {
				log.Info("events cross replicas over Redis again")
				mu.Lock()
				b = nb
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			mu.Lock()
			if b != nil {
				_ = b.Close()
			}
			mu.Unlock()
			_ = client.Close()
		})
	}, nil
}
