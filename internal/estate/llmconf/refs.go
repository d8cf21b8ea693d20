package llmconf

import (
	"fmt"
	"slices"

	"github.com/klique-ai/klique/internal/model"
)

// References lists, in words, the configuration's objects that name one of
// its objects, so that deleting it can be refused with the list of what to
// change first. kind is KindProvider, KindRoute, KindModel, KindAlias or
// KindEntitlement; no object names one of another kind.
func References(g *model.Gateway, kind, name string) []string {
	switch kind {
	case KindProvider, KindRoute, KindModel, KindAlias, KindEntitlement:
		return references(g, kind, name)
	}
	return nil
}

// GroupReferences lists, in words, the configuration's objects that name a
// group of the estate (entitlements and alias rules), so that deleting the
// group can be refused with the list of what to change first.
func GroupReferences(g *model.Gateway, name string) []string { return references(g, group, name) }

// ProjectReferences lists, in words, the configuration's objects that name
// a project of the estate (token budgets, rate limits and alias rules), so
// that deleting the project can be refused with the list of what to change
// first.
func ProjectReferences(g *model.Gateway, name string) []string {
	return references(g, project, name)
}

// group and project stand, in references, for the estate's objects that
// the configuration names beside its own.
const (
	group   = "group"
	project = "project"
)

func references(g *model.Gateway, kind, name string) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	switch kind {
	case KindProvider, KindRoute:
		for _, m := range g.Models {
			if (kind == KindProvider && m.Provider == name) || (kind == KindRoute && m.Route == name) {
				add("model %q", m.Name)
			}
		}
	case group:
		for _, en := range g.Entitlements {
			if slices.Contains(en.Groups, name) {
				add("entitlement %q", en.Name)
			}
		}
	case project:
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
			case group:
				uses = slices.Contains(r.Groups, name)
			case project:
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

// Rename carries renames of the estate's groups and projects (old name to
// new) into the configuration, which names them: an alias rule of group
// "vision" follows the group when it becomes "computer-vision".
func Rename(g *model.Gateway, groups, projects map[string]string) {
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
