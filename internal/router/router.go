// Package router serves app instances at stable addresses: each instance
// at /apps/{id}/… and each static route at /routes/{route}/…, as an
// authenticated reverse proxy (HTTP, WebSocket upgrades and streams). It
// runs embedded in `klique serve` and as `klique router` at a site.
//
// The router decides nothing about access: a Resolver (the platform
// service, or the control plane's API) says which instance a credential
// may open. It strips the caller's credentials before forwarding, reaches
// instances through an appnet.Reacher (directly, or through the worker's
// tunnel), and notes the traffic both ways for the session idle limits.
package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// CookieName is the router's cookie: the credential of a browser signed
// in to one instance (or route), scoped to its path.
const CookieName = "klique_app"

// SignInPath is the sign-in hop under an instance's (or route's) path:
// POST a credential there, get the cookie, and be sent to the app.
const SignInPath = "/_klique/signin"

// DefaultCacheTTL is how long the router keeps a resolver's answer: a
// revoked key or a stopped instance is noticed within this time.
const DefaultCacheTTL = 5 * time.Second

// Config is what a router needs.
type Config struct {
	Resolver Resolver
	// Reacher opens connections to instances.
	Reacher appnet.Reacher
	// Activity is told the bytes that pass to and from each instance (nil:
	// not noted).
	Activity *appnet.Activity
	Log      *slog.Logger
	// CacheTTL bounds how long an answer of the Resolver is reused
	// (0: DefaultCacheTTL; negative: never).
	CacheTTL time.Duration
	// SignInOrigins are origins besides the router's own from which a
	// browser may post a sign-in (the control plane's dashboard, for a
	// router at a site). On an instance's own host only these may sign a
	// browser in.
	SignInOrigins []string
	// Hosts says whether each instance is served on a host name of its
	// own (hosts.go) or by path on the router's origin (Domain empty).
	Hosts model.AppHosts
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Router is the reverse proxy. It is an http.Handler for /apps/ and
// /routes/.
type Router struct {
	cfg   Config
	log   *slog.Logger
	cache *cache
	proxy *httputil.ReverseProxy
	// targets maps the made-up host of an instance's attempt (see hostOf)
	// to where it is: the transport's pool keeps connections per host,
	// and its dialer finds the target here.
	targets sync.Map
	next    atomic.Uint64
}

// New returns a router.
func New(cfg Config) *Router {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	rt := &Router{cfg: cfg, log: cfg.Log, cache: newCache(cfg.CacheTTL, cfg.Now)}
	tr := &http.Transport{
		DialContext:           rt.dial,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// The app speaks HTTP/1.1 on its port; no proxy from the
		// environment applies to a dial the router makes itself.
		ForceAttemptHTTP2: false,
	}
	rt.proxy = &httputil.ReverseProxy{
		Rewrite:        rt.rewrite,
		Transport:      tr,
		FlushInterval:  -1, // SSE and token streams arrive event by event
		ErrorHandler:   rt.proxyError,
		ModifyResponse: sandbox,
		ErrorLog:       slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug),
	}
	return rt
}

// Standalone returns the handler of `klique router`: a router at a site
// that resolves through the control plane's API and reaches instances
// directly on the site's network, within the address rule the control
// plane decided for each (own: the router's own listeners, never dialled).
func Standalone(rc RemoteConfig, cacheTTL time.Duration, activity *appnet.Activity, own *appnet.Own) (http.Handler, error) {
	remote, err := NewRemote(rc)
	if err != nil {
		return nil, err
	}
	rt := New(Config{Resolver: remote, Reacher: &appnet.Auto{PreferDirect: true, Direct: &appnet.Direct{Own: own}}, Activity: activity, Log: rc.Log,
		CacheTTL: cacheTTL, SignInOrigins: []string{remote.base}})
	mux := http.NewServeMux()
	mux.Handle("/apps/", rt)
	mux.Handle("/routes/", rt)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, notFound(fmt.Sprintf("no such address %s on this router: app instances are at /apps/{id}/ and static routes at /routes/{route}/", r.URL.Path)))
	})
	return mux, nil
}

// hop is one proxied request's destination, from ServeHTTP to rewrite.
type hop struct {
	host   string // the made-up host of the instance's attempt
	prefix string // /apps/{id} or /routes/{route}, stripped ("" on an instance's host)
	// label names the destination in messages and the cache: /apps/{id}
	// or /routes/{route}.
	label string
	// sandbox: the answer is served on the control plane's origin to
	// programs; a browser must not run it there (hosts.go).
	sandbox bool
	// own replaces prefix: /apps/{id}, for an app that expects its path
	// (KeepPrefix); "" otherwise.
	own string
}

type hopKey struct{}

// ServeHTTP serves /apps/{id}/… and /routes/{route}/…, and, with
// Config.Hosts, every path of an instance's own host.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id, ok := rt.cfg.Hosts.InstanceOf(r.Host); ok {
		rt.serveHost(w, r, id)
		return
	}
	kind, name, rest, ok := split(r.URL.Path)
	if !ok {
		writeError(w, r, notFound(fmt.Sprintf("no such address %s: app instances are at /apps/{id}/ and static routes at /routes/{route}/", r.URL.Path)))
		return
	}
	prefix := "/" + kind + "/" + name
	byHost := rt.cfg.Hosts.ByHost()
	if byHost && kind == "apps" {
		rt.redirectToHost(w, r, name, rest)
		return
	}
	if rest == "" {
		// The app's relative links need the trailing slash.
		u := *r.URL
		u.Path, u.RawPath = prefix+"/", ""
		http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
		return
	}
	cookie := CookieName
	if byHost {
		// A route on the control plane's origin serves programs only.
		cookie = ""
		if rest == SignInPath {
			writeError(w, r, &Error{Status: http.StatusForbidden, Code: "FORBIDDEN",
				Message: "a route is served to programs only on this control plane (send 'Authorization: Bearer <API key or access token>'); browsers open app instances on their own hosts from the dashboard's Apps page"})
			return
		}
	}
	if rest == SignInPath {
		rt.signIn(w, r, kind, name, prefix)
		return
	}
	cred, err := credential(r, cookie)
	if err != nil {
		writeError(w, r, err)
		return
	}
	in, err := rt.resolve(r.Context(), cred, kind, name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	hp := &hop{prefix: prefix, label: prefix, sandbox: byHost}
	if in.KeepPrefix {
		hp.own = "/apps/" + in.ID
	}
	rt.forward(w, r, in, hp)
}

// forward proxies a request to an instance by way of hp.
func (rt *Router) forward(w http.ResponseWriter, r *http.Request, in *Instance, hp *hop) {
	// An upload or a stream to an app may outlast the server's read
	// timeout, which is meant for API calls.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	hp.host = hostOf(in.Target)
	rt.targets.Store(hp.host, in.Target)
	ctx := context.WithValue(r.Context(), hopKey{}, hp)
	rt.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// split reads /apps/{id}/rest or /routes/{route}/rest; rest keeps its
// leading slash ("" when the path ends at the name).
func split(path string) (kind, name, rest string, ok bool) {
	for _, k := range []string{"apps", "routes"} {
		if s, found := strings.CutPrefix(path, "/"+k+"/"); found {
			name, rest, _ = strings.Cut(s, "/")
			if name == "" {
				return "", "", "", false
			}
			if _, has := strings.CutPrefix(s, name+"/"); has {
				rest = "/" + rest
			}
			return k, name, rest, true
		}
	}
	return "", "", "", false
}

// credential is the caller's: a bearer credential, an x-api-key header
// (as Anthropic's SDKs send it), or the router's cookie of that name
// (none when cookie is "").
func credential(r *http.Request, cookie string) (string, error) {
	cred, err := identity.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return "", unauthenticated("the Authorization header must be 'Bearer <API key or access token>'")
	}
	if cred == "" {
		cred = strings.TrimSpace(r.Header.Get("X-Api-Key"))
	}
	if cred == "" && cookie != "" {
		if c, err := r.Cookie(cookie); err == nil {
			cred = c.Value
		}
	}
	if cred == "" {
		return "", unauthenticated("sign in: send 'Authorization: Bearer <API key or access token>', or open the instance from the dashboard's Apps page (its link signs your browser in)")
	}
	return cred, nil
}

// resolve finds the instance to forward to: the one named, or one of a
// route's, in turn.
func (rt *Router) resolve(ctx context.Context, cred, kind, name string) (*Instance, error) {
	k := keyOf(cred, kind[0], name)
	ins, ok := rt.cache.get(k)
	if !ok {
		if kind == "apps" {
			in, err := rt.cfg.Resolver.Instance(ctx, cred, name)
			if err != nil {
				return nil, err
			}
			if !in.Ready() {
				return nil, notReady(in)
			}
			ins = []*Instance{in}
		} else {
			var err error
			if ins, err = rt.cfg.Resolver.Route(ctx, cred, name); err != nil {
				return nil, err
			}
			if len(ins) == 0 {
				return nil, unavailable(fmt.Sprintf("route '%s' has no running endpoint: no instance behind it is ready; launch one with 'klique app launch NAME --route %s', or wait for one to start", name, name))
			}
		}
		rt.cache.put(k, ins)
	}
	if len(ins) == 1 {
		return ins[0], nil
	}
	return ins[rt.next.Add(1)%uint64(len(ins))], nil
}

// hostOf names an instance's attempt at its address for the transport:
// connections are pooled per attempt, so none outlives a restart.
func hostOf(t appnet.Target) string {
	sum := sha256.Sum256([]byte(t.TaskID + "\x00" + strconv.Itoa(t.Attempt) + "\x00" + t.Address + "\x00" + t.WorkerID))
	return hex.EncodeToString(sum[:10]) + ".app.klique"
}

// rewrite makes the outbound request: the instance's path without the
// router's prefix (or with /apps/{id} for an app that expects it), the caller's Host kept (apps such as Jupyter and
// code-server compare it with a WebSocket's Origin), X-Forwarded-*
// set, and the caller's credentials removed.
func (rt *Router) rewrite(pr *httputil.ProxyRequest) {
	h := pr.In.Context().Value(hopKey{}).(*hop)
	out := pr.Out
	out.URL.Scheme, out.URL.Host = "http", h.host
	out.URL.Path = h.own + strings.TrimPrefix(pr.In.URL.Path, h.prefix)
	if out.URL.RawPath != "" {
		out.URL.RawPath = strings.TrimPrefix(pr.In.URL.RawPath, h.prefix)
		if out.URL.RawPath == "" || out.URL.RawPath[0] != '/' {
			out.URL.RawPath = ""
		} else {
			out.URL.RawPath = h.own + out.URL.RawPath
		}
	}
	out.Host = pr.In.Host
	pr.SetXForwarded()
	if h.prefix != "" {
		out.Header.Set("X-Forwarded-Prefix", h.prefix)
	}
	stripCredentials(out.Header)
}

// stripCredentials removes what identifies the caller to Klique: the
// app gets none of it.
func stripCredentials(h http.Header) {
	h.Del("Authorization")
	h.Del("Proxy-Authorization")
	h.Del("X-Api-Key")
	cookies := h.Values("Cookie")
	if len(cookies) == 0 {
		return
	}
	var kept []string
	for _, line := range cookies {
		for _, part := range strings.Split(line, ";") {
			part = strings.TrimSpace(part)
			if name, _, _ := strings.Cut(part, "="); part != "" && strings.TrimSpace(name) != CookieName && strings.TrimSpace(name) != HostCookieName {
				kept = append(kept, part)
			}
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// dial opens a connection to the instance a made-up host names, counting
// the bytes both ways for the idle limits.
func (rt *Router) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	v, ok := rt.targets.Load(host)
	if !ok {
		return nil, fmt.Errorf("router: no instance behind %s", host)
	}
	t := v.(appnet.Target)
	c, err := rt.cfg.Reacher.Reach(ctx, t)
	if err != nil {
		return nil, err
	}
	if rt.cfg.Activity == nil {
		return c, nil
	}
	return &countedConn{Conn: c, task: t.TaskID, a: rt.cfg.Activity}, nil
}

// countedConn notes every byte read from and written to an instance. The
// same connection carries a pooled HTTP exchange or a hijacked WebSocket,
// so both are counted in one place.
type countedConn struct {
	net.Conn
	task string
	a    *appnet.Activity
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.a.Used(c.task, int64(n))
	}
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.a.Used(c.task, int64(n))
	}
	return n, err
}

// proxyError answers when the instance could not be reached or broke off.
func (rt *Router) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the caller went away
	}
	h, _ := r.Context().Value(hopKey{}).(*hop)
	prefix := ""
	if h != nil {
		prefix = h.label
		rt.cache.dropPrefix(prefix)
	}
	var refused *appnet.RefusedError
	if errors.As(err, &refused) {
		rt.log.WarnContext(r.Context(), "router: the address rule refused an app instance's address", "path", prefix, "reason", refused.Reason)
		writeError(w, r, &Error{Status: http.StatusBadGateway, Code: "BAD_GATEWAY",
			Message: fmt.Sprintf("the app at %s/ cannot be reached: %v", prefix, refused)})
		return
	}
	rt.log.WarnContext(r.Context(), "router: the app instance did not answer", "path", prefix, "err", err)
	writeError(w, r, &Error{Status: http.StatusBadGateway, Code: "BAD_GATEWAY",
		Message: fmt.Sprintf("the app at %s/ did not answer (%v); it may be restarting: try again in a few seconds", prefix, err)})
}

// dropPrefix forgets every cached answer for a path, after its instance
// failed to answer: the next call asks the resolver again.
func (c *cache) dropPrefix(prefix string) {
	kind, name, _, ok := split(prefix + "/")
	if !ok {
		return
	}
	c.mu.Lock()
	for k := range c.m {
		if k.kind == kind[0] && k.id == name {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}

// writeError answers a refusal as JSON, the shape of the other REST
// endpoints: {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = unavailable("could not check the request right now; try again")
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="klique"`)
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
}

// signIn is the browser's hop: POST a credential (form field "token", or
// the Authorization header) to {prefix}/_klique/signin; the router checks
// that its holder may open the instance, keeps an access token in a cookie
// scoped to the path (HttpOnly, SameSite=Lax, Secure over TLS), and sends
// the browser to the app with 303.
func (rt *Router) signIn(w http.ResponseWriter, r *http.Request, kind, name, prefix string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "BAD_USER_INPUT",
			Message: "sign in with POST " + prefix + SignInPath + " and the form field 'token' (an access token or API key); the dashboard's Apps page does this when you follow an instance's link"})
		return
	}
	if !rt.originAllowed(r) {
		writeError(w, r, &Error{Status: http.StatusForbidden, Code: "FORBIDDEN",
			Message: "a sign-in must come from this router's own pages or the dashboard; open the instance from the dashboard's Apps page"})
		return
	}
	cred, err := identity.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil || cred == "" {
		cred = strings.TrimSpace(r.PostFormValue("token"))
	}
	if cred == "" {
		writeError(w, r, unauthenticated("send the credential to sign in with as the form field 'token' (an access token or API key)"))
		return
	}
	// The holder must be allowed to open it now; a route with no ready
	// instance is fine (the cookie is for later calls).
	kept, expires, err := rt.checkSignIn(r.Context(), cred, kind, name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: kept, Path: prefix + "/", Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
	http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
}

// originAllowed: a browser's sign-in must come from the router's own
// origin or one configured (the dashboard's), so another site cannot sign
// a visitor in to an instance of its choosing. Programs send no Origin.
func (rt *Router) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	return u.Host == r.Host || rt.signInOriginListed(o)
}
