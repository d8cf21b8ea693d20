package llm

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// The LLM gateway's configuration is part of the estate: every change below
// goes through changeEstate, so it is validated with the whole estate,
// audited, versioned and written in one transaction, the same as a change
// made by an estate file. A "put" describes an object whole: it creates the
// object or replaces the one with the same key, and a field left out takes
// its default.

// LLMProviderInput describes a provider whole. KeySecret names the tenant
// vault secret holding its key.
type LLMProviderInput struct {
	Name           string
	Description    *string
	BaseURL        string
	KeySecret      *string
	TimeoutSeconds *float64
	// API is what it speaks (model.APIs; default openai-compatible).
	API *string
}

// LLMRouteInput describes a static route whole.
type LLMRouteInput struct {
	Name           string
	Description    *string
	Endpoints      []string
	TimeoutSeconds *float64
	// API is what its model servers speak (model.APIs).
	API *string
	// App names a serving app whose ready instances are endpoints too.
	App *string
}

// LLMModelInput describes a model whole. Prices are per million tokens,
// in Currency (default USD); Upstream defaults to the name and
// MaxOutputTokens to 4096.
type LLMModelInput struct {
	Name            string
	Provider        *string
	Route           *string
	Upstream        *string
	InputPrice      *float64
	OutputPrice     *float64
	Currency        *string
	MaxOutputTokens *int
	// MaxImageTokens is the most the model bills for one image (nil: the
	// gateway's default).
	MaxImageTokens *int
}

// LLMAliasInput describes an alias whole: its rules in order and its own
// guardrails.
type LLMAliasInput struct {
	Name        string
	Description *string
	// Names are the extra names the alias answers to (claude-sonnet-4-5).
	Names      []string
	Rules      []*LLMAliasRuleInput
	Guardrails *GuardrailsInput
}

// LLMAliasRuleInput is one rule of an alias.
type LLMAliasRuleInput struct {
	Groups       []string
	Projects     []string
	Entitlements []string
	Targets      []*LLMTargetInput
	Fallbacks    []string
}

// LLMTargetInput is a model and its weight (default 1).
type LLMTargetInput struct {
	Model  string
	Weight *int
}

// TokenBudgetInput describes a project's budget for a period whole: tokens
// or money, and optionally a per-user limit in the same unit.
type TokenBudgetInput struct {
	Project       string
	Period        model.BudgetPeriod
	Tokens        *float64
	Money         *float64
	PerUserTokens *float64
	PerUserMoney  *float64
}

// RateLimitInput describes a rate limit whole. An empty Name limits each
// user, project or alias.
type RateLimitInput struct {
	Scope             model.RateLimitScope
	Name              *string
	RequestsPerMinute *int
	TokensPerMinute   *float64
}

// EntitlementInput describes an entitlement whole.
type EntitlementInput struct {
	Name   string
	Groups []string
	Users  []string
}

// GuardrailsInput describes guardrails whole.
type GuardrailsInput struct {
	Deny       []string
	Allow      []string
	GuardAlias *string
}

// GatewayConfig returns the tenant's gateway configuration (admins only).
// Providers carry the name of the vault secret holding their key, never
// the key.
func (s *LLM) GatewayConfig(ctx context.Context) (*model.Gateway, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "read the gateway's configuration"); err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	return &e.Gateway, nil
}

// LLMAliases lists, by name, the aliases the caller may call: those with a
// rule whose conditions the caller meets for a project they may use (their
// credential's project, when it is scoped to one). Admins see the aliases
// whole; others see their names, extra names and descriptions only, since
// rules name groups, projects and models of the whole tenant.
func (s *LLM) LLMAliases(ctx context.Context) ([]*model.Alias, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	out := UsableAliases(e, p, "")
	if !p.IsAdmin() || p.ProjectID != "" {
		for i, a := range out {
			out[i] = &model.Alias{Name: a.Name, Description: a.Description, Names: a.Names}
		}
	}
	return out, nil
}

// RuleMatches reports whether a caller meets an alias rule's conditions for
// a call in project projectID (an id; "" for no project). Each condition
// list that is set must hold: the caller is in one of its groups, the call
// is in one of its projects (a rule that names projects never matches a
// call in none), and the caller holds one of its entitlements, through a
// group or by user name. A rule with no conditions matches everyone. The
// gateway resolves calls with it and GraphQL lists usable aliases with it,
// so the two always agree.
func RuleMatches(e *estate.Estate, rule model.AliasRule, p *identity.Principal, projectID string) bool {
	if len(rule.Groups) > 0 && !slices.ContainsFunc(rule.Groups, func(name string) bool { return inGroupNamed(e, p, name) }) {
		return false
	}
	if len(rule.Projects) > 0 {
		pr := e.Project(projectID)
		if pr == nil || !slices.Contains(rule.Projects, pr.Name) {
			return false
		}
	}
	if len(rule.Entitlements) > 0 && !slices.ContainsFunc(rule.Entitlements, func(name string) bool { return HoldsEntitlement(e, p, name) }) {
		return false
	}
	return true
}

// MatchingRule returns the first rule of an alias whose conditions the
// caller meets for a call in projectID, and its index; nil when none does.
func MatchingRule(e *estate.Estate, a *model.Alias, p *identity.Principal, projectID string) (int, *model.AliasRule) {
	for i := range a.Rules {
		if RuleMatches(e, a.Rules[i], p, projectID) {
			return i, &a.Rules[i]
		}
	}
	return -1, nil
}

// HoldsEntitlement reports whether a caller holds an entitlement: by user
// name, or as a member of one of its groups.
func HoldsEntitlement(e *estate.Estate, p *identity.Principal, name string) bool {
	en := llmconf.Entitlement(&e.Gateway, name)
	if en == nil || p == nil {
		return false
	}
	if slices.Contains(en.Users, p.UserName) {
		return true
	}
	return slices.ContainsFunc(en.Groups, func(g string) bool { return inGroupNamed(e, p, g) })
}

func inGroupNamed(e *estate.Estate, p *identity.Principal, name string) bool {
	g := e.GroupByName(name)
	return g != nil && p.InGroup(g.ID)
}

// UsableAliases lists, by name, the aliases a caller may call in projectID,
// or with projectID "" in any project they may use (only their
// credential's project, when it is scoped to one).
func UsableAliases(e *estate.Estate, p *identity.Principal, projectID string) []*model.Alias {
	var projects []string
	switch {
	case projectID != "":
		projects = []string{projectID}
	case p.ProjectID != "":
		// A scoped key grants nothing its owner lacks.
		if pr := e.Project(p.ProjectID); pr != nil && kernel.UsesProject(p, pr) {
			projects = []string{p.ProjectID}
		}
	default:
		for _, pr := range e.Projects {
			if kernel.UsesProject(p, pr) {
				projects = append(projects, pr.ID)
			}
		}
	}
	var out []*model.Alias
	for _, a := range e.Gateway.Aliases {
		if slices.ContainsFunc(projects, func(id string) bool { _, r := MatchingRule(e, a, p, id); return r != nil }) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// timeoutOf turns an optional number of seconds into a duration.
func timeoutOf(field string, v *float64) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	// The range is the estate's rule, checked with every other problem;
	// here only what cannot be a duration at all is refused.
	if math.IsNaN(*v) || *v < 0 || *v > 1e6 {
		return 0, kernel.Invalid("%s %v must be between 1 and %d seconds (leave it out for the default)", field, *v, int64(llmconf.MaxTimeout/time.Second))
	}
	return time.Duration(*v * float64(time.Second)), nil
}

// countOf turns an optional number of tokens or requests into a whole count.
func countOf(field string, v *float64) (int64, error) {
	if v == nil {
		return 0, nil
	}
	if math.IsNaN(*v) || *v != math.Trunc(*v) || math.Abs(*v) > basis.MaxCount {
		return 0, kernel.Invalid("%s %v must be a whole number up to %d", field, *v, int64(basis.MaxCount))
	}
	return int64(*v), nil
}

// microsOf turns an optional decimal amount into millionths.
func microsOf(field string, v *float64) (int64, error) {
	if v == nil {
		return 0, nil
	}
	m, err := basis.ScaleDecimal(field, *v, 6)
	if err != nil {
		return 0, kernel.Invalid("%v", err)
	}
	return m, nil
}

func optOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func guardrailsFromInput(in *GuardrailsInput) model.Guardrails {
	if in == nil {
		return model.Guardrails{}
	}
	return model.Guardrails{Deny: slices.Clone(in.Deny), Allow: slices.Clone(in.Allow), GuardAlias: optOr(in.GuardAlias, "")}
}

// PutLLMProvider creates or replaces a provider.
func (s *LLM) PutLLMProvider(ctx context.Context, in LLMProviderInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change the gateway's providers", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		timeout, err := timeoutOf("timeoutSeconds", in.TimeoutSeconds)
		if err != nil {
			return "", err
		}
		llmconf.PutProvider(&next.Gateway, &model.Provider{Name: in.Name, Description: optOr(in.Description, ""), BaseURL: in.BaseURL,
			KeySecret: optOr(in.KeySecret, ""), Timeout: timeout, API: optOr(in.API, "")})
		return in.Name, nil
	})
}

// DeleteLLMProvider removes a provider no model uses.
func (s *LLM) DeleteLLMProvider(ctx context.Context, name string) (*kernel.EstateResult, error) {
	return s.deleteGatewayObject(ctx, "delete the gateway's providers", llmconf.KindProvider, "provider", fixedKey(name),
		func(e *estate.Estate) bool { return llmconf.Provider(&e.Gateway, name) != nil },
		func(e *estate.Estate) { llmconf.RemoveProvider(&e.Gateway, name) })
}

// PutLLMRoute creates or replaces a static route.
func (s *LLM) PutLLMRoute(ctx context.Context, in LLMRouteInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change the gateway's routes", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		timeout, err := timeoutOf("timeoutSeconds", in.TimeoutSeconds)
		if err != nil {
			return "", err
		}
		llmconf.PutRoute(&next.Gateway, &model.Route{Name: in.Name, Description: optOr(in.Description, ""), Endpoints: slices.Clone(in.Endpoints), Timeout: timeout, API: optOr(in.API, ""), App: optOr(in.App, "")})
		return in.Name, nil
	})
}

// DeleteLLMRoute removes a static route no model uses.
func (s *LLM) DeleteLLMRoute(ctx context.Context, name string) (*kernel.EstateResult, error) {
	return s.deleteGatewayObject(ctx, "delete the gateway's routes", llmconf.KindRoute, "route", fixedKey(name),
		func(e *estate.Estate) bool { return llmconf.Route(&e.Gateway, name) != nil },
		func(e *estate.Estate) { llmconf.RemoveRoute(&e.Gateway, name) })
}

// PutLLMModel creates or replaces a model.
func (s *LLM) PutLLMModel(ctx context.Context, in LLMModelInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change the gateway's models", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		m := &model.LLMModel{Name: in.Name, Provider: optOr(in.Provider, ""), Route: optOr(in.Route, ""), Upstream: optOr(in.Upstream, ""),
			Currency: strings.ToUpper(optOr(in.Currency, "")), MaxOutputTokens: int64(optOr(in.MaxOutputTokens, llmconf.DefaultMaxOutputTokens)),
			MaxImageTokens: int64(optOr(in.MaxImageTokens, 0))}
		if in.MaxImageTokens != nil && *in.MaxImageTokens == 0 {
			return "", kernel.Invalid("maxImageTokens must be between 1 and %d (leave it out for the default, %d)", llmconf.MaxImageTokensCap, llmconf.DefaultMaxImageTokens)
		}
		var err error
		if m.InputPriceMicros, err = microsOf("inputPrice", in.InputPrice); err != nil {
			return "", err
		}
		if m.OutputPriceMicros, err = microsOf("outputPrice", in.OutputPrice); err != nil {
			return "", err
		}
		llmconf.PutModel(&next.Gateway, m)
		return in.Name, nil
	})
}

// DeleteLLMModel removes a model no alias uses.
func (s *LLM) DeleteLLMModel(ctx context.Context, name string) (*kernel.EstateResult, error) {
	return s.deleteGatewayObject(ctx, "delete the gateway's models", llmconf.KindModel, "model", fixedKey(name),
		func(e *estate.Estate) bool { return llmconf.Model(&e.Gateway, name) != nil },
		func(e *estate.Estate) { llmconf.RemoveModel(&e.Gateway, name) })
}

// PutLLMAlias creates or replaces an alias.
func (s *LLM) PutLLMAlias(ctx context.Context, in LLMAliasInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change the gateway's aliases", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		a := &model.Alias{Name: in.Name, Description: optOr(in.Description, ""), Names: slices.Clone(in.Names), Guardrails: guardrailsFromInput(in.Guardrails)}
		for _, r := range in.Rules {
			if r == nil {
				continue
			}
			rule := model.AliasRule{Groups: slices.Clone(r.Groups), Projects: slices.Clone(r.Projects),
				Entitlements: slices.Clone(r.Entitlements), Fallbacks: slices.Clone(r.Fallbacks)}
			for _, tg := range r.Targets {
				if tg != nil {
					rule.Targets = append(rule.Targets, model.Target{Model: tg.Model, Weight: optOr(tg.Weight, llmconf.DefaultTargetWeight)})
				}
			}
			a.Rules = append(a.Rules, rule)
		}
		llmconf.PutAlias(&next.Gateway, a)
		return in.Name, nil
	})
}

// DeleteLLMAlias removes an alias no rate limit or guardrail names.
func (s *LLM) DeleteLLMAlias(ctx context.Context, name string) (*kernel.EstateResult, error) {
	return s.deleteGatewayObject(ctx, "delete the gateway's aliases", llmconf.KindAlias, "alias", fixedKey(name),
		func(e *estate.Estate) bool { return llmconf.Alias(&e.Gateway, name) != nil },
		func(e *estate.Estate) { llmconf.RemoveAlias(&e.Gateway, name) })
}

// PutTokenBudget creates or replaces a project's budget for a period.
func (s *LLM) PutTokenBudget(ctx context.Context, in TokenBudgetInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change token budgets", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		b := &model.TokenBudget{Project: projectName(next, in.Project), Period: in.Period}
		var err error
		if b.Tokens, err = countOf("tokens", in.Tokens); err != nil {
			return "", err
		}
		if b.PerUserTokens, err = countOf("perUserTokens", in.PerUserTokens); err != nil {
			return "", err
		}
		if b.Micros, err = microsOf("money", in.Money); err != nil {
			return "", err
		}
		if b.PerUserMicros, err = microsOf("perUserMoney", in.PerUserMoney); err != nil {
			return "", err
		}
		llmconf.PutTokenBudget(&next.Gateway, b)
		return llmconf.BudgetName(b), nil
	})
}

// DeleteTokenBudget removes a project's budget for a period.
func (s *LLM) DeleteTokenBudget(ctx context.Context, project string, period model.BudgetPeriod) (*kernel.EstateResult, error) {
	key := func(e *estate.Estate) string {
		return llmconf.BudgetName(&model.TokenBudget{Project: projectName(e, project), Period: period})
	}
	return s.deleteGatewayObject(ctx, "delete token budgets", llmconf.KindTokenBudget, "token budget", key,
		func(e *estate.Estate) bool {
			return llmconf.TokenBudget(&e.Gateway, projectName(e, project), period) != nil
		},
		func(e *estate.Estate) { llmconf.RemoveTokenBudget(&e.Gateway, projectName(e, project), period) })
}

// PutRateLimit creates or replaces a rate limit.
func (s *LLM) PutRateLimit(ctx context.Context, in RateLimitInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change rate limits", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		r := &model.RateLimit{Scope: in.Scope, Name: optOr(in.Name, ""), RequestsPerMinute: int64(optOr(in.RequestsPerMinute, 0))}
		var err error
		if r.TokensPerMinute, err = countOf("tokensPerMinute", in.TokensPerMinute); err != nil {
			return "", err
		}
		llmconf.PutRateLimit(&next.Gateway, r)
		return llmconf.RateLimitName(r), nil
	})
}

// DeleteRateLimit removes the rate limit of a scope for a name ("" for
// each one).
func (s *LLM) DeleteRateLimit(ctx context.Context, scope model.RateLimitScope, name string) (*kernel.EstateResult, error) {
	key := llmconf.RateLimitName(&model.RateLimit{Scope: scope, Name: name})
	return s.deleteGatewayObject(ctx, "delete rate limits", llmconf.KindRateLimit, "rate limit", fixedKey(key),
		func(e *estate.Estate) bool { return llmconf.RateLimit(&e.Gateway, scope, name) != nil },
		func(e *estate.Estate) { llmconf.RemoveRateLimit(&e.Gateway, scope, name) })
}

// PutEntitlement creates or replaces an entitlement.
func (s *LLM) PutEntitlement(ctx context.Context, in EntitlementInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change entitlements", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		llmconf.PutEntitlement(&next.Gateway, &model.Entitlement{Name: in.Name, Groups: slices.Clone(in.Groups), Users: slices.Clone(in.Users)})
		return in.Name, nil
	})
}

// DeleteEntitlement removes an entitlement no alias rule asks for.
func (s *LLM) DeleteEntitlement(ctx context.Context, name string) (*kernel.EstateResult, error) {
	return s.deleteGatewayObject(ctx, "delete entitlements", llmconf.KindEntitlement, "entitlement", fixedKey(name),
		func(e *estate.Estate) bool { return llmconf.Entitlement(&e.Gateway, name) != nil },
		func(e *estate.Estate) { llmconf.RemoveEntitlement(&e.Gateway, name) })
}

// SetGuardrails replaces the global guardrails; empty ones clear them.
func (s *LLM) SetGuardrails(ctx context.Context, in GuardrailsInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change the global guardrails", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		next.Gateway.Guardrails = guardrailsFromInput(&in)
		return "global", nil
	})
}

// projectName turns a project reference (an id or a name) into the name
// the gateway's configuration uses; an unknown one is kept as given, for
// validation to report.
func projectName(e *estate.Estate, ref string) string {
	if pr, err := kernel.FindProject(e, ref); err == nil {
		return pr.Name
	}
	return ref
}

// fixedKey is a key that does not depend on the estate.
func fixedKey(key string) func(*estate.Estate) string {
	return func(*estate.Estate) string { return key }
}

// deleteGatewayObject removes one gateway object, refusing while other
// gateway objects name it.
func (s *LLM) deleteGatewayObject(ctx context.Context, what, kind, noun string, keyOf func(*estate.Estate) string,
	exists func(*estate.Estate) bool, remove func(*estate.Estate)) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, what, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		key := keyOf(next)
		if !exists(next) {
			return "", kernel.NotFound("no %s %s", noun, kernel.Quote(key))
		}
		if refs := llmconf.References(&next.Gateway, kind, key); len(refs) > 0 {
			return "", kernel.Conflict("%s %s is used by %s; change them first", noun, kernel.Quote(key), strings.Join(refs, ", "))
		}
		remove(next)
		return key, nil
	})
}
