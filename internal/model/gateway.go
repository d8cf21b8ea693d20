package model

import "time"

// The LLM gateway's configuration: where model calls can go (providers and
// static routes), the models there with their prices, the aliases
// applications call with the rules IT sets behind them, token budgets, rate
// limits and guardrails. A tenant's gateway configuration is one value,
// kept with its estate: read whole, changed whole, versioned together.
type Gateway struct {
	Providers  []*Provider
	Routes     []*Route
	Models     []*LLMModel
	Aliases    []*Alias
	Budgets    []*TokenBudget
	RateLimits []*RateLimit
	// Entitlements grant groups and users the right to rules that ask for
	// them (a frontier model for some teams).
	Entitlements []*Entitlement
	// Guardrails is the global policy, applied to every alias before the
	// alias's own.
	Guardrails Guardrails
}

// Entitlement is a named right held by groups (their members) and users.
type Entitlement struct {
	Name   string
	Groups []string
	Users  []string
}

// Provider is a public model API: OpenAI, or any OpenAI-compatible provider
// by base URL. Its key stays in the tenant's vault; the gateway swaps the
// caller's identity for it and never logs or returns it.
type Provider struct {
	Name        string
	Description string
	// BaseURL is the API's base, such as https://api.openai.com/v1.
	BaseURL string
	// KeySecret names the tenant vault secret holding the API key.
	KeySecret string
	// Timeout bounds one upstream attempt (default 60 s); a stream's
	// timeout is to its first byte.
	Timeout time.Duration
	// API is what the provider speaks (APIOpenAI, APIAnthropic or, when
	// empty, APIOpenAICompatible): a call it speaks the door of passes
	// through; another is translated, or refused when it cannot be.
	API string
}

// Route is a static route: a fixed, named address for self-hosted
// OpenAI-compatible model servers (vLLM, SGLang, NIM, llama.cpp) that
// outlives any one endpoint. The gateway balances across the healthy ones.
type Route struct {
	Name        string
	Description string
	// Endpoints are base URLs, such as http://10.0.3.17:8000/v1.
	Endpoints []string
	Timeout   time.Duration
	// API is what the route's model servers speak (see Provider.API).
	API string
	// App names a serving app of the catalogue: the route's endpoints are
	// then also its instances that are ready (and those launched with this
	// route), reached through the router, added when they report ready and
	// dropped when they stop or fail their health checks.
	App string
}

// The APIs a provider or a route speaks. A model server that speaks
// OpenAI's chat completions but not the rest of its API (vLLM, SGLang,
// llama.cpp, NIM) is openai-compatible: the default, as most routes are.
const (
	// APIOpenAI is OpenAI's own API: chat completions, completions,
	// embeddings and responses.
	APIOpenAI = "openai"
	// APIAnthropic is Anthropic's Messages API.
	APIAnthropic = "anthropic"
	// APIOpenAICompatible is chat completions, completions and embeddings.
	APIOpenAICompatible = "openai-compatible"
)

// APIs lists the values API takes, for messages that name them.
var APIs = []string{APIOpenAI, APIAnthropic, APIOpenAICompatible}

// APIOr returns api, or the default (openai-compatible) when it is empty.
func APIOr(api string) string {
	if api == "" {
		return APIOpenAICompatible
	}
	return api
}

// LLMModel is a model served by a provider or a route, under the name the
// upstream knows it by, with its prices.
type LLMModel struct {
	// Name is how applications' rules refer to it, unique in the tenant.
	Name string
	// Upstream is the model id sent upstream (default: Name).
	Upstream string
	// Provider or Route serves it (exactly one).
	Provider string
	Route    string
	// Prices per million tokens, in millionths of Currency: the provider's
	// price, or an internal rate for a self-hosted model.
	InputPriceMicros  int64
	OutputPriceMicros int64
	Currency          string
	// MaxOutputTokens bounds the reservation of a call that sets no
	// max_tokens (default 4096), and what the upstream is asked for.
	MaxOutputTokens int64
	// MaxImageTokens is the most the model bills for one image: what an
	// image counts toward a call's reservation when its size is not known
	// (0: the default, 4096).
	MaxImageTokens int64
}

// Alias is the name applications call ("chat", "embed"). Its rules are
// tried in order; the first whose conditions the caller meets decides.
type Alias struct {
	Name        string
	Description string
	// Names are the extra names the alias answers to, such as the vendor
	// model names coding agents ask for (claude-sonnet-4-5, gpt-5-codex),
	// so that an admin can send an agent's calls to the model the
	// organisation chose without changing the agent. A call by one of them
	// is a call to the alias, governed and recorded under its Name.
	Names      []string
	Rules      []AliasRule
	Guardrails Guardrails
}

// AliasRule sends the callers it matches to weighted targets, with ordered
// fallbacks when the chosen target errs, times out or answers 5xx.
type AliasRule struct {
	// Conditions: empty lists match everyone; otherwise the caller must be
	// in one of the groups, use one of the projects, and hold one of the
	// entitlements (groups' entitlements), for every list that is set.
	Groups       []string
	Projects     []string
	Entitlements []string
	// Targets are model names with weights for load balancing.
	Targets []Target
	// Fallbacks are model names tried in order after the chosen target.
	Fallbacks []string
}

// Target is a model with its share of a rule's traffic.
type Target struct {
	Model  string
	Weight int
}

// TokenBudget bounds a project's model spend per calendar period (UTC, as
// time budgets: unused budget does not roll over), in tokens or in money,
// and optionally each user's share of it.
type TokenBudget struct {
	Project string
	Period  BudgetPeriod
	// Tokens (input + output) or Micros (millionths of Currency): one is
	// set.
	Tokens int64
	Micros int64
	// PerUserTokens / PerUserMicros bound each user inside the project.
	PerUserTokens int64
	PerUserMicros int64
}

// RateLimitScope is what a rate limit counts per.
type RateLimitScope string

const (
	RateLimitUser    RateLimitScope = "user"
	RateLimitProject RateLimitScope = "project"
	RateLimitAlias   RateLimitScope = "alias"
)

// RateLimit bounds requests and tokens per minute for each user, each
// project or each alias; Name picks one of them ("" for each one).
type RateLimit struct {
	Scope             RateLimitScope
	Name              string
	RequestsPerMinute int64
	TokensPerMinute   int64
}

// Guardrails are regular expressions applied to a call's input at the edge
// and to its output (incrementally for streams). A deny pattern that
// matches blocks the call; when allow patterns are set, input must match
// one of them. GuardAlias, when set, is a model-based check: the gateway
// asks that alias whether the text is safe and blocks on its verdict.
type Guardrails struct {
	Deny       []string
	Allow      []string
	GuardAlias string
}
