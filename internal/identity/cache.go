package identity

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The gateway answers thousands of calls a second with the same few
// credentials; checking each one in the store (and verifying a token's
// signature) every time would cost more than the rest of the call.
// AuthenticateCached remembers a successful check for a short while.
//
// What a cached principal may miss is bounded twice: Invalidate, called
// on every change to users, memberships, keys and tenants in this replica
// (the server wires it to those events), drops the whole cache at once;
// and an entry is never used longer than CacheTTL, which bounds what a
// change made through another replica may take to be seen. Failures are
// never cached.

// CacheTTL is how long a cached check is used.
const CacheTTL = 2 * time.Second

// maxCached bounds the cache; when full it is emptied.
const maxCached = 10000

type cachedPrincipal struct {
	p     *Principal
	gen   uint64
	until time.Time
}

type authCache struct {
	gen     atomic.Uint64
	mu      sync.RWMutex
	entries map[[32]byte]cachedPrincipal
}

// Invalidate drops every cached check, so the next request of each
// credential is checked in the store again.
func (a *Authenticator) Invalidate() {
	a.cache.gen.Add(1)
	a.cache.mu.Lock()
	a.cache.entries = nil
	a.cache.mu.Unlock()
}

// AuthenticateCached is Authenticate for hot paths: a credential checked
// within CacheTTL and since the last Invalidate is not checked again. It
// returns a copy the caller may change.
func (a *Authenticator) AuthenticateCached(ctx context.Context, credential string) (*Principal, error) {
	key := sha256.Sum256([]byte(credential))
	now := a.now()
	gen := a.cache.gen.Load()
	a.cache.mu.RLock()
	e, ok := a.cache.entries[key]
	a.cache.mu.RUnlock()
	if ok && e.gen == gen && now.Before(e.until) {
		cp := *e.p
		return &cp, nil
	}
	p, err := a.Authenticate(ctx, credential)
	if err != nil {
		return nil, err
	}
	until := now.Add(CacheTTL)
	if p.Method != MethodAPIKey {
		// A token is not used past its expiry.
		claims := jwt.RegisteredClaims{}
		if _, _, perr := jwt.NewParser().ParseUnverified(credential, &claims); perr == nil && claims.ExpiresAt != nil && claims.ExpiresAt.Before(until) {
			until = claims.ExpiresAt.Time
		}
	}
	a.cache.mu.Lock()
	if a.cache.gen.Load() == gen {
		if a.cache.entries == nil || len(a.cache.entries) >= maxCached {
			a.cache.entries = make(map[[32]byte]cachedPrincipal)
		}
		a.cache.entries[key] = cachedPrincipal{p: p, gen: gen, until: until}
	}
	a.cache.mu.Unlock()
	cp := *p
	return &cp, nil
}
