package kernel

import (
	"context"
	"sync"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/store"
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
	// budget is what each budgeted policy of tenant has spent this period.
	budget map[string]int64
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
	if c.tenant != tenant {
		c.budget = nil
	}
	c.tenant, c.estate = tenant, e
	c.mu.Unlock()
}

func (c *requestCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.tenant, c.estate, c.budget = "", nil, nil
	c.mu.Unlock()
}

func (c *requestCache) budgetUsed(tenant string) (map[string]int64, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenant != tenant || c.budget == nil {
		return nil, false
	}
	return c.budget, true
}

func (c *requestCache) putBudgetUsed(tenant string, used map[string]int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenant != tenant {
		c.tenant, c.estate = tenant, nil
	}
	if used == nil {
		used = map[string]int64{}
	}
	c.budget = used
}

// estateCache keeps each tenant's allocation model in memory with the
// version it was read at. Every change bumps the version in the store in
// the same transaction, so a reader checks one number instead of reading
// the model, and never sees one older than the version it checked. The
// models it hands out are shared: callers must not change them (changes go
// through ChangeEstate, which works on a clone).
type estateCache struct {
	mu       sync.Mutex
	byTenant map[string]cachedEstate
}

type cachedEstate struct {
	version int64
	estate  *estate.Estate
	// checked is when the version was last read from the store.
	checked time.Time
}

// forget drops a tenant's cached model, so the next reader loads it.
func (c *estateCache) forget(tenantID string) {
	c.mu.Lock()
	delete(c.byTenant, tenantID)
	c.mu.Unlock()
}

// RecentEstate is CurrentEstate for hot paths that may act on a model up
// to maxAge old: it reads the version from the store at most once per
// maxAge per tenant. Changes made through this replica are seen at once
// (ChangeEstate forgets the cached model); those made through another
// replica within maxAge.
func (k *Kernel) RecentEstate(ctx context.Context, tenantID string, maxAge time.Duration) (*estate.Estate, int64, error) {
	now := time.Now()
	k.estates.mu.Lock()
	c, ok := k.estates.byTenant[tenantID]
	k.estates.mu.Unlock()
	if ok && now.Sub(c.checked) < maxAge {
		return c.estate, c.version, nil
	}
	e, err := k.CurrentEstate(ctx, k.Store, tenantID)
	if err != nil {
		return nil, 0, err
	}
	k.estates.mu.Lock()
	c = k.estates.byTenant[tenantID]
	k.estates.mu.Unlock()
	return e, c.version, nil
}

// CurrentEstate returns a tenant's allocation model as of q's view of the
// store, from memory when the store's version has not moved.
func (k *Kernel) CurrentEstate(ctx context.Context, q store.Queries, tenantID string) (*estate.Estate, error) {
	v, err := q.EstateVersion(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	k.estates.mu.Lock()
	c, ok := k.estates.byTenant[tenantID]
	if ok && c.version == v {
		c.checked = time.Now()
		k.estates.byTenant[tenantID] = c
		k.estates.mu.Unlock()
		return c.estate, nil
	}
	k.estates.mu.Unlock()
	// Read after the version: a change that commits in between makes the
	// model newer than v, and the next reader, seeing v+1, reads again.
	e, err := estate.Load(ctx, q, tenantID)
	if err != nil {
		return nil, err
	}
	k.estates.mu.Lock()
	if k.estates.byTenant == nil {
		k.estates.byTenant = map[string]cachedEstate{}
	}
	k.estates.byTenant[tenantID] = cachedEstate{version: v, estate: e, checked: time.Now()}
	k.estates.mu.Unlock()
	return e, nil
}

// TenantEstate is the caller's tenant's whole estate, loaded once per
// request. It is shared: callers must not change it, nor hand parts of it
// to a caller who may not see them.
func (k *Kernel) TenantEstate(ctx context.Context, p *identity.Principal) (*estate.Estate, error) {
	if e := cacheFrom(ctx).get(p.TenantID); e != nil {
		return e, nil
	}
	e, err := k.CurrentEstate(ctx, k.Store, p.TenantID)
	if err != nil {
		return nil, k.Internal(ctx, err)
	}
	cacheFrom(ctx).put(p.TenantID, e)
	return e, nil
}

// RequestBudgetUsed returns what the request has already read of a
// tenant's budget use (see PutRequestBudgetUsed).
func RequestBudgetUsed(ctx context.Context, tenantID string) (map[string]int64, bool) {
	return cacheFrom(ctx).budgetUsed(tenantID)
}

// PutRequestBudgetUsed keeps a tenant's budget use, per budgeted policy,
// for the rest of the request (until its next write).
func PutRequestBudgetUsed(ctx context.Context, tenantID string, used map[string]int64) {
	cacheFrom(ctx).putBudgetUsed(tenantID, used)
}
