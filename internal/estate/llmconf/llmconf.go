// Package llmconf holds the rules of the LLM gateway's configuration
// (model.Gateway: providers, static routes, models, aliases, entitlements,
// token budgets, rate limits and guardrails): its objects found, put and
// removed by key, normalised, validated, named by one another, and written
// as the gateway section of an estate file.
//
// The configuration is part of a tenant's estate, changed, validated,
// versioned and diffed with it, so package estate holds it and calls this
// package for its part of Normalize, Validate, Diff, Apply and Export. The
// rules live here so that the allocation model and the gateway each have a
// package that can be read alone. llmconf does not import estate (estate
// imports it): what it needs of the estate around it, which groups and
// projects exist, it is given (Estate), and what every part of an estate
// shares (the name rule, Problem, the file's Number) is package basis's.
package llmconf

import (
	"slices"
	"sort"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
)

// Kinds of the configuration's objects, as the estate's changes and audit
// entries name them.
const (
	KindProvider    = "llm_provider"
	KindRoute       = "llm_route"
	KindModel       = "llm_model"
	KindAlias       = "llm_alias"
	KindTokenBudget = "token_budget"
	KindRateLimit   = "rate_limit"
	KindEntitlement = "entitlement"
	KindGuardrails  = "guardrails"
)

// kinds is every kind, in the order a diff lists their changes.
var kinds = [...]string{KindProvider, KindRoute, KindModel, KindAlias, KindTokenBudget, KindRateLimit, KindEntitlement, KindGuardrails}

// Kinds lists the kinds of the configuration's objects, in the order a
// diff lists their changes.
func Kinds() []string { return slices.Clone(kinds[:]) }

// OwnsKind reports whether a kind of object belongs to the gateway's
// configuration, which the store keeps as one document.
func OwnsKind(kind string) bool { return slices.Contains(kinds[:], kind) }

// Defaults of the configuration's objects, applied when an estate file or
// an API call leaves them out, so that the stored value is explicit.
const (
	DefaultMaxOutputTokens = 4096
	DefaultTargetWeight    = 1
	// DefaultMaxImageTokens is what one image of unknown size counts
	// toward a call's reservation when the model states no maxImageTokens
	// (kept 0 in the configuration): above what OpenAI's models (but
	// gpt-4o-mini's multiplied count) and Anthropic's bill for one.
	DefaultMaxImageTokens = 4096
)

// The configuration's objects have no ids: each is known by its key, a
// name (a budget by project and period, a rate limit by scope and name).
// Lookups scan, as the estate's do: a configuration is small and changed
// by people.

// BudgetName names a token budget: its project and period.
func BudgetName(b *model.TokenBudget) string { return b.Project + " per " + string(b.Period) }

// RateLimitName names a rate limit: per what, and for which one ("each"
// when for every one).
func RateLimitName(r *model.RateLimit) string {
	if r.Name == "" {
		return "each " + string(r.Scope)
	}
	return string(r.Scope) + " " + r.Name
}

func providerName(v *model.Provider) string       { return v.Name }
func routeName(v *model.Route) string             { return v.Name }
func modelName(v *model.LLMModel) string          { return v.Name }
func aliasName(v *model.Alias) string             { return v.Name }
func entitlementName(v *model.Entitlement) string { return v.Name }

// Keyed is one object of the configuration and its key.
type Keyed struct {
	Key    string
	Object any
}

// Objects lists the configuration's objects of a kind with their keys, so
// that a diff can match the objects of two configurations. The global
// guardrails are one object, keyed "global", that exists while they hold a
// pattern or a guard alias: setting them on a tenant without any is a
// creation, clearing them a deletion.
func Objects(g *model.Gateway, kind string) []Keyed {
	switch kind {
	case KindProvider:
		return keyed(g.Providers, providerName)
	case KindRoute:
		return keyed(g.Routes, routeName)
	case KindModel:
		return keyed(g.Models, modelName)
	case KindAlias:
		return keyed(g.Aliases, aliasName)
	case KindTokenBudget:
		return keyed(g.Budgets, BudgetName)
	case KindRateLimit:
		return keyed(g.RateLimits, RateLimitName)
	case KindEntitlement:
		return keyed(g.Entitlements, entitlementName)
	case KindGuardrails:
		if !GuardrailsEmpty(g.Guardrails) {
			return []Keyed{{"global", &g.Guardrails}}
		}
	}
	return nil
}

func keyed[T any](items []T, key func(T) string) []Keyed {
	var out []Keyed
	for _, v := range items {
		out = append(out, Keyed{key(v), v})
	}
	return out
}

// Empty reports whether a configuration holds nothing.
func Empty(g *model.Gateway) bool {
	return len(g.Providers)+len(g.Routes)+len(g.Models)+len(g.Aliases)+len(g.Budgets)+len(g.RateLimits)+len(g.Entitlements) == 0 &&
		GuardrailsEmpty(g.Guardrails)
}

// GuardrailsEmpty reports whether guardrails hold no pattern and no guard
// alias.
func GuardrailsEmpty(g model.Guardrails) bool {
	return len(g.Deny) == 0 && len(g.Allow) == 0 && g.GuardAlias == ""
}

// Clone deep-copies a configuration, so that a change can be tried without
// touching the original.
func Clone(g *model.Gateway) model.Gateway {
	var c model.Gateway
	for _, v := range g.Providers {
		x := *v
		c.Providers = append(c.Providers, &x)
	}
	for _, v := range g.Routes {
		x := *v
		x.Endpoints = slices.Clone(v.Endpoints)
		c.Routes = append(c.Routes, &x)
	}
	for _, v := range g.Models {
		x := *v
		c.Models = append(c.Models, &x)
	}
	for _, v := range g.Aliases {
		x := *v
		x.Names = slices.Clone(v.Names)
		x.Rules = nil
		for _, r := range v.Rules {
			r.Groups, r.Projects, r.Entitlements = slices.Clone(r.Groups), slices.Clone(r.Projects), slices.Clone(r.Entitlements)
			r.Targets, r.Fallbacks = slices.Clone(r.Targets), slices.Clone(r.Fallbacks)
			x.Rules = append(x.Rules, r)
		}
		x.Guardrails = cloneGuardrails(v.Guardrails)
		c.Aliases = append(c.Aliases, &x)
	}
	for _, v := range g.Budgets {
		x := *v
		c.Budgets = append(c.Budgets, &x)
	}
	for _, v := range g.RateLimits {
		x := *v
		c.RateLimits = append(c.RateLimits, &x)
	}
	for _, v := range g.Entitlements {
		x := *v
		x.Groups, x.Users = slices.Clone(v.Groups), slices.Clone(v.Users)
		c.Entitlements = append(c.Entitlements, &x)
	}
	c.Guardrails = cloneGuardrails(g.Guardrails)
	return c
}

func cloneGuardrails(g model.Guardrails) model.Guardrails {
	g.Deny, g.Allow = slices.Clone(g.Deny), slices.Clone(g.Allow)
	return g
}

// Normalize makes defaults explicit (a model's upstream name and currency;
// its output bound is set where it is read, so that an explicit 0 is
// refused) and sorts every kind of object by its key, so that a stored and
// an exported configuration are stable. The order of an alias's rules,
// targets and fallbacks is meaning, and is kept.
func Normalize(g *model.Gateway) {
	for _, a := range g.Aliases {
		if len(a.Names) == 0 {
			a.Names = nil // a stored [] and a file without names are the same alias
		}
	}
	for _, m := range g.Models {
		if m.Upstream == "" {
			m.Upstream = m.Name
		}
		if m.Currency == "" {
			m.Currency = basis.DefaultCurrency
		}
	}
	sortByKey(g.Providers, providerName)
	sortByKey(g.Routes, routeName)
	sortByKey(g.Models, modelName)
	sortByKey(g.Aliases, aliasName)
	sortByKey(g.Entitlements, entitlementName)
	sortByKey(g.Budgets, func(v *model.TokenBudget) string { return v.Project + "\x00" + periodRank(v.Period) })
	sortByKey(g.RateLimits, func(v *model.RateLimit) string { return string(v.Scope) + "\x00" + v.Name })
}

// periodRank orders periods from the shortest.
func periodRank(p model.BudgetPeriod) string {
	switch p {
	case model.PeriodDay:
		return "1"
	case model.PeriodWeek:
		return "2"
	case model.PeriodMonth:
		return "3"
	}
	return "4" + string(p)
}

func sortByKey[T any](list []T, key func(T) string) {
	sort.SliceStable(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
}
