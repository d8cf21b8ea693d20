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
	// instances (see SetRouteEndpoints).
	instances RouteEndpoints
}

// RouteEndpoints returns a static route's endpoints now: its own URLs and
// the base URLs of the app instances that serve it and are ready (the
// apps domain's serving index).
type RouteEndpoints func(tenantID string, r *model.Route) []string

// SetRouteEndpoints wires the ready app instances into the routes' endpoints;
// the facade calls it once, before the service is used.
func (s *LLM) SetRouteEndpoints(f RouteEndpoints) { s.instances = f }

// routeEndpoints is a route's endpoints now (its own without the wiring).
func (s *LLM) routeEndpoints(tenantID string, r *model.Route) []string {
	if s.instances == nil {
		return r.Endpoints
	}
	return s.instances(tenantID, r)
}

// New returns the LLM domain over a kernel.
func New(k *kernel.Kernel) *LLM { return &LLM{k: k} }
