package platform

import (
	"context"
	"sync"

	"github.com/klique-ai/klique/internal/estate"
)

// A request cache keeps the allocation model loaded once per request: a
// GraphQL query that lists fifty pools with their GPU classes and profiles
// resolves every reference from one load instead of fifty. Any write through
// the service empties it, so a mutation's payload is read fresh.

type cacheKey struct{}

type requestCache struct {
	mu     sync.Mutex
	tenant string
	estate *estate.Estate
}

// WithRequestCache returns a context whose requests to the service share one
// load of the allocation model until the next write.
func WithRequestCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, cacheKey{}, &requestCache{})
}

func cacheFrom(ctx context.Context) *requestCache {
	c, _ := ctx.Value(cacheKey{}).(*requestCache)
	return c
}

func (c *requestCache) get(tenant string) *estate.Estate {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenant != tenant {
		return nil
	}
	return c.estate
}

func (c *requestCache) put(tenant string, e *estate.Estate) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.tenant, c.estate = tenant, e
	c.mu.Unlock()
}

func (c *requestCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.tenant, c.estate = "", nil
	c.mu.Unlock()
}
