// Package llm is the LLM domain of the platform service: the gateway's
// configuration (providers, static routes, models, aliases, token budgets,
// rate limits, entitlements, guardrails), which changes with the estate,
// and the gateway's questions: may this caller make this call, where does
// it go, what does it count against, what has a budget spent, and the
// ledger rows of the calls made.
package llm

import (
	"sync/atomic"

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
}

// New returns the LLM domain over a kernel.
func New(k *kernel.Kernel) *LLM { return &LLM{k: k} }
