// Package server is the HTTP face of the control plane: it authenticates each
// request, puts the caller's identity in the request context, and hands the
// request to the GraphQL API or one of the small REST endpoints. Everything
// below it reads identity from the context, never from headers.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/router"
	"github.com/klique-ai/klique/internal/tunnel"
)

// Deps are what the HTTP layer needs.
type Deps struct {
	// Platform is the platform, one interface per domain (ServicePlatforms).
	Platform     Platforms
	Auth         *identity.Authenticator
	Signer       *identity.Signer
	Logger       *slog.Logger
	MaxBodyBytes int64
	// ReadSlots is how many GraphQL queries execute at once (0: the
	// default; see package admission).
	ReadSlots int
	// MetricsToken, when set, lets /metrics on this handler answer callers
	// that send it as a bearer credential; without it /metrics is not
	// served here (see config.Config.MetricsListen).
	MetricsToken string
	// Tunnels holds the workers' tunnels to this replica (a new registry
	// when nil).
	Tunnels *tunnel.Registry
	// AppTunnels are the workers' tunnels the embedded router reaches app
	// instances through (nil: it reaches them directly only); AppActivity
	// is told their traffic, for the idle limits.
	AppTunnels  appnet.Tunnels
	AppActivity *appnet.Activity
	// AppOwn are this replica's listeners, which the router never dials
	// (the router's address rule; nil: none known).
	AppOwn *appnet.Own
	// AppHosts says whether app instances are served on host names of
	// their own (KLIQUE_APPS_DOMAIN) or by path; PublicOrigin is the
	// dashboard's origin, the only one that may sign a browser in to an
	// instance's host.
	AppHosts     model.AppHosts
	PublicOrigin string
}

// Handler is the control plane's HTTP handler.
type Handler struct {
	d       Deps
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	// sockets are the open subscription WebSockets.
	sockets *liveSockets
	// streams are the routes whose bodies the platform bounds itself
	// (artifact uploads), not KLIQUE_MAX_BODY_BYTES.
	streams map[string]bool
	tunnels *tunnel.Registry
	// apps is the embedded router, which serves instances' own hosts.
	apps *router.Router
}

// NewHandler builds the routes.
func NewHandler(d Deps) *Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Tunnels == nil {
		d.Tunnels = tunnel.New(tunnel.Options{Log: d.Logger.With("component", "tunnel")})
	}
	if d.AppTunnels == nil {
		// The embedded router reaches instances through this replica's
		// tunnels, as the gateway does.
		d.AppTunnels = d.Tunnels
	}
	h := &Handler{d: d, log: d.Logger, metrics: newMetrics(), mux: http.NewServeMux(), sockets: newLiveSockets(), tunnels: d.Tunnels,
		streams: map[string]bool{}}
	gql := newGraphQL(d.Platform.Graph, d.Platform.Live, d.Logger, h.metrics, h.sockets, DefaultDocumentLimits, d.ReadSlots)

	h.route("/graphql", "graphql", h.authenticated(identity.ChannelGraphQL, gql))
	h.route("GET /graphiql", "graphiql", playground.Handler("Klique GraphQL", "/graphql"))
	h.route("POST /api/v1/auth/token", "auth_token", h.authenticated(identity.ChannelCLI, http.HandlerFunc(h.issueToken)))
	h.route("GET /api/v1/auth/sso", "auth_sso", http.HandlerFunc(h.ssoConfig))
	h.route("POST /api/v1/auth/sso/token", "auth_sso_token", http.HandlerFunc(h.ssoToken))
	h.agentRoutes()
	h.artifactRoutes()
	h.mountRouter()
	h.autoscalerRoutes()
	h.sdkRoutes()
	h.route("GET /api/v1/usage.csv", "usage_csv", h.authenticated(identity.ChannelAPI, http.HandlerFunc(h.usageCSV)))
	h.route("GET /.well-known/jwks.json", "jwks", http.HandlerFunc(h.jwks))
	h.route("GET /healthz", "healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	}))
	h.route("GET /readyz", "readyz", http.HandlerFunc(h.ready))
	h.route("GET /metrics", "metrics", http.HandlerFunc(h.guardedMetrics))
	h.route("/", "not_found", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no such endpoint %s %s; the API is at /graphql", r.Method, r.URL.Path))
	}))
	return h
}

// MetricsHandler serves the Prometheus metrics without authentication, for
// the separate metrics listener.
func (h *Handler) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(h.metrics.registry, promhttp.HandlerOpts{})
}

// guardedMetrics serves /metrics on the main listener only to callers that
// send the metrics token: the metrics' labels name every tenant's model
// aliases, and the main listener faces every tenant's users.
func (h *Handler) guardedMetrics(w http.ResponseWriter, r *http.Request) {
	if h.d.MetricsToken == "" {
		writeError(w, r, http.StatusNotFound, "NOT_FOUND",
			"metrics are not served on this address: set KLIQUE_METRICS_LISTEN to serve them on a separate one, or KLIQUE_METRICS_TOKEN to serve them here to 'Authorization: Bearer <token>'")
		return
	}
	cred, ok := bearer(r)
	if !ok || subtle.ConstantTimeCompare([]byte(cred), []byte(h.d.MetricsToken)) != 1 {
		writeError(w, r, http.StatusUnauthorized, "UNAUTHENTICATED", "send the metrics token (KLIQUE_METRICS_TOKEN) as 'Authorization: Bearer <token>'")
		return
	}
	h.MetricsHandler().ServeHTTP(w, r)
}

// Mux lets the other parts of the server (the gateway, the worker API, MCP) add
// their routes with the same middleware.
func (h *Handler) Mux() *http.ServeMux { return h.mux }

// route registers a handler wrapped in the common middleware.
func (h *Handler) route(pattern, name string, next http.Handler) {
	h.mux.Handle(pattern, h.common(name, next))
}

// routeStream registers a route whose handler streams a body the
// platform bounds itself, past KLIQUE_MAX_BODY_BYTES.
func (h *Handler) routeStream(pattern, name string, next http.Handler) {
	h.streams[name] = true
	h.route(pattern, name, next)
}

// ServeHTTP routes a request: an app instance's own host goes to the
// router whole (no API, no dashboard answers there), anything else to the
// routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.apps != nil && h.apps.ForInstanceHost(r) {
		h.apps.ServeHTTP(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// common gives every request an id, a body limit, a log line, metrics, a
// per-request cache, and turns a panic into a 500 without a stack trace.
func (h *Handler) common(route string, next http.Handler) http.Handler {
	stream := h.streams[route]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// client ends when the client goes away (or the handler returns).
		client := r.Context()
		id := r.Header.Get("X-Request-Id")
		if !requestIDRE.MatchString(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		ctx, caller := identity.WithRequestCaller(identity.WithRequestID(r.Context(), id))
		ctx = platform.WithRequestCache(ctx)
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, ctx: ctx}

		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.ErrorContext(ctx, "request panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()), "request_id", id)
				if !sw.wrote {
					writeError(sw, r, http.StatusInternalServerError, "INTERNAL", "internal error; the server log has the details (request "+id+")")
				}
			}
			elapsed := time.Since(start)
			if sw.status != http.StatusSwitchingProtocols && errors.Is(client.Err(), context.Canceled) {
				// The client went away before the handler finished:
				// whatever it wrote (often a 500 for the cancelled work)
				// reached nobody, and the failure is not the server's.
				sw.status = statusClientClosed
			}
			h.metrics.httpRequests.WithLabelValues(route, fmt.Sprint(sw.status)).Inc()
			h.metrics.httpSeconds.WithLabelValues(route).Observe(elapsed.Seconds())
			level := slog.LevelDebug
			if sw.status >= 500 {
				level = slog.LevelWarn
			}
			// The gateway authenticates its callers itself and notes them
			// (identity.NoteCaller); the other routes' principal is in sw.ctx.
			user, project := caller.Caller()
			if p, ok := identity.PrincipalFrom(sw.ctx); ok && user == "" {
				user = p.UserName
			}
			attrs := []any{"method", r.Method, "path", r.URL.Path, "status", sw.status,
				"duration_ms", elapsed.Milliseconds(), "request_id", id, "user", user}
			if project != "" {
				attrs = append(attrs, "project", project)
			}
			h.log.Log(ctx, level, "http request", attrs...)
		}()

		if max := h.d.MaxBodyBytes; max > 0 && r.Body != nil && !stream {
			if r.ContentLength > max {
				writeError(sw, r, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE",
					fmt.Sprintf("the request body is %d bytes, more than the %d allowed", r.ContentLength, max))
				return
			}
			if r.ContentLength < 0 {
				// A body of unknown length (chunked) is read here, up to the
				// limit, so that one too large is refused with 413 like one
				// that declares its length, rather than failing later in
				// whichever handler reads it.
				b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
				if err != nil {
					writeError(sw, r, http.StatusBadRequest, "BAD_USER_INPUT", "could not read the request body")
					return
				}
				if int64(len(b)) > max {
					writeError(sw, r, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE",
						fmt.Sprintf("the request body is more than the %d bytes allowed", max))
					return
				}
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
			r.Body = http.MaxBytesReader(sw, r.Body, max)
		}
		next.ServeHTTP(sw, r)
	})
}

// authenticated resolves the bearer credential, if any, into a principal in
// the request context. A request without a credential goes on without one
// (the platform service refuses what needs one); a bad credential is
// refused here with 401.
func (h *Handler) authenticated(channel identity.Channel, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		// A local copy: assigning to channel itself would change the
		// channel of every later request through this handler.
		ch := channel
		if ch == identity.ChannelGraphQL && r.Header.Get("X-Klique-Client") == "cli" {
			ch = identity.ChannelCLI
		}
		ctx = identity.WithChannel(ctx, ch)
		// The Idempotency-Key header keys the creating operations of the
		// request whose input names no key of its own.
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			ctx = platform.WithIdempotencyKey(ctx, k)
		}
		cred, ok := bearer(r)
		if !ok {
			writeError(w, r, http.StatusUnauthorized, "UNAUTHENTICATED", "the Authorization header must be 'Bearer <API key or access token>'")
			return
		}
		if cred != "" {
			// Cached for at most identity.CacheTTL, and dropped at once by
			// every change to keys, users, memberships and tenants here
			// (the kernel's identity-change hook): a list costs a fifth
			// less without the three store reads of an API key.
			p, err := h.d.Auth.AuthenticateCached(ctx, cred)
			switch {
			case errors.Is(err, identity.ErrUnauthenticated):
				h.metrics.authFailures.WithLabelValues(err.Error()).Inc()
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				writeError(w, r, http.StatusUnauthorized, "UNAUTHENTICATED", err.Error())
				return
			case err != nil:
				h.log.ErrorContext(ctx, "authentication failed", "err", err, "request_id", identity.RequestIDFrom(ctx))
				writeError(w, r, http.StatusServiceUnavailable, "UNAVAILABLE", "could not check the credential right now; try again")
				return
			}
			ctx = identity.WithCredential(identity.WithPrincipal(ctx, p), cred)
			if sw, ok := w.(*statusWriter); ok {
				sw.ctx = ctx
			}
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearer returns the credential of an Authorization header. ok is false for
// a header that is present but not a bearer credential (or an empty one).
func bearer(r *http.Request) (string, bool) {
	cred, err := identity.ParseAuthorization(r.Header.Get("Authorization"))
	return cred, err == nil
}

// tokenResponse follows the shape of an OAuth 2.0 token response.
type tokenResponse struct {
	AccessToken string    `json:"access_token"`
	TokenType   string    `json:"token_type"`
	ExpiresIn   int64     `json:"expires_in"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// issueToken exchanges the caller's API key for a short-lived access token.
func (h *Handler) issueToken(w http.ResponseWriter, r *http.Request) {
	tok, exp, err := h.d.Platform.Access.IssueToken(r.Context())
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, tokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(time.Until(exp).Seconds()), ExpiresAt: exp.UTC()})
}

func (h *Handler) jwks(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(h.d.Signer.JWKS())
}

func (h *Handler) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.d.Platform.Ready.Ping(ctx); err != nil {
		h.log.WarnContext(ctx, "readiness check failed", "err", err)
		writeError(w, r, http.StatusServiceUnavailable, "UNAVAILABLE", "the store does not answer")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ready\n"))
}

// statusClientClosed is nginx's 499 (client closed request), recorded for a
// request whose client went away before its answer: not a server error.
const statusClientClosed = 499

// writePlatformError maps a platform error to a status code.
func writePlatformError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		writeError(w, r, statusClientClosed, "CANCELLED", "request cancelled")
		return
	}
	code := platform.ErrorCode(err)
	status := map[platform.Code]int{
		platform.CodeUnauthenticated: http.StatusUnauthorized,
		platform.CodeForbidden:       http.StatusForbidden,
		platform.CodeInvalid:         http.StatusBadRequest,
		platform.CodeNotFound:        http.StatusNotFound,
		platform.CodeConflict:        http.StatusConflict,
		platform.CodeUnavailable:     http.StatusServiceUnavailable,
	}[code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	writeError(w, r, status, string(code), platform.PublicMessage(err))
}

// writeError answers in the shape the route's clients expect: GraphQL's
// errors list on /graphql, {"error": {...}} elsewhere.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		// Every 401 must say how to authenticate (RFC 9110, section 15.5.2).
		w.Header().Set("WWW-Authenticate", `Bearer realm="klique"`)
	}
	if strings.HasPrefix(r.URL.Path, "/graphql") {
		writeJSON(w, status, map[string]any{"errors": []any{map[string]any{"message": message, "extensions": map[string]any{"code": code}}}})
		return
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// statusWriter records the status code for logs and metrics, and the
// context with the principal for the log line.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	ctx    context.Context
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush passes streaming through (server-sent events, long polls).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
