package llmconf

import "github.com/klique-ai/klique/internal/estate/basis"

// The gateway section of an estate file. Its values are read as
// basis.Number, as the rest of the file's are, so that a value that cannot
// be read is refused with a message about the field rather than a type
// error.

// GatewayDoc describes the LLM gateway: providers and static routes, the
// models behind them with their prices, the aliases applications call,
// entitlements, token budgets, rate limits and the global guardrails.
// Objects are matched by name (budgets by project and period, rate limits
// by scope and name) and described whole, like every object of the file;
// objects the file does not mention stay as they are. Guardrails, when
// present, replace the global guardrails.
type GatewayDoc struct {
	Providers    []ProviderDoc    `yaml:"providers,omitempty"`
	Routes       []RouteDoc       `yaml:"routes,omitempty"`
	Models       []ModelDoc       `yaml:"models,omitempty"`
	Entitlements []EntitlementDoc `yaml:"entitlements,omitempty"`
	Aliases      []AliasDoc       `yaml:"aliases,omitempty"`
	Budgets      []TokenBudgetDoc `yaml:"budgets,omitempty"`
	RateLimits   []RateLimitDoc   `yaml:"rateLimits,omitempty"`
	Guardrails   *GuardrailsDoc   `yaml:"guardrails,omitempty"`
}

// ProviderDoc describes a public model API. KeySecret names the tenant
// vault secret that holds its key; the key itself never appears here.
type ProviderDoc struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	BaseURL     string `yaml:"baseUrl"`
	KeySecret   string `yaml:"keySecret,omitempty"`
	// Timeout is a Go duration such as 60s or 2m.
	Timeout string `yaml:"timeout,omitempty"`
	// API is what it speaks: openai, anthropic or openai-compatible (the
	// default).
	API string `yaml:"api,omitempty"`
}

// RouteDoc describes a static route to self-hosted model servers.
type RouteDoc struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description,omitempty"`
	Endpoints   []string `yaml:"endpoints,omitempty"`
	Timeout     string   `yaml:"timeout,omitempty"`
	// API is what its model servers speak (see ProviderDoc.API).
	API string `yaml:"api,omitempty"`
	// App names a serving app of the catalogue whose ready instances are
	// endpoints of the route too.
	App string `yaml:"app,omitempty"`
}

// ModelDoc describes a model behind a provider or a route. Prices are per
// million tokens, in Currency.
type ModelDoc struct {
	Name            string        `yaml:"name"`
	Provider        string        `yaml:"provider,omitempty"`
	Route           string        `yaml:"route,omitempty"`
	Upstream        string        `yaml:"upstream,omitempty"`
	InputPrice      *basis.Number `yaml:"inputPrice,omitempty"`
	OutputPrice     *basis.Number `yaml:"outputPrice,omitempty"`
	Currency        string        `yaml:"currency,omitempty"`
	MaxOutputTokens *basis.Number `yaml:"maxOutputTokens,omitempty"`
	// MaxImageTokens is the most the model bills for one image (absent:
	// DefaultMaxImageTokens).
	MaxImageTokens *basis.Number `yaml:"maxImageTokens,omitempty"`
}

// EntitlementDoc describes a named right held by groups and users.
type EntitlementDoc struct {
	Name   string   `yaml:"name"`
	Groups []string `yaml:"groups,omitempty"`
	Users  []string `yaml:"users,omitempty"`
}

// AliasDoc describes an alias: its rules, tried in order, and its own
// guardrails.
type AliasDoc struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	// Names are extra names the alias answers to: the vendor model names
	// coding agents ask for (claude-sonnet-4-5).
	Names      []string       `yaml:"names,omitempty"`
	Rules      []AliasRuleDoc `yaml:"rules"`
	Guardrails *GuardrailsDoc `yaml:"guardrails,omitempty"`
}

// AliasRuleDoc is one rule of an alias: conditions on the caller (empty
// lists match everyone), weighted targets and ordered fallbacks.
type AliasRuleDoc struct {
	Groups       []string    `yaml:"groups,omitempty"`
	Projects     []string    `yaml:"projects,omitempty"`
	Entitlements []string    `yaml:"entitlements,omitempty"`
	Targets      []TargetDoc `yaml:"targets"`
	Fallbacks    []string    `yaml:"fallbacks,omitempty"`
}

// TargetDoc is a model and its weight (default 1).
type TargetDoc struct {
	Model  string        `yaml:"model"`
	Weight *basis.Number `yaml:"weight,omitempty"`
}

// TokenBudgetDoc bounds a project's model spend per day, week or month, in
// tokens or in money, and optionally each user's part of it.
type TokenBudgetDoc struct {
	Project       string        `yaml:"project"`
	Period        string        `yaml:"period"`
	Tokens        *basis.Number `yaml:"tokens,omitempty"`
	Money         *basis.Number `yaml:"money,omitempty"`
	PerUserTokens *basis.Number `yaml:"perUserTokens,omitempty"`
	PerUserMoney  *basis.Number `yaml:"perUserMoney,omitempty"`
}

// RateLimitDoc bounds requests and tokens per minute for each user, each
// project or each alias, or for the one named.
type RateLimitDoc struct {
	Scope             string        `yaml:"scope"`
	Name              string        `yaml:"name,omitempty"`
	RequestsPerMinute *basis.Number `yaml:"requestsPerMinute,omitempty"`
	TokensPerMinute   *basis.Number `yaml:"tokensPerMinute,omitempty"`
}

// GuardrailsDoc holds deny and allow patterns (Go regular expressions) and
// an optional guard alias.
type GuardrailsDoc struct {
	Deny       []string `yaml:"deny,omitempty"`
	Allow      []string `yaml:"allow,omitempty"`
	GuardAlias string   `yaml:"guardAlias,omitempty"`
}
