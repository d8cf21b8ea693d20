package router

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
)

// Instance is an app instance as the router needs it: enough to say why
// it cannot be opened, and where to reach it when it can.
type Instance struct {
	ID    string
	Name  string
	State string
	// Reason is why it is in its state (a failure, a stop).
	Reason string
	Target appnet.Target
	// KeepPrefix: the app is told its own path (its run line names
	// /apps/{id}, as JupyterLab's --ServerApp.base_url=/apps/{instance}/
	// does), so it is forwarded /apps/{id}/… whole rather than stripped.
	KeepPrefix bool
}

// namesOwnPath reports whether an app's run line names the instance's
// path, so the app expects it on every request.
func namesOwnPath(id string, lines ...string) bool {
	p := "/apps/" + id
	for _, l := range lines {
		if strings.Contains(l, p) {
			return true
		}
	}
	return false
}

// Ready reports whether the instance answers: its worker reported its
// health path answering and gave its address.
func (in *Instance) Ready() bool { return in.State == "ready" && in.Target.Address != "" }

// Resolver decides, for the holder of a credential, which instance a path
// names. It is where access is checked: the platform service (embedded
// in `klique serve`) or the control plane's API (`klique router`), never
// the router itself.
type Resolver interface {
	// Instance returns the instance id as the credential's holder may
	// open it, whatever its state; an *Error otherwise.
	Instance(ctx context.Context, credential, id string) (*Instance, error)
	// Route returns the ready instances behind a static route that the
	// credential's holder may open (none: an empty list); an *Error when
	// the route is unknown or the credential refused.
	Route(ctx context.Context, credential, route string) ([]*Instance, error)
	// CookieCredential turns the credential of a sign-in into the one
	// the router keeps in the browser's cookie: an API key is exchanged
	// for an access token (a key never sits in a cookie), a token is kept
	// as it is. It returns when the kept credential expires.
	CookieCredential(ctx context.Context, credential string) (string, time.Time, error)
}

// Error is a refusal the router answers with its status and message.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Refusals, with the codes the other REST endpoints use.
func unauthenticated(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "UNAUTHENTICATED", Message: msg}
}
func notFound(msg string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: msg}
}
func unavailable(msg string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: msg}
}

// cache keeps what a resolver answered for a credential and a path for a
// few seconds, so that a stream of calls through the router costs one
// check per period, not one per call. Only answers that let a call
// through are kept: a refusal, and an instance that is not ready, are
// asked again every time. This is also why a revoked credential keeps
// working for at most the cache's TTL.
type cache struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[cacheKey]cacheEntry
}

type cacheKey struct {
	cred [32]byte // the credential's SHA-256: the cache holds no secret
	kind byte
	id   string
}

type cacheEntry struct {
	until time.Time
	ins   []*Instance
}

// maxCacheEntries bounds the cache; past it, expired entries are dropped,
// and if that is not enough, all of them.
const maxCacheEntries = 10000

func newCache(ttl time.Duration, now func() time.Time) *cache {
	if now == nil {
		now = time.Now
	}
	return &cache{ttl: ttl, now: now, m: map[cacheKey]cacheEntry{}}
}

func keyOf(cred string, kind byte, id string) cacheKey {
	return cacheKey{cred: sha256.Sum256([]byte(cred)), kind: kind, id: id}
}

func (c *cache) get(k cacheKey) ([]*Instance, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || !c.now().Before(e.until) {
		return nil, false
	}
	return e.ins, true
}

func (c *cache) put(k cacheKey, ins []*Instance) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCacheEntries {
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxCacheEntries {
			clear(c.m)
		}
	}
	c.m[k] = cacheEntry{until: now.Add(c.ttl), ins: ins}
}

// notReady is the 503 for an instance that cannot be opened now: what
// state it is in and what to do.
func notReady(in *Instance) *Error {
	name := fmt.Sprintf("app instance '%s' (%s)", in.Name, in.ID)
	switch in.State {
	case "waiting":
		return unavailable(name + " is waiting for GPUs on its compute resource (state waiting); it opens once it is placed, started and its health path answers: try again later, and see its state with 'klique app open " + in.ID + "'")
	case "placed", "running":
		return unavailable(name + " is starting (state " + in.State + "): its worker has not yet seen its health path answer; try again in a few seconds")
	case "stopped", "failed":
		msg := name + " has ended (state " + in.State + ")"
		if in.Reason != "" {
			msg += ": " + in.Reason
		}
		return unavailable(msg + "; launch the app again with 'klique app launch'")
	}
	return unavailable(name + " is not ready (state " + in.State + "); try again later")
}
