package llmconf

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
)

// Apply creates or replaces in g every object the section describes, by
// key, and replaces the global guardrails when the section has them. It
// returns the problems of values that cannot be read, each object's at
// once. References between the objects, and to the estate's groups and
// projects, are names: Validate checks them with the rest of the estate.
func (d *GatewayDoc) Apply(g *model.Gateway) []basis.Problem {
	a := &reader{}
	for i := range d.Providers {
		v := &d.Providers[i]
		obj := fmt.Sprintf("provider %q", v.Name)
		PutProvider(g, &model.Provider{Name: v.Name, Description: v.Description, BaseURL: v.BaseURL, KeySecret: v.KeySecret,
			Timeout: a.duration(obj, v.Timeout), API: v.API})
	}
	for i := range d.Routes {
		v := &d.Routes[i]
		obj := fmt.Sprintf("route %q", v.Name)
		PutRoute(g, &model.Route{Name: v.Name, Description: v.Description, Endpoints: slices.Clone(v.Endpoints),
			Timeout: a.duration(obj, v.Timeout), API: v.API, App: v.App})
	}
	for i := range d.Models {
		v := &d.Models[i]
		obj := fmt.Sprintf("model %q", v.Name)
		m := &model.LLMModel{Name: v.Name, Upstream: v.Upstream, Provider: v.Provider, Route: v.Route, Currency: v.Currency,
			InputPriceMicros:  a.Scaled(obj, "inputPrice", v.InputPrice, 6, 0),
			OutputPriceMicros: a.Scaled(obj, "outputPrice", v.OutputPrice, 6, 0),
			MaxOutputTokens:   a.Count(obj, "maxOutputTokens", v.MaxOutputTokens, DefaultMaxOutputTokens),
			// Absent stays 0, the gateway's default: a configuration
			// written before the field exports as it was.
			MaxImageTokens: a.Count(obj, "maxImageTokens", v.MaxImageTokens, 0),
		}
		if n, err := optNumber(v.MaxImageTokens); err == nil && n != nil && *n == 0 {
			a.Add(obj, "maxImageTokens must be between 1 and %d (leave it out for the default, %d)", MaxImageTokensCap, DefaultMaxImageTokens)
		}
		PutModel(g, m)
	}
	for i := range d.Entitlements {
		v := &d.Entitlements[i]
		PutEntitlement(g, &model.Entitlement{Name: v.Name, Groups: slices.Clone(v.Groups), Users: slices.Clone(v.Users)})
	}
	for i := range d.Aliases {
		v := &d.Aliases[i]
		obj := fmt.Sprintf("alias %q", v.Name)
		al := &model.Alias{Name: v.Name, Description: v.Description, Names: slices.Clone(v.Names), Guardrails: guardrailsOf(v.Guardrails)}
		for j, rd := range v.Rules {
			r := model.AliasRule{Groups: slices.Clone(rd.Groups), Projects: slices.Clone(rd.Projects),
				Entitlements: slices.Clone(rd.Entitlements), Fallbacks: slices.Clone(rd.Fallbacks)}
			for _, td := range rd.Targets {
				w := a.Count(obj, fmt.Sprintf("rule %d: weight of %s", j+1, td.Model), td.Weight, DefaultTargetWeight)
				r.Targets = append(r.Targets, model.Target{Model: td.Model, Weight: int(w)})
			}
			al.Rules = append(al.Rules, r)
		}
		PutAlias(g, al)
	}
	for i := range d.Budgets {
		v := &d.Budgets[i]
		b := &model.TokenBudget{Project: v.Project, Period: model.BudgetPeriod(strings.ToLower(v.Period))}
		obj := fmt.Sprintf("token budget %s", BudgetName(b))
		b.Tokens = a.Count(obj, "tokens", v.Tokens, 0)
		b.Micros = a.Scaled(obj, "money", v.Money, 6, 0)
		b.PerUserTokens = a.Count(obj, "perUserTokens", v.PerUserTokens, 0)
		b.PerUserMicros = a.Scaled(obj, "perUserMoney", v.PerUserMoney, 6, 0)
		PutTokenBudget(g, b)
	}
	for i := range d.RateLimits {
		v := &d.RateLimits[i]
		r := &model.RateLimit{Scope: model.RateLimitScope(strings.ToLower(v.Scope)), Name: v.Name}
		obj := fmt.Sprintf("rate limit %s", RateLimitName(r))
		r.RequestsPerMinute = a.Count(obj, "requestsPerMinute", v.RequestsPerMinute, 0)
		r.TokensPerMinute = a.Count(obj, "tokensPerMinute", v.TokensPerMinute, 0)
		PutRateLimit(g, r)
	}
	if d.Guardrails != nil {
		g.Guardrails = guardrailsOf(d.Guardrails)
	}
	return a.Problems
}

func guardrailsOf(d *GuardrailsDoc) model.Guardrails {
	if d == nil {
		return model.Guardrails{}
	}
	return model.Guardrails{Deny: slices.Clone(d.Deny), Allow: slices.Clone(d.Allow), GuardAlias: d.GuardAlias}
}

// reader reads the section's values, collecting a problem for each one
// that cannot be read.
type reader struct {
	basis.Problems
}

// duration reads an optional Go duration ("60s", "2m").
func (a *reader) duration(object, s string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		a.Add(object, "timeout %q is not a duration: write it as 30s, 2m or 1h", s)
	}
	return d
}

// Duplicates lists a problem for each object the section describes twice,
// by key (a budget by project and period, whatever the case of the period;
// a rate limit by scope and name).
func (d *GatewayDoc) Duplicates() []basis.Problem {
	return slices.Concat(
		basis.DescribedTwice("provider", d.Providers, func(v ProviderDoc) string { return v.Name }),
		basis.DescribedTwice("route", d.Routes, func(v RouteDoc) string { return v.Name }),
		basis.DescribedTwice("model", d.Models, func(v ModelDoc) string { return v.Name }),
		basis.DescribedTwice("entitlement", d.Entitlements, func(v EntitlementDoc) string { return v.Name }),
		basis.DescribedTwice("alias", d.Aliases, func(v AliasDoc) string { return v.Name }),
		basis.DescribedTwice("token budget", d.Budgets, func(v TokenBudgetDoc) string {
			return BudgetName(&model.TokenBudget{Project: v.Project, Period: model.BudgetPeriod(strings.ToLower(v.Period))})
		}),
		basis.DescribedTwice("rate limit", d.RateLimits, func(v RateLimitDoc) string {
			return RateLimitName(&model.RateLimit{Scope: model.RateLimitScope(strings.ToLower(v.Scope)), Name: v.Name})
		}))
}

// Export describes a configuration as the section of an estate file that
// Apply turns back into the same configuration: every object in key order
// with its defaults written out. It returns nil for an empty configuration,
// so that an estate without one has no gateway section.
func Export(src *model.Gateway) *GatewayDoc {
	if Empty(src) {
		return nil
	}
	c := Clone(src)
	g := &c
	Normalize(g)
	d := &GatewayDoc{}
	for _, v := range g.Providers {
		d.Providers = append(d.Providers, ProviderDoc{Name: v.Name, Description: v.Description, BaseURL: v.BaseURL,
			KeySecret: v.KeySecret, Timeout: optDuration(v.Timeout), API: v.API})
	}
	for _, v := range g.Routes {
		d.Routes = append(d.Routes, RouteDoc{Name: v.Name, Description: v.Description, Endpoints: nilIfEmpty(v.Endpoints),
			Timeout: optDuration(v.Timeout), API: v.API, App: v.App})
	}
	for _, v := range g.Models {
		d.Models = append(d.Models, ModelDoc{Name: v.Name, Provider: v.Provider, Route: v.Route, Upstream: v.Upstream,
			InputPrice: decimal6(v.InputPriceMicros), OutputPrice: decimal6(v.OutputPriceMicros), Currency: v.Currency,
			MaxOutputTokens: basis.NumberOf(v.MaxOutputTokens), MaxImageTokens: optCount(v.MaxImageTokens)})
	}
	for _, v := range g.Entitlements {
		d.Entitlements = append(d.Entitlements, EntitlementDoc{Name: v.Name, Groups: nilIfEmpty(v.Groups), Users: nilIfEmpty(v.Users)})
	}
	for _, v := range g.Aliases {
		ad := AliasDoc{Name: v.Name, Description: v.Description, Names: nilIfEmpty(v.Names), Guardrails: guardrailsDoc(v.Guardrails)}
		for _, r := range v.Rules {
			rd := AliasRuleDoc{Groups: nilIfEmpty(r.Groups), Projects: nilIfEmpty(r.Projects), Entitlements: nilIfEmpty(r.Entitlements),
				Fallbacks: nilIfEmpty(r.Fallbacks)}
			for _, t := range r.Targets {
				td := TargetDoc{Model: t.Model}
				if t.Weight != DefaultTargetWeight {
					td.Weight = basis.NumberOf(int64(t.Weight))
				}
				rd.Targets = append(rd.Targets, td)
			}
			ad.Rules = append(ad.Rules, rd)
		}
		d.Aliases = append(d.Aliases, ad)
	}
	for _, v := range g.Budgets {
		bd := TokenBudgetDoc{Project: v.Project, Period: string(v.Period)}
		if v.Tokens != 0 {
			bd.Tokens = basis.NumberOf(v.Tokens)
		}
		if v.Micros != 0 {
			bd.Money = decimal6(v.Micros)
		}
		if v.PerUserTokens != 0 {
			bd.PerUserTokens = basis.NumberOf(v.PerUserTokens)
		}
		if v.PerUserMicros != 0 {
			bd.PerUserMoney = decimal6(v.PerUserMicros)
		}
		d.Budgets = append(d.Budgets, bd)
	}
	for _, v := range g.RateLimits {
		rd := RateLimitDoc{Scope: string(v.Scope), Name: v.Name}
		if v.RequestsPerMinute != 0 {
			rd.RequestsPerMinute = basis.NumberOf(v.RequestsPerMinute)
		}
		if v.TokensPerMinute != 0 {
			rd.TokensPerMinute = basis.NumberOf(v.TokensPerMinute)
		}
		d.RateLimits = append(d.RateLimits, rd)
	}
	d.Guardrails = guardrailsDoc(g.Guardrails)
	return d
}

func guardrailsDoc(g model.Guardrails) *GuardrailsDoc {
	if GuardrailsEmpty(g) {
		return nil
	}
	return &GuardrailsDoc{Deny: nilIfEmpty(g.Deny), Allow: nilIfEmpty(g.Allow), GuardAlias: g.GuardAlias}
}

func optDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return formatDuration(d)
}

func nilIfEmpty(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	return slices.Clone(list)
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

// optNumber reads a count given (nil when absent).
func optNumber(n *basis.Number) (*int64, error) {
	if n == nil || *n == "" {
		return nil, nil
	}
	v, err := n.Count("")
	return &v, err
}

// optCount writes a count that 0 leaves out.
func optCount(v int64) *basis.Number {
	if v == 0 {
		return nil
	}
	return basis.NumberOf(v)
}

// decimal6 writes millionths as a decimal number.
func decimal6(v int64) *basis.Number {
	return basis.NumberOfText(strconv.FormatFloat(float64(v)/1e6, 'f', -1, 64))
}
