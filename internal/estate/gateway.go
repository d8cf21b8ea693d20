package estate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
)

// Defaults of the gateway's objects, applied when an estate file or an API
// call leaves them out, so that the stored value is explicit.
const (
	DefaultMaxOutputTokens = 4096
	DefaultTargetWeight    = 1
)

// The gateway's objects have no ids: each is known by its key, a name (a
// budget by project and period, a rate limit by scope and name). Lookups
// scan, as the others do.

// Provider returns the provider named name, or nil.
func (e *Estate) Provider(name string) *model.Provider {
	for _, v := range e.Gateway.Providers {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Route returns the static route named name, or nil.
func (e *Estate) Route(name string) *model.Route {
	for _, v := range e.Gateway.Routes {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// LLMModel returns the model named name, or nil.
func (e *Estate) LLMModel(name string) *model.LLMModel {
	for _, v := range e.Gateway.Models {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Alias returns the alias named name, or nil.
func (e *Estate) Alias(name string) *model.Alias {
	for _, v := range e.Gateway.Aliases {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Entitlement returns the entitlement named name, or nil.
func (e *Estate) Entitlement(name string) *model.Entitlement {
	for _, v := range e.Gateway.Entitlements {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// TokenBudget returns a project's budget for a period, or nil.
func (e *Estate) TokenBudget(project string, period model.BudgetPeriod) *model.TokenBudget {
	for _, v := range e.Gateway.Budgets {
		if v.Project == project && v.Period == period {
			return v
		}
	}
	return nil
}

// RateLimit returns the rate limit of a scope for name ("" for each one),
// or nil.
func (e *Estate) RateLimit(scope model.RateLimitScope, name string) *model.RateLimit {
	for _, v := range e.Gateway.RateLimits {
		if v.Scope == scope && v.Name == name {
			return v
		}
	}
	return nil
}

// GatewayEmpty reports whether a gateway configuration holds nothing.
func GatewayEmpty(g *model.Gateway) bool {
	return len(g.Providers)+len(g.Routes)+len(g.Models)+len(g.Aliases)+len(g.Budgets)+len(g.RateLimits)+len(g.Entitlements) == 0 &&
		GuardrailsEmpty(g.Guardrails)
}

// GuardrailsEmpty reports whether guardrails hold no pattern and no guard
// alias.
func GuardrailsEmpty(g model.Guardrails) bool {
	return len(g.Deny) == 0 && len(g.Allow) == 0 && g.GuardAlias == ""
}

// Put helpers: each replaces the object with the same key or adds it, so
// that a "put" from GraphQL and an object of an estate file describe the
// object whole.

// PutProvider creates or replaces a provider by name.
func (e *Estate) PutProvider(v *model.Provider) {
	e.Gateway.Providers = putByKey(e.Gateway.Providers, v, func(x *model.Provider) string { return x.Name })
}

// PutRoute creates or replaces a static route by name.
func (e *Estate) PutRoute(v *model.Route) {
	e.Gateway.Routes = putByKey(e.Gateway.Routes, v, func(x *model.Route) string { return x.Name })
}

// PutLLMModel creates or replaces a model by name.
func (e *Estate) PutLLMModel(v *model.LLMModel) {
	e.Gateway.Models = putByKey(e.Gateway.Models, v, func(x *model.LLMModel) string { return x.Name })
}

// PutAlias creates or replaces an alias by name.
func (e *Estate) PutAlias(v *model.Alias) {
	e.Gateway.Aliases = putByKey(e.Gateway.Aliases, v, func(x *model.Alias) string { return x.Name })
}

// PutEntitlement creates or replaces an entitlement by name.
func (e *Estate) PutEntitlement(v *model.Entitlement) {
	e.Gateway.Entitlements = putByKey(e.Gateway.Entitlements, v, func(x *model.Entitlement) string { return x.Name })
}

// PutTokenBudget creates or replaces a budget by project and period.
func (e *Estate) PutTokenBudget(v *model.TokenBudget) {
	e.Gateway.Budgets = putByKey(e.Gateway.Budgets, v, BudgetName)
}

// PutRateLimit creates or replaces a rate limit by scope and name.
func (e *Estate) PutRateLimit(v *model.RateLimit) {
	e.Gateway.RateLimits = putByKey(e.Gateway.RateLimits, v, RateLimitName)
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

// removeByKey drops the object with key k and reports whether there was
// one.
func removeByKey[T any](list *[]T, k string, key func(T) string) bool {
	n := len(*list)
	*list = slices.DeleteFunc(*list, func(x T) bool { return key(x) == k })
	return len(*list) != n
}

// RemoveProvider deletes a provider and reports whether it existed.
func (e *Estate) RemoveProvider(name string) bool {
	return removeByKey(&e.Gateway.Providers, name, func(x *model.Provider) string { return x.Name })
}

// RemoveRoute deletes a static route and reports whether it existed.
func (e *Estate) RemoveRoute(name string) bool {
	return removeByKey(&e.Gateway.Routes, name, func(x *model.Route) string { return x.Name })
}

// RemoveLLMModel deletes a model and reports whether it existed.
func (e *Estate) RemoveLLMModel(name string) bool {
	return removeByKey(&e.Gateway.Models, name, func(x *model.LLMModel) string { return x.Name })
}

// RemoveAlias deletes an alias and reports whether it existed.
func (e *Estate) RemoveAlias(name string) bool {
	return removeByKey(&e.Gateway.Aliases, name, func(x *model.Alias) string { return x.Name })
}

// RemoveEntitlement deletes an entitlement and reports whether it existed.
func (e *Estate) RemoveEntitlement(name string) bool {
	return removeByKey(&e.Gateway.Entitlements, name, func(x *model.Entitlement) string { return x.Name })
}

// RemoveTokenBudget deletes a project's budget for a period and reports
// whether it existed.
func (e *Estate) RemoveTokenBudget(project string, period model.BudgetPeriod) bool {
	return removeByKey(&e.Gateway.Budgets, BudgetName(&model.TokenBudget{Project: project, Period: period}), BudgetName)
}

// RemoveRateLimit deletes a rate limit and reports whether it existed.
func (e *Estate) RemoveRateLimit(scope model.RateLimitScope, name string) bool {
	return removeByKey(&e.Gateway.RateLimits, RateLimitName(&model.RateLimit{Scope: scope, Name: name}), RateLimitName)
}

// normalizeGateway makes defaults explicit (a model's upstream name and
// currency; its output bound is set where it is read, so that an explicit 0
// is refused) and sorts every kind of object by its key, so that a stored
// and an exported configuration are stable.
// The order of an alias's rules, targets and fallbacks is meaning, and is
// kept.
func (e *Estate) normalizeGateway() {
	g := &e.Gateway
	for _, m := range g.Models {
		if m.Upstream == "" {
			m.Upstream = m.Name
		}
		if m.Currency == "" {
			m.Currency = basis.DefaultCurrency
		}
	}
	sortByKey(g.Providers, func(v *model.Provider) string { return v.Name })
	sortByKey(g.Routes, func(v *model.Route) string { return v.Name })
	sortByKey(g.Models, func(v *model.LLMModel) string { return v.Name })
	sortByKey(g.Aliases, func(v *model.Alias) string { return v.Name })
	sortByKey(g.Entitlements, func(v *model.Entitlement) string { return v.Name })
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

// GatewayReferences lists, in words, the gateway objects that name an
// object of the estate, so that deleting it can be refused with the list
// of what to change first. kind is KindGroup, KindProject, KindProvider,
// KindRoute, KindModel, KindAlias or KindEntitlement.
func (e *Estate) GatewayReferences(kind, name string) []string {
	g := &e.Gateway
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	switch kind {
	case KindProvider, KindRoute:
		for _, m := range g.Models {
			if (kind == KindProvider && m.Provider == name) || (kind == KindRoute && m.Route == name) {
				add("model %q", m.Name)
			}
		}
	case KindGroup:
		for _, en := range g.Entitlements {
			if slices.Contains(en.Groups, name) {
				add("entitlement %q", en.Name)
			}
		}
	case KindProject:
		for _, b := range g.Budgets {
			if b.Project == name {
				add("token budget %s", BudgetName(b))
			}
		}
		for _, r := range g.RateLimits {
			if r.Scope == model.RateLimitProject && r.Name == name {
				add("rate limit %s", RateLimitName(r))
			}
		}
	case KindAlias:
		for _, r := range g.RateLimits {
			if r.Scope == model.RateLimitAlias && r.Name == name {
				add("rate limit %s", RateLimitName(r))
			}
		}
		if g.Guardrails.GuardAlias == name {
			add("the global guardrails (guard alias)")
		}
	}
	for _, a := range g.Aliases {
		if kind == KindAlias && a.Name != name && a.Guardrails.GuardAlias == name {
			add("alias %q (guard alias)", a.Name)
		}
		for i, r := range a.Rules {
			var uses bool
			switch kind {
			case KindGroup:
				uses = slices.Contains(r.Groups, name)
			case KindProject:
				uses = slices.Contains(r.Projects, name)
			case KindEntitlement:
				uses = slices.Contains(r.Entitlements, name)
			case KindModel:
				uses = slices.Contains(r.Fallbacks, name) || slices.ContainsFunc(r.Targets, func(t model.Target) bool { return t.Model == name })
			}
			if uses {
				add("alias %q rule %d", a.Name, i+1)
			}
		}
	}
	return out
}

// FollowRenames carries the renames of groups and projects from cur to e
// into the gateway's configuration, which names them: an alias rule of
// group "vision" follows the group when it becomes "computer-vision".
func (e *Estate) FollowRenames(cur *Estate) {
	groups, projects := map[string]string{}, map[string]string{}
	for _, g := range cur.Groups {
		if n := e.Group(g.ID); n != nil && n.Name != g.Name {
			groups[g.Name] = n.Name
		}
	}
	for _, p := range cur.Projects {
		if n := e.Project(p.ID); n != nil && n.Name != p.Name {
			projects[p.Name] = n.Name
		}
	}
	if len(groups) == 0 && len(projects) == 0 {
		return
	}
	rename := func(list []string, m map[string]string) {
		for i, v := range list {
			if n, ok := m[v]; ok {
				list[i] = n
			}
		}
	}
	g := &e.Gateway
	for _, en := range g.Entitlements {
		rename(en.Groups, groups)
	}
	for _, a := range g.Aliases {
		for i := range a.Rules {
			rename(a.Rules[i].Groups, groups)
			rename(a.Rules[i].Projects, projects)
		}
	}
	for _, b := range g.Budgets {
		if n, ok := projects[b.Project]; ok {
			b.Project = n
		}
	}
	for _, r := range g.RateLimits {
		if n, ok := projects[r.Name]; ok && r.Scope == model.RateLimitProject {
			r.Name = n
		}
	}
}

// formatDuration writes a duration the shortest way Go reads it back:
// 60s as 1m, 90s as 1m30s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
