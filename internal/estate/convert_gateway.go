package estate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
)

// gateway creates or replaces every gateway object the document describes,
// by key. References between them, and to groups and projects, are names
// checked by Validate with the rest of the estate.
func (a *applier) gateway(d *GatewayDoc) {
	e := a.e
	for i := range d.Providers {
		v := &d.Providers[i]
		obj := fmt.Sprintf("provider %q", v.Name)
		llmconf.PutProvider(&e.Gateway, &model.Provider{Name: v.Name, Description: v.Description, BaseURL: v.BaseURL, KeySecret: v.KeySecret,
			Timeout: a.duration(obj, v.Timeout)})
	}
	for i := range d.Routes {
		v := &d.Routes[i]
		obj := fmt.Sprintf("route %q", v.Name)
		llmconf.PutRoute(&e.Gateway, &model.Route{Name: v.Name, Description: v.Description, Endpoints: slices.Clone(v.Endpoints),
			Timeout: a.duration(obj, v.Timeout)})
	}
	for i := range d.Models {
		v := &d.Models[i]
		obj := fmt.Sprintf("model %q", v.Name)
		m := &model.LLMModel{Name: v.Name, Upstream: v.Upstream, Provider: v.Provider, Route: v.Route, Currency: v.Currency,
			InputPriceMicros:  a.scaled(obj, "inputPrice", v.InputPrice, 6, 0),
			OutputPriceMicros: a.scaled(obj, "outputPrice", v.OutputPrice, 6, 0),
			MaxOutputTokens:   a.count(obj, "maxOutputTokens", v.MaxOutputTokens, llmconf.DefaultMaxOutputTokens),
		}
		llmconf.PutModel(&e.Gateway, m)
	}
	for i := range d.Entitlements {
		v := &d.Entitlements[i]
		llmconf.PutEntitlement(&e.Gateway, &model.Entitlement{Name: v.Name, Groups: slices.Clone(v.Groups), Users: slices.Clone(v.Users)})
	}
	for i := range d.Aliases {
		v := &d.Aliases[i]
		obj := fmt.Sprintf("alias %q", v.Name)
		al := &model.Alias{Name: v.Name, Description: v.Description, Guardrails: guardrailsOf(v.Guardrails)}
		for j, rd := range v.Rules {
			r := model.AliasRule{Groups: slices.Clone(rd.Groups), Projects: slices.Clone(rd.Projects),
				Entitlements: slices.Clone(rd.Entitlements), Fallbacks: slices.Clone(rd.Fallbacks)}
			for _, td := range rd.Targets {
				w := a.count(obj, fmt.Sprintf("rule %d: weight of %s", j+1, td.Model), td.Weight, llmconf.DefaultTargetWeight)
				r.Targets = append(r.Targets, model.Target{Model: td.Model, Weight: int(w)})
			}
			al.Rules = append(al.Rules, r)
		}
		llmconf.PutAlias(&e.Gateway, al)
	}
	for i := range d.Budgets {
		v := &d.Budgets[i]
		b := &model.TokenBudget{Project: v.Project, Period: model.BudgetPeriod(strings.ToLower(v.Period))}
		obj := fmt.Sprintf("token budget %s", llmconf.BudgetName(b))
		b.Tokens = a.count(obj, "tokens", v.Tokens, 0)
		b.Micros = a.scaled(obj, "money", v.Money, 6, 0)
		b.PerUserTokens = a.count(obj, "perUserTokens", v.PerUserTokens, 0)
		b.PerUserMicros = a.scaled(obj, "perUserMoney", v.PerUserMoney, 6, 0)
		llmconf.PutTokenBudget(&e.Gateway, b)
	}
	for i := range d.RateLimits {
		v := &d.RateLimits[i]
		r := &model.RateLimit{Scope: model.RateLimitScope(strings.ToLower(v.Scope)), Name: v.Name}
		obj := fmt.Sprintf("rate limit %s", llmconf.RateLimitName(r))
		r.RequestsPerMinute = a.count(obj, "requestsPerMinute", v.RequestsPerMinute, 0)
		r.TokensPerMinute = a.count(obj, "tokensPerMinute", v.TokensPerMinute, 0)
		llmconf.PutRateLimit(&e.Gateway, r)
	}
	if d.Guardrails != nil {
		e.Gateway.Guardrails = guardrailsOf(d.Guardrails)
	}
}

func guardrailsOf(d *GuardrailsDoc) model.Guardrails {
	if d == nil {
		return model.Guardrails{}
	}
	return model.Guardrails{Deny: slices.Clone(d.Deny), Allow: slices.Clone(d.Allow), GuardAlias: d.GuardAlias}
}

// count reads an optional whole count, with def when it is absent.
func (a *applier) count(object, field string, n *basis.Number, def int64) int64 {
	if n == nil || *n == "" {
		return def
	}
	v, err := n.Count(field)
	if err != nil {
		a.add(object, "%v", err)
	}
	return v
}

// duration reads an optional Go duration ("60s", "2m").
func (a *applier) duration(object, s string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		a.add(object, "timeout %q is not a duration: write it as 30s, 2m or 1h", s)
	}
	return d
}

// exportGateway describes a gateway configuration as the file's section,
// every object in key order with its defaults written out.
func exportGateway(src *model.Gateway) *GatewayDoc {
	c := llmconf.Clone(src)
	g := &c
	llmconf.Normalize(g)
	d := &GatewayDoc{}
	for _, v := range g.Providers {
		d.Providers = append(d.Providers, ProviderDoc{Name: v.Name, Description: v.Description, BaseURL: v.BaseURL,
			KeySecret: v.KeySecret, Timeout: optDuration(v.Timeout)})
	}
	for _, v := range g.Routes {
		d.Routes = append(d.Routes, RouteDoc{Name: v.Name, Description: v.Description, Endpoints: nilIfEmpty(v.Endpoints),
			Timeout: optDuration(v.Timeout)})
	}
	for _, v := range g.Models {
		d.Models = append(d.Models, ModelDoc{Name: v.Name, Provider: v.Provider, Route: v.Route, Upstream: v.Upstream,
			InputPrice: decimal6(v.InputPriceMicros), OutputPrice: decimal6(v.OutputPriceMicros), Currency: v.Currency,
			MaxOutputTokens: basis.NumberOf(v.MaxOutputTokens)})
	}
	for _, v := range g.Entitlements {
		d.Entitlements = append(d.Entitlements, EntitlementDoc{Name: v.Name, Groups: nilIfEmpty(v.Groups), Users: nilIfEmpty(v.Users)})
	}
	for _, v := range g.Aliases {
		ad := AliasDoc{Name: v.Name, Description: v.Description, Guardrails: guardrailsDoc(v.Guardrails)}
		for _, r := range v.Rules {
			rd := AliasRuleDoc{Groups: nilIfEmpty(r.Groups), Projects: nilIfEmpty(r.Projects), Entitlements: nilIfEmpty(r.Entitlements),
				Fallbacks: nilIfEmpty(r.Fallbacks)}
			for _, t := range r.Targets {
				td := TargetDoc{Model: t.Model}
				if t.Weight != llmconf.DefaultTargetWeight {
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
	if llmconf.GuardrailsEmpty(g) {
		return nil
	}
	return &GuardrailsDoc{Deny: nilIfEmpty(g.Deny), Allow: nilIfEmpty(g.Allow), GuardAlias: g.GuardAlias}
}

// decimal6 writes millionths as a decimal number.
func decimal6(v int64) *basis.Number {
	return basis.NumberOfText(strconv.FormatFloat(float64(v)/1e6, 'f', -1, 64))
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
