package model

import "time"

// ModelCall is one call through the LLM gateway on the usage ledger: who
// made it, for which project and group, which alias and model answered,
// the tokens it used, what they cost, how long it took and how it ended.
// Its ID is the gateway's request id, so recording a call twice keeps one
// row.
type ModelCall struct {
	ID          string
	TenantID    string
	At          time.Time
	UserID      string
	UserName    string
	ProjectID   string
	ProjectName string
	GroupID     string
	GroupName   string
	// Endpoint is the operation: chat/completions, completions or
	// embeddings.
	Endpoint string
	Alias    string
	// Model is the configured model that answered ("" when none did);
	// Target the provider or route it was reached through.
	Model  string
	Target string
	Stream bool
	// InputTokens and OutputTokens are what the upstream reported (or, for
	// a stream cut short, what the gateway counted).
	InputTokens  int64
	OutputTokens int64
	// CostMicros is in millionths of Currency.
	CostMicros int64
	Currency   string
	// LatencyMicros is from the request's arrival to its last byte.
	LatencyMicros int64
	// Status is the HTTP status the caller got.
	Status int
	// Outcome is ok, upstream_error, blocked, rate_limited, over_budget,
	// disconnected or refused.
	Outcome string
	// Guardrail names the rule that blocked the call, if one did.
	Guardrail string
}

// Outcomes of a model call.
const (
	CallOK            = "ok"
	CallUpstreamError = "upstream_error"
	CallBlocked       = "blocked"
	CallRateLimited   = "rate_limited"
	CallOverBudget    = "over_budget"
	CallDisconnected  = "disconnected"
)
