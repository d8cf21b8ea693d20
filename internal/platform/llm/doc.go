// Package llm is the LLM domain of the platform service: the gateway's
// configuration (providers, static routes, models, aliases, token budgets,
// rate limits, entitlements, guardrails), which changes with the estate,
// and the gateway's questions: may this caller make this call, where does
// it go, what does it count against, what has a budget spent, and the
// ledger rows of the calls made.
package llm

import (
	"sync/atomic"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// LLM is the LLM domain. Its caches keep the request path of the gateway
// off the store and the vault.
type LLM struct {
	k       *kernel.Kernel
	keys    providerKeys
	guards  guardCache
	windows windowCache
	aliases aliasIndexes
	// held reads the gateway's limiter for the budgets people read (see
	// SetBudgetReader).
	held atomic.Pointer[BudgetReader]
	// aside reads which route endpoints the gateway set aside (see
	// SetEndpointHealth).
	aside atomic.Pointer[SetAsideReader]
	// instances gives a route's endpoints with its ready serving
	// instances (Deps.RouteEndpoints).
	instances RouteEndpoints
}

// RouteEndpoints returns a static route's endpoints now: its own URLs and
// the base URLs of the app instances that serve it and are ready (the
// apps domain's serving index).
type RouteEndpoints func(tenantID string, r *model.Route) []string

// routeEndpoints is a route's endpoints now (its own without the wiring).
func (s *LLM) routeEndpoints(tenantID string, r *model.Route) []string {
	if s.instances == nil {
		return r.Endpoints
	}
	return s.instances(tenantID, r)
}

// Deps is what the LLM domain needs of the apps domain, given at
// construction (the platform service wires it).
type Deps struct {
	// RouteEndpoints adds the ready app instances to a static route's
	// endpoints; without it, a route has only its own.
	RouteEndpoints RouteEndpoints
}

// New returns the LLM domain over a kernel, wired to what it needs. What
// it reads of the gateway (SetBudgetReader, SetEndpointHealth) comes
// later: the gateway is built over the service.
func New(k *kernel.Kernel, d Deps) *LLM { return &LLM{k: k, instances: d.RouteEndpoints} }
