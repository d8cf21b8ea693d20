package llm

import (
	"sync"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
)

// aliasIndexes keeps, per tenant, the map from every name a call may ask
// for (an alias's own and its extra names) to the alias, built once for
// each estate the kernel loads: the estates it hands out are shared and
// never changed, so the index is good for as long as the estate is the
// current one, and a call resolves its model name with one lookup.
type aliasIndexes struct {
	mu       sync.Mutex
	byTenant map[string]aliasIndex
}

type aliasIndex struct {
	e      *estate.Estate
	byName map[string]*model.Alias
}

// lookup returns the alias a call asking for name means, or nil.
func (c *aliasIndexes) lookup(tenantID string, e *estate.Estate, name string) *model.Alias {
	c.mu.Lock()
	ix, ok := c.byTenant[tenantID]
	c.mu.Unlock()
	if !ok || ix.e != e {
		ix = aliasIndex{e: e, byName: llmconf.AliasIndex(&e.Gateway)}
		c.mu.Lock()
		if c.byTenant == nil {
			c.byTenant = map[string]aliasIndex{}
		}
		c.byTenant[tenantID] = ix
		c.mu.Unlock()
	}
	return ix.byName[name]
}
