package llmconf

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/runenv"
)

// Bounds of the configuration's values: far above any real configuration,
// low enough to rule out typos and arithmetic overflow.
const (
	MaxEndpoints       = 64
	MinTimeout         = time.Second
	MaxTimeout         = time.Hour
	MaxOutputTokensCap = 10_000_000
	MaxImageTokensCap  = 1_000_000
	MaxTargetWeight    = 1_000_000
	MaxURLLength       = 2000
	MaxUpstreamLength  = 256
	MaxAliasRules      = 100
	MaxPatterns        = 256
	// MaxAliasNames bounds the extra names of one alias.
	MaxAliasNames = 100
	// MaxModelNameLength bounds an extra name, as every name.
	MaxModelNameLength = 100
	// MaxMoneyMicros bounds a token budget in money: a billion in any
	// currency.
	MaxMoneyMicros = 1_000_000_000_000_000
	// MaxPerMinute bounds requests and tokens per minute.
	MaxPerMinute = 1_000_000_000_000
)

// Estate is what the configuration's rules read of the estate around it:
// the groups and projects its objects name, by name. *estate.Estate is one.
// Users are not asked about: entitlements and rate limits may name users
// that SSO has yet to create, so a user's name is only checked as a name.
type Estate interface {
	GroupByName(name string) *model.Group
	ProjectByName(name string) *model.Project
}

// Validate checks a configuration: every object on its own, and every name
// it uses of its own objects and of the estate e around it. It returns
// every problem found, in a stable order (kind by kind, then object by
// object), so that an estate's validation can list them with its own; nil
// when there are none.
func Validate(g *model.Gateway, e Estate) []basis.Problem {
	v := &validator{g: g, e: e}
	v.providers()
	v.routes()
	v.llmModels()
	v.entitlements()
	v.aliases()
	v.aliasNames()
	v.tokenBudgets()
	v.rateLimits()
	v.guardrails("global guardrails", v.g.Guardrails, "")
	return v.Problems
}

type validator struct {
	g *model.Gateway
	e Estate
	basis.Problems
}

func (v *validator) providers() {
	seen := map[string]bool{}
	for _, p := range v.g.Providers {
		obj := v.Named(seen, "provider", p.Name, p.Description)
		if err := checkBaseURL(p.BaseURL); err != nil {
			v.Add(obj, "baseUrl %v, such as https://api.openai.com/v1", err)
		}
		if p.KeySecret != "" && !runenv.ValidName(p.KeySecret) {
			v.Add(obj, "keySecret %q must name a vault secret: letters, digits and '_', not starting with a digit, such as OPENAI_API_KEY", p.KeySecret)
		}
		v.timeout(obj, p.Timeout)
		v.api(obj, p.API)
	}
}

func (v *validator) routes() {
	seen := map[string]bool{}
	for _, r := range v.g.Routes {
		obj := v.Named(seen, "route", r.Name, r.Description)
		switch {
		case len(r.Endpoints) == 0 && r.App == "":
			v.Add(obj, "has no endpoints and no app: give 1 to %d base URLs of its model servers, such as http://10.0.3.17:8000/v1, or the serving app whose instances serve it (app: vllm)", MaxEndpoints)
		case len(r.Endpoints) > MaxEndpoints:
			v.Add(obj, "has %d endpoints: give 1 to %d base URLs of its model servers, such as http://10.0.3.17:8000/v1", len(r.Endpoints), MaxEndpoints)
		}
		listed := map[string]bool{}
		for _, ep := range r.Endpoints {
			if err := checkBaseURL(ep); err != nil {
				v.Add(obj, "endpoint %v, such as http://10.0.3.17:8000/v1", err)
			} else if listed[ep] {
				v.Add(obj, "lists endpoint %s twice; list each endpoint once", ep)
			}
			listed[ep] = true
		}
		v.timeout(obj, r.Timeout)
		v.api(obj, r.API)
	}
}

// api checks what a provider or a route says it speaks.
func (v *validator) api(obj, api string) {
	if api != "" && !slices.Contains(model.APIs, api) {
		v.Add(obj, "api %q is not one the gateway knows: give %s (the default: chat completions, completions and embeddings, as vLLM, SGLang and llama.cpp serve them), %s or %s",
			api, model.APIOpenAICompatible, model.APIOpenAI, model.APIAnthropic)
	}
}

// checkBaseURL says what is wrong with the base URL of a provider or an
// endpoint. Credentials in a URL would be stored and shown: they belong in
// the vault.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return fmt.Errorf("is missing: give an absolute http or https URL")
	case len(s) > MaxURLLength || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("%q must be an absolute http or https URL without spaces, at most %d characters", s, MaxURLLength)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("%q must be an absolute http or https URL", s)
	case u.User != nil:
		return fmt.Errorf("%q holds a user name or password: remove it, and keep keys in the vault (a provider's keySecret)", s)
	case strings.HasSuffix(strings.ToLower(u.Hostname()), appnet.InstanceDomain):
		return fmt.Errorf("%q is under %s, which names app instances: give a route the serving app instead (app: vllm), and its ready instances are its endpoints", s, appnet.InstanceDomain)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q must have no query or fragment: give the base URL that /chat/completions is added to", s)
	}
	return nil
}

func (v *validator) timeout(obj string, d time.Duration) {
	if d != 0 && (d < MinTimeout || d > MaxTimeout) {
		v.Add(obj, "timeout %s must be between %s and %s (leave it out for the default)", d, MinTimeout, formatDuration(MaxTimeout))
	}
}

func (v *validator) llmModels() {
	seen := map[string]bool{}
	for _, m := range v.g.Models {
		obj := v.Named(seen, "model", m.Name, "")
		switch {
		case m.Provider != "" && m.Route != "":
			v.Add(obj, "names provider %q and route %q: give one of them", m.Provider, m.Route)
		case m.Provider == "" && m.Route == "":
			v.Add(obj, "give the provider or the route that serves it")
		case m.Provider != "" && Provider(v.g, m.Provider) == nil:
			v.Add(obj, "provider %q is not a known provider; add it under gateway providers", m.Provider)
		case m.Route != "" && Route(v.g, m.Route) == nil:
			v.Add(obj, "route %q is not a known route; add it under gateway routes", m.Route)
		}
		if m.Upstream == "" || len(m.Upstream) > MaxUpstreamLength || strings.TrimSpace(m.Upstream) != m.Upstream ||
			strings.ContainsFunc(m.Upstream, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) {
			v.Add(obj, "upstream %q must be the model id the upstream knows, 1 to %d characters without control characters or surrounding spaces", m.Upstream, MaxUpstreamLength)
		}
		if m.InputPriceMicros < 0 || m.InputPriceMicros > basis.MaxPriceMicros {
			v.Add(obj, "inputPrice must be 0 or more per million tokens (and below %d)", basis.MaxPriceMicros/1_000_000)
		}
		if m.OutputPriceMicros < 0 || m.OutputPriceMicros > basis.MaxPriceMicros {
			v.Add(obj, "outputPrice must be 0 or more per million tokens (and below %d)", basis.MaxPriceMicros/1_000_000)
		}
		if err := basis.CheckCurrency(m.Currency); err != nil {
			v.Add(obj, "%v", err)
		}
		if m.MaxOutputTokens < 1 || m.MaxOutputTokens > MaxOutputTokensCap {
			v.Add(obj, "maxOutputTokens %d must be between 1 and %d", m.MaxOutputTokens, MaxOutputTokensCap)
		}
		if m.MaxImageTokens < 0 || m.MaxImageTokens > MaxImageTokensCap {
			v.Add(obj, "maxImageTokens %d must be between 1 and %d (leave it out for the default, %d)", m.MaxImageTokens, MaxImageTokensCap, DefaultMaxImageTokens)
		}
	}
}

func (v *validator) entitlements() {
	seen := map[string]bool{}
	for _, en := range v.g.Entitlements {
		obj := v.Named(seen, "entitlement", en.Name, "")
		v.knownGroups(obj, "", en.Groups)
		listed := map[string]bool{}
		for _, u := range en.Users {
			if err := basis.CheckName(u); err != nil {
				v.Add(obj, "user: %v", err)
			} else if listed[u] {
				v.Add(obj, "lists user %q twice", u)
			}
			listed[u] = true
		}
	}
}

// knownGroups checks a list of group names: each known, each once.
func (v *validator) knownGroups(obj, where string, names []string) {
	listed := map[string]bool{}
	for _, g := range names {
		switch {
		case v.e.GroupByName(g) == nil:
			v.Add(obj, "%sgroup %q is not a known group", where, g)
		case listed[g]:
			v.Add(obj, "%slists group %q twice", where, g)
		}
		listed[g] = true
	}
}

func (v *validator) aliases() {
	seen := map[string]bool{}
	for _, a := range v.g.Aliases {
		obj := v.Named(seen, "alias", a.Name, a.Description)
		if len(a.Rules) == 0 {
			v.Add(obj, "has no rule: give at least one rule with a target model")
		}
		if len(a.Rules) > MaxAliasRules {
			v.Add(obj, "has %d rules, more than %d", len(a.Rules), MaxAliasRules)
		}
		for i, r := range a.Rules {
			v.aliasRule(obj, fmt.Sprintf("rule %d: ", i+1), r)
		}
		v.guardrails(obj+" guardrails", a.Guardrails, a.Name)
	}
}

// aliasNames checks the extra names aliases answer to: each well formed,
// listed once, and meaning one alias only (neither another alias's name
// nor another alias's extra name), so that the name a call asks for always
// resolves to exactly one alias, and an alias's limits, budgets and
// guardrails cannot be got round by asking for it by another name.
func (v *validator) aliasNames() {
	owner := map[string]string{} // an extra name → the alias that answers to it
	for _, a := range v.g.Aliases {
		obj := fmt.Sprintf("alias %q", a.Name)
		if len(a.Names) > MaxAliasNames {
			v.Add(obj, "has %d names, more than %d", len(a.Names), MaxAliasNames)
		}
		listed := map[string]bool{}
		for i, n := range a.Names {
			if err := CheckModelName(n); err != nil {
				v.Add(obj, "name %d %v", i+1, err)
				continue
			}
			other := Alias(v.g, n)
			switch {
			case n == a.Name:
				v.Add(obj, "name %q is the alias's own name: list under names only the extra names it answers to", n)
			case listed[n]:
				v.Add(obj, "lists name %q twice; list each name once", n)
			case other != nil:
				v.Add(obj, "name %q is the name of alias %q: a name must mean one alias, so remove it here or rename that alias", n, other.Name)
			case owner[n] != "" && owner[n] != a.Name:
				v.Add(obj, "name %q is already a name of alias %q: give each name to one alias", n, owner[n])
			}
			listed[n] = true
			if owner[n] == "" {
				owner[n] = a.Name
			}
		}
	}
}

// CheckModelName says what is wrong with a name callers put in a call's
// model field: 1 to 100 letters, digits and . _ - : / @ +, starting with a
// letter or a digit. That holds every vendor's model names
// (claude-sonnet-4-5, gpt-5-codex, meta-llama/Llama-3.1-8B, qwen2.5:7b)
// and keeps out spaces and look-alikes that no client would send.
func CheckModelName(n string) error {
	if n == "" {
		return fmt.Errorf("is empty: remove it, or give the model name callers ask for, such as claude-sonnet-4-5")
	}
	ok := len(n) <= MaxModelNameLength && isAlnum(rune(n[0]))
	for _, r := range n {
		ok = ok && (isAlnum(r) || strings.ContainsRune("._-:/@+", r))
	}
	if !ok {
		return fmt.Errorf("%q must be 1 to %d letters, digits and . _ - : / @ +, starting with a letter or a digit, such as claude-sonnet-4-5", n, MaxModelNameLength)
	}
	return nil
}

func isAlnum(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

func (v *validator) aliasRule(obj, where string, r model.AliasRule) {
	v.knownGroups(obj, where, r.Groups)
	listed := map[string]bool{}
	for _, p := range r.Projects {
		switch {
		case v.e.ProjectByName(p) == nil:
			v.Add(obj, "%sproject %q is not a known project", where, p)
		case listed[p]:
			v.Add(obj, "%slists project %q twice", where, p)
		}
		listed[p] = true
	}
	clear(listed)
	for _, en := range r.Entitlements {
		switch {
		case Entitlement(v.g, en) == nil:
			v.Add(obj, "%sentitlement %q is not a known entitlement; add it under gateway entitlements", where, en)
		case listed[en]:
			v.Add(obj, "%slists entitlement %q twice", where, en)
		}
		listed[en] = true
	}
	if len(r.Targets) == 0 {
		v.Add(obj, "%sgive at least one target model", where)
	}
	clear(listed)
	positive := false
	for _, t := range r.Targets {
		switch {
		case Model(v.g, t.Model) == nil:
			v.Add(obj, "%starget model %q is not a known model; add it under gateway models", where, t.Model)
		case listed[t.Model]:
			v.Add(obj, "%slists target %q twice; give it one weight", where, t.Model)
		}
		listed[t.Model] = true
		if t.Weight < 0 || t.Weight > MaxTargetWeight {
			v.Add(obj, "%sweight %d of %q must be between 0 and %d", where, t.Weight, t.Model, MaxTargetWeight)
		}
		positive = positive || t.Weight > 0
	}
	if len(r.Targets) > 0 && !positive {
		v.Add(obj, "%severy target has weight 0: give at least one a weight above 0", where)
	}
	clear(listed)
	for _, f := range r.Fallbacks {
		switch {
		case Model(v.g, f) == nil:
			v.Add(obj, "%sfallback model %q is not a known model; add it under gateway models", where, f)
		case listed[f]:
			v.Add(obj, "%slists fallback %q twice", where, f)
		}
		listed[f] = true
	}
}

func (v *validator) tokenBudgets() {
	seen := map[string]bool{}
	money := ""
	for _, b := range v.g.Budgets {
		if money == "" && (b.Micros > 0 || b.PerUserMicros > 0) {
			money = BudgetName(b)
		}
		obj := fmt.Sprintf("token budget %s", BudgetName(b))
		v.Once(seen, BudgetName(b), obj, "the project already has a budget for this period; give one budget per project and period")
		if v.e.ProjectByName(b.Project) == nil {
			v.Add(obj, "project %q is not a known project", b.Project)
		}
		if !b.Period.Valid() {
			v.Add(obj, "period %q must be day, week or month", b.Period)
		}
		if b.Tokens < 0 || b.Micros < 0 || b.PerUserTokens < 0 || b.PerUserMicros < 0 {
			v.Add(obj, "tokens, money and the per-user limits must be 0 or more")
			continue
		}
		if b.Tokens > basis.MaxCount || b.PerUserTokens > basis.MaxCount || b.Micros > MaxMoneyMicros || b.PerUserMicros > MaxMoneyMicros {
			v.Add(obj, "is out of range: at most %d tokens or %d in money", int64(basis.MaxCount), int64(MaxMoneyMicros/1_000_000))
			continue
		}
		switch {
		case b.Tokens > 0 && b.Micros > 0:
			v.Add(obj, "give tokens or money, not both (make two budgets of two periods if both matter)")
		case b.Tokens == 0 && b.Micros == 0:
			v.Add(obj, "give tokens or money above 0 (delete the budget instead of setting 0)")
		}
		switch {
		case b.PerUserTokens > 0 && b.Tokens == 0:
			v.Add(obj, "perUserTokens needs a budget in tokens; this one is in money: use perUserMoney")
		case b.PerUserMicros > 0 && b.Micros == 0:
			v.Add(obj, "perUserMoney needs a budget in money; this one is in tokens: use perUserTokens")
		case b.PerUserTokens > b.Tokens:
			v.Add(obj, "perUserTokens %d is above the whole budget of %d tokens", b.PerUserTokens, b.Tokens)
		case b.PerUserMicros > b.Micros:
			v.Add(obj, "perUserMoney %s is above the whole budget of %s", *decimal6(b.PerUserMicros), *decimal6(b.Micros))
		}
	}
	if money != "" {
		v.oneCurrency(money)
	}
}

// oneCurrency refuses money budgets beside models priced in two
// currencies: a budget counts millionths of one currency, and the gateway
// converts none.
func (v *validator) oneCurrency(budget string) {
	var first *model.LLMModel
	for _, m := range v.g.Models {
		if m.InputPriceMicros == 0 && m.OutputPriceMicros == 0 {
			continue // free: no currency is spent
		}
		if first == nil {
			first = m
		} else if m.Currency != first.Currency {
			v.Add(fmt.Sprintf("token budget %s", budget),
				"is in money, but model %q is priced in %s and model %q in %s: the gateway converts no currency, so price every model in one, or budget in tokens",
				first.Name, first.Currency, m.Name, m.Currency)
			return
		}
	}
}

func (v *validator) rateLimits() {
	seen := map[string]bool{}
	for _, r := range v.g.RateLimits {
		obj := fmt.Sprintf("rate limit %s", RateLimitName(r))
		v.Once(seen, RateLimitName(r), obj, "appears twice; give one rate limit per scope and name")
		switch r.Scope {
		case model.RateLimitUser:
			if r.Name != "" {
				if err := basis.CheckName(r.Name); err != nil {
					v.Add(obj, "user: %v", err)
				}
			}
		case model.RateLimitProject:
			if r.Name != "" && v.e.ProjectByName(r.Name) == nil {
				v.Add(obj, "project %q is not a known project (leave the name out to limit each project)", r.Name)
			}
		case model.RateLimitAlias:
			if r.Name != "" && Alias(v.g, r.Name) == nil {
				v.Add(obj, "alias %q is not a known alias (leave the name out to limit each alias)", r.Name)
			}
		default:
			v.Add(obj, "scope %q must be user, project or alias", r.Scope)
		}
		switch {
		case r.RequestsPerMinute < 0 || r.TokensPerMinute < 0 || r.RequestsPerMinute > MaxPerMinute || r.TokensPerMinute > MaxPerMinute:
			v.Add(obj, "requestsPerMinute and tokensPerMinute must be between 0 and %d", int64(MaxPerMinute))
		case r.RequestsPerMinute == 0 && r.TokensPerMinute == 0:
			v.Add(obj, "give requestsPerMinute or tokensPerMinute above 0 (delete the rate limit instead of setting 0)")
		}
	}
}

// guardrails checks patterns and the guard alias; self is the alias the
// guardrails belong to ("" for the global ones).
func (v *validator) guardrails(obj string, g model.Guardrails, self string) {
	if len(g.Deny)+len(g.Allow) > MaxPatterns {
		v.Add(obj, "hold %d patterns, more than %d", len(g.Deny)+len(g.Allow), MaxPatterns)
	}
	for _, l := range []struct {
		kind string
		list []string
	}{{"deny", g.Deny}, {"allow", g.Allow}} {
		for i, p := range l.list {
			if p == "" {
				v.Add(obj, "%s pattern %d is empty: an empty pattern matches everything", l.kind, i+1)
				continue
			}
			if _, err := regexp.Compile(p); err != nil {
				v.Add(obj, "%s pattern %d %q is not a valid regular expression: %v", l.kind, i+1, p, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			}
		}
	}
	switch {
	case g.GuardAlias == "":
	case g.GuardAlias == self:
		v.Add(obj, "guardAlias %q is the alias it guards: name another alias to check its calls", g.GuardAlias)
	case Alias(v.g, g.GuardAlias) == nil:
		v.Add(obj, "guardAlias %q is not a known alias", g.GuardAlias)
	}
}
