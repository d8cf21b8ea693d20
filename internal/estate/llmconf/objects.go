package llmconf

import (
	"slices"

	"github.com/klique-ai/klique/internal/model"
)

// Provider returns the provider named name, or nil.
func Provider(g *model.Gateway, name string) *model.Provider {
	return find(g.Providers, name, providerName)
}

// Route returns the static route named name, or nil.
func Route(g *model.Gateway, name string) *model.Route { return find(g.Routes, name, routeName) }

// Model returns the model named name, or nil.
func Model(g *model.Gateway, name string) *model.LLMModel { return find(g.Models, name, modelName) }

// Alias returns the alias named name, or nil.
func Alias(g *model.Gateway, name string) *model.Alias { return find(g.Aliases, name, aliasName) }

// Entitlement returns the entitlement named name, or nil.
func Entitlement(g *model.Gateway, name string) *model.Entitlement {
	return find(g.Entitlements, name, entitlementName)
}

// TokenBudget returns a project's budget for a period, or nil.
func TokenBudget(g *model.Gateway, project string, period model.BudgetPeriod) *model.TokenBudget {
	for _, v := range g.Budgets {
		if v.Project == project && v.Period == period {
			return v
		}
	}
	return nil
}

// RateLimit returns the rate limit of a scope for name ("" for each one),
// or nil.
func RateLimit(g *model.Gateway, scope model.RateLimitScope, name string) *model.RateLimit {
	for _, v := range g.RateLimits {
		if v.Scope == scope && v.Name == name {
			return v
		}
	}
	return nil
}

// find returns the first object with key k, or nil.
func find[T any](list []*T, k string, key func(*T) string) *T {
	for _, v := range list {
		if key(v) == k {
			return v
		}
	}
	return nil
}

// Put functions each replace the object with the same key or add it, so
// that a "put" from GraphQL and an object of an estate file describe the
// object whole.

// PutProvider creates or replaces a provider by name.
func PutProvider(g *model.Gateway, v *model.Provider) {
	g.Providers = putByKey(g.Providers, v, providerName)
}

// PutRoute creates or replaces a static route by name.
func PutRoute(g *model.Gateway, v *model.Route) { g.Routes = putByKey(g.Routes, v, routeName) }

// PutModel creates or replaces a model by name.
func PutModel(g *model.Gateway, v *model.LLMModel) { g.Models = putByKey(g.Models, v, modelName) }

// PutAlias creates or replaces an alias by name.
func PutAlias(g *model.Gateway, v *model.Alias) { g.Aliases = putByKey(g.Aliases, v, aliasName) }

// PutEntitlement creates or replaces an entitlement by name.
func PutEntitlement(g *model.Gateway, v *model.Entitlement) {
	g.Entitlements = putByKey(g.Entitlements, v, entitlementName)
}

// PutTokenBudget creates or replaces a budget by project and period.
func PutTokenBudget(g *model.Gateway, v *model.TokenBudget) {
	g.Budgets = putByKey(g.Budgets, v, BudgetName)
}

// PutRateLimit creates or replaces a rate limit by scope and name.
func PutRateLimit(g *model.Gateway, v *model.RateLimit) {
	g.RateLimits = putByKey(g.RateLimits, v, RateLimitName)
}

func putByKey[T any](list []T, v T, key func(T) string) []T {
	k := key(v)
	for i, x := range list {
		if key(x) == k {
			list[i] = v
			return list
		}
	}
	return append(list, v)
}

// RemoveProvider deletes a provider and reports whether it existed.
func RemoveProvider(g *model.Gateway, name string) bool {
	return removeByKey(&g.Providers, name, providerName)
}

// RemoveRoute deletes a static route and reports whether it existed.
func RemoveRoute(g *model.Gateway, name string) bool { return removeByKey(&g.Routes, name, routeName) }

// RemoveModel deletes a model and reports whether it existed.
func RemoveModel(g *model.Gateway, name string) bool { return removeByKey(&g.Models, name, modelName) }

// RemoveAlias deletes an alias and reports whether it existed.
func RemoveAlias(g *model.Gateway, name string) bool { return removeByKey(&g.Aliases, name, aliasName) }

// RemoveEntitlement deletes an entitlement and reports whether it existed.
func RemoveEntitlement(g *model.Gateway, name string) bool {
	return removeByKey(&g.Entitlements, name, entitlementName)
}

// RemoveTokenBudget deletes a project's budget for a period and reports
// whether it existed.
func RemoveTokenBudget(g *model.Gateway, project string, period model.BudgetPeriod) bool {
	return removeByKey(&g.Budgets, BudgetName(&model.TokenBudget{Project: project, Period: period}), BudgetName)
}

// RemoveRateLimit deletes a rate limit and reports whether it existed.
func RemoveRateLimit(g *model.Gateway, scope model.RateLimitScope, name string) bool {
	return removeByKey(&g.RateLimits, RateLimitName(&model.RateLimit{Scope: scope, Name: name}), RateLimitName)
}

// removeByKey drops the object with key k and reports whether there was
// one.
func removeByKey[T any](list *[]T, k string, key func(T) string) bool {
	n := len(*list)
	*list = slices.DeleteFunc(*list, func(x T) bool { return key(x) == k })
	return len(*list) != n
}

// AliasIndex maps every name a call may ask for, each alias's own and its
// extra names, to the alias. Validation keeps every name to one alias; were
// two to claim one anyway, the alias's own name wins, then the first alias
// by key. The gateway builds it once per loaded configuration, so that
// resolving a call's model name is one map lookup however many aliases
// and names there are.
func AliasIndex(g *model.Gateway) map[string]*model.Alias {
	n := len(g.Aliases)
	for _, a := range g.Aliases {
		n += len(a.Names)
	}
	idx := make(map[string]*model.Alias, n)
	for _, a := range g.Aliases {
		idx[a.Name] = a
	}
	for _, a := range g.Aliases {
		for _, name := range a.Names {
			if _, taken := idx[name]; !taken {
				idx[name] = a
			}
		}
	}
	return idx
}
