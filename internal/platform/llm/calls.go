package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/guard"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// The LLM gateway asks the platform service, for every call, who may call
// which alias for which project, where the call may go, and against which
// budgets and rate limits it counts: the rules live here, the gateway
// carries calls and counters. Every call answers from memory (the estate
// cached per tenant, checked against the store at most once a second).

// gatewayEstateAge is how old a gateway call's view of the estate may be:
// changes made through another replica take effect within it.
const gatewayEstateAge = time.Second

// WindowUnit is what a limit window counts.
type WindowUnit int

const (
	UnitRequests WindowUnit = iota
	UnitTokens
	UnitMicros
)

// LimitWindow is one budget or rate limit a call counts against, as the
// rules say; the gateway fills in the amount from its estimate.
type LimitWindow struct {
	Key   string
	Limit int64
	Unit  WindowUnit
	// Ends is when the window resets.
	Ends time.Time
	// Budget windows are seeded from the ledger (Spend); rate windows
	// start at zero each minute.
	Budget bool
	// Spend says what the ledger sum of a budget window covers.
	Spend SpendQuery
	// Describe says which limit it is, for the caller: "the monthly token
	// budget of project fraud-models".
	Describe string
}

// SpendQuery is a budget window's part of the ledger.
type SpendQuery struct {
	TenantID, ProjectID, UserID string
	From, To                    time.Time
	// Except leaves these calls (ids) out: those the budget counter
	// being seeded counts already (see gateway/limits.Outstanding).
	Except []string
}

// Upstream is one place a call may go, in the order to try.
type Upstream struct {
	Model    *model.LLMModel
	Provider *model.Provider // or
	Route    *model.Route
	// Key is the provider's API key from the vault ("" for routes).
	Key string
}

// ModelGrant is the platform's answer to "may this caller make this call":
// who it is charged to, where it goes, what guards it, and what it counts
// against.
type ModelGrant struct {
	TenantID, UserID, UserName                 string
	ProjectID, ProjectName, GroupID, GroupName string
	Alias                                      *model.Alias
	Upstreams                                  []Upstream
	// Guard holds the global and the alias's pattern guardrails (nil when
	// none); GuardAlias names the alias of a model-based check.
	Guard      *guard.Set
	GuardAlias string
	Windows    []LimitWindow
}

// AuthorizeModelCall decides a call to an alias for a project (a
// project-scoped credential's, or projectRef, a project id or name).
func (s *LLM) AuthorizeModelCall(ctx context.Context, aliasName, projectRef string, now time.Time) (*ModelGrant, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if !p.CanWrite() {
		return nil, kernel.Forbidden("a viewer cannot call models: calls spend the project's budget")
	}
	e, version, err := s.k.RecentEstate(ctx, p.TenantID, gatewayEstateAge)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	pr, err := gatewayProject(e, p, projectRef)
	if err != nil {
		return nil, err
	}
	g := &e.Gateway
	// The alias by its name or one of its extra names: either way the call
	// is the alias's, governed and recorded under its name.
	alias := s.aliases.lookup(p.TenantID, e, aliasName)
	if alias == nil {
		return nil, kernel.NotFound("no model alias %s: GET /v1/models lists the aliases you may call", kernel.Quote(aliasName))
	}
	_, rule := MatchingRule(e, alias, p, pr.ID)
	if rule == nil {
		return nil, kernel.Forbidden("model alias %s is not open to you for project %s", kernel.Quote(alias.Name), pr.Name)
	}
	grant := &ModelGrant{TenantID: p.TenantID, UserID: p.UserID, UserName: p.UserName,
		ProjectID: pr.ID, ProjectName: pr.Name, Alias: alias, GuardAlias: g.Guardrails.GuardAlias}
	if alias.Guardrails.GuardAlias != "" {
		grant.GuardAlias = alias.Guardrails.GuardAlias
	}
	grant.GroupID = chargedGroup(p, pr)
	grant.GroupName = e.GroupName(grant.GroupID)
	if grant.Guard, err = s.guards.get(p.TenantID, version, g.Guardrails, alias); err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	var keyless, sets []string
	for _, name := range upstreamOrder(rule) {
		u, err := s.upstream(ctx, p.TenantID, g, name)
		if errors.Is(err, errNoKey) {
			// A provider whose key is not in the vault cannot take the call:
			// the rule's next target may (a self-hosted fallback needs no
			// key). Said once per provider in the log (providerKey).
			keyless = append(keyless, u.Provider.Name)
			sets = append(sets, fmt.Sprintf("'klique secret set %s --tenant'", u.Provider.KeySecret))
			continue
		}
		if err != nil {
			return nil, err
		}
		grant.Upstreams = append(grant.Upstreams, u)
	}
	if len(grant.Upstreams) == 0 && len(keyless) > 0 {
		return nil, kernel.Unavailable("model alias %s has no target the gateway can call: the key of provider %s is not in the vault; an admin sets it with %s, or points the alias at a self-hosted model",
			kernel.Quote(alias.Name), strings.Join(keyless, ", "), strings.Join(sets, " and "))
	}
	grant.Windows = s.windows.get(p, pr, alias, version, now, func() []LimitWindow { return limitWindows(g, p, pr, alias, now) })
	return grant, nil
}

// windowCache keeps the limit windows of each caller, project and alias for
// the current minute: every key and limit in them is the same for the
// whole minute (periods start on minute boundaries too), and building them
// is most of a call's work in the platform service. Grants share the
// slices, which no one changes.
type windowCache struct {
	mu     sync.Mutex
	minute int64
	byKey  map[string][]LimitWindow
}

func (c *windowCache) get(p *identity.Principal, pr *model.Project, a *model.Alias, version int64, now time.Time, build func() []LimitWindow) []LimitWindow {
	minute := now.Unix() / 60
	k := p.TenantID + "|" + strconv.FormatInt(version, 10) + "|" + p.UserID + "|" + p.UserName + "|" + pr.ID + "|" + a.Name
	c.mu.Lock()
	if c.minute != minute || len(c.byKey) > 50_000 {
		c.minute, c.byKey = minute, map[string][]LimitWindow{}
	}
	ws, ok := c.byKey[k]
	c.mu.Unlock()
	if ok {
		return ws
	}
	ws = build()
	c.mu.Lock()
	if c.minute == minute {
		c.byKey[k] = ws
	}
	c.mu.Unlock()
	return ws
}

// gatewayProject resolves the project a call is for.
func gatewayProject(e *estate.Estate, p *identity.Principal, ref string) (*model.Project, error) {
	if p.ProjectID != "" {
		pr := e.Project(p.ProjectID)
		if pr == nil {
			return nil, kernel.NotFound("the project of this credential no longer exists")
		}
		if ref != "" && ref != pr.ID && ref != pr.Name {
			return nil, kernel.Forbidden("this credential is scoped to project %s, not %s", pr.Name, kernel.Quote(ref))
		}
		// The scope narrows what the credential's owner may use; it grants
		// nothing: one who has left the project's group may no longer
		// spend its budget, as with any other credential.
		if !kernel.UsesProject(p, pr) {
			return nil, kernel.Forbidden("this credential is scoped to project %s, which you may no longer use: you are not in its group", pr.Name)
		}
		return pr, nil
	}
	if ref == "" {
		if pr := kernel.DefaultProject(e, p); pr != nil {
			return pr, nil
		}
		e := kernel.Invalid("say which project the call is for: send the header X-Klique-Project: <project>, use an API key scoped to a project, or set your default project with 'klique project use NAME'")
		e.Reason = kernel.ReasonProjectRequired
		return nil, e
	}
	pr := e.Project(ref)
	if pr == nil {
		pr = e.ProjectByName(ref)
	}
	if pr == nil || !kernel.UsesProject(p, pr) {
		return nil, kernel.NotFound("no project %s you may use", kernel.Quote(ref))
	}
	return pr, nil
}

// chargedGroup is the group a call is attributed to: the project's group,
// else the caller's first group by name ("" for an admin in none).
func chargedGroup(p *identity.Principal, pr *model.Project) string {
	if pr.GroupID != "" {
		return pr.GroupID
	}
	if len(p.Groups) > 0 {
		return p.Groups[0].GroupID
	}
	return ""
}

func listHas(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// upstreamOrder picks a rule's target by weight, then its fallbacks, each
// model once.
func upstreamOrder(r *model.AliasRule) []string {
	total := 0
	for _, t := range r.Targets {
		total += max(t.Weight, 0)
	}
	var first string
	if total > 0 {
		n := rand.IntN(total)
		for _, t := range r.Targets {
			if n < max(t.Weight, 0) {
				first = t.Model
				break
			}
			n -= max(t.Weight, 0)
		}
	} else if len(r.Targets) > 0 {
		first = r.Targets[0].Model
	}
	out := []string{first}
	for _, f := range r.Fallbacks {
		if !listHas(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// upstream resolves a model to where it is served, with the provider's
// key from the vault.
func (s *LLM) upstream(ctx context.Context, tenantID string, g *model.Gateway, name string) (Upstream, error) {
	u := Upstream{Model: llmconf.Model(g, name)}
	if u.Model == nil {
		return u, s.k.Internal(ctx, fmt.Errorf("model %q of an alias rule is not configured", name))
	}
	if u.Model.Provider != "" {
		u.Provider = llmconf.Provider(g, u.Model.Provider)
	}
	if u.Model.Route != "" {
		u.Route = llmconf.Route(g, u.Model.Route)
		if u.Route != nil {
			// The route as it stands now: its ready app instances are
			// endpoints too (a copy: the estate is shared).
			if eps := s.routeEndpoints(tenantID, u.Route); len(eps) != len(u.Route.Endpoints) {
				r := *u.Route
				r.Endpoints = eps
				u.Route = &r
			}
		}
	}
	if u.Provider != nil {
		key, err := s.providerKey(ctx, tenantID, u.Provider)
		if err != nil {
			return u, err
		}
		u.Key = key
	}
	return u, nil
}

// errNoKey says a provider's key is not in the vault: its models are
// skipped, as a call to them could only fail.
var errNoKey = errors.New("the provider's key is not in the vault")

// providerKeys caches decrypted provider keys for a short while, so that
// a call does not read and open the vault; and that a key is missing, for
// as long, so that a call falling back past a keyless provider does not
// read the vault either.
type providerKeys struct {
	mu   sync.Mutex
	keys map[string]cachedKey
	// missing holds the providers whose missing key was logged, so the log
	// says it once per provider (again only once the key was seen since).
	missing map[string]bool
}

type cachedKey struct {
	value string
	// absent is set when the vault has no such secret.
	absent bool
	until  time.Time
}

// providerKeyTTL bounds how long a changed provider key takes to be used.
const providerKeyTTL = 10 * time.Second

func (s *LLM) providerKey(ctx context.Context, tenantID string, pv *model.Provider) (string, error) {
	secret := pv.KeySecret
	if secret == "" {
		return "", nil
	}
	k := tenantID + "|" + secret
	now := time.Now()
	s.keys.mu.Lock()
	c, ok := s.keys.keys[k]
	s.keys.mu.Unlock()
	if ok && now.Before(c.until) {
		if c.absent {
			return "", errNoKey
		}
		return c.value, nil
	}
	sec, err := s.k.Store.GetSecret(ctx, tenantID, model.ScopeTenant, tenantID, secret)
	if errors.Is(err, store.ErrNotFound) {
		s.keys.mu.Lock()
		if s.keys.keys == nil {
			s.keys.keys = map[string]cachedKey{}
		}
		if s.keys.missing == nil {
			s.keys.missing = map[string]bool{}
		}
		s.keys.keys[k] = cachedKey{absent: true, until: now.Add(providerKeyTTL)}
		first := !s.keys.missing[k+"|"+pv.Name]
		s.keys.missing[k+"|"+pv.Name] = true
		s.keys.mu.Unlock()
		if first {
			s.k.Log.Warn("gateway: provider "+pv.Name+" has no key in the vault; calls skip its models and go to the rule's next target. An admin sets it with 'klique secret set "+secret+" --tenant'",
				"tenant", tenantID, "provider", pv.Name, "secret", secret)
		}
		return "", errNoKey
	}
	if err != nil {
		return "", s.k.Internal(ctx, fmt.Errorf("read provider key %s: %w", secret, err))
	}
	if s.k.Vault == nil {
		return "", kernel.Unavailable("this server has no vault key to open provider keys with")
	}
	v, err := s.k.Vault.Open(sec.Ciphertext, kernel.SecretContext(sec.TenantID, sec.Scope, sec.ScopeID, sec.Name))
	if err != nil {
		return "", s.k.Internal(ctx, fmt.Errorf("open provider key %s: %w", secret, err))
	}
	s.keys.mu.Lock()
	if s.keys.keys == nil {
		s.keys.keys = map[string]cachedKey{}
	}
	s.keys.keys[k] = cachedKey{value: string(v), until: now.Add(providerKeyTTL)}
	delete(s.keys.missing, k+"|"+pv.Name)
	s.keys.mu.Unlock()
	return string(v), nil
}

// guardCache keeps compiled guardrails per tenant, estate version and
// alias.
type guardCache struct {
	mu   sync.Mutex
	sets map[string]*guard.Set
}

func (c *guardCache) get(tenantID string, version int64, global model.Guardrails, a *model.Alias) (*guard.Set, error) {
	k := tenantID + "|" + strconv.FormatInt(version, 10) + "|" + a.Name
	c.mu.Lock()
	set, ok := c.sets[k]
	c.mu.Unlock()
	if ok {
		return set, nil
	}
	set, err := guard.Compile(global, a.Name, a.Guardrails)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.sets == nil || len(c.sets) > 10000 {
		c.sets = map[string]*guard.Set{}
	}
	c.sets[k] = set
	c.mu.Unlock()
	return set, nil
}

// limitWindows lists the budgets and rate limits a call counts against.
func limitWindows(g *model.Gateway, p *identity.Principal, pr *model.Project, a *model.Alias, now time.Time) []LimitWindow {
	var out []LimitWindow
	minuteEnd := now.UTC().Truncate(time.Minute).Add(time.Minute)
	minute := strconv.FormatInt(minuteEnd.Unix(), 10)
	for _, rl := range g.RateLimits {
		var id, what string
		switch rl.Scope {
		case model.RateLimitUser:
			if rl.Name != "" && rl.Name != p.UserName {
				continue
			}
			id, what = p.UserID, "user "+p.UserName
		case model.RateLimitProject:
			if rl.Name != "" && rl.Name != pr.Name {
				continue
			}
			id, what = pr.ID, "project "+pr.Name
		case model.RateLimitAlias:
			if rl.Name != "" && rl.Name != a.Name {
				continue
			}
			id, what = a.Name, "alias "+a.Name
		default:
			continue
		}
		key := p.TenantID + "/rl/" + string(rl.Scope) + "/" + id + "/" + minute
		if rl.RequestsPerMinute > 0 {
			out = append(out, LimitWindow{Key: key + "/req", Limit: rl.RequestsPerMinute, Unit: UnitRequests, Ends: minuteEnd,
				Describe: fmt.Sprintf("the limit of %d requests per minute for %s", rl.RequestsPerMinute, what)})
		}
		if rl.TokensPerMinute > 0 {
			out = append(out, LimitWindow{Key: key + "/tok", Limit: rl.TokensPerMinute, Unit: UnitTokens, Ends: minuteEnd,
				Describe: fmt.Sprintf("the limit of %d tokens per minute for %s", rl.TokensPerMinute, what)})
		}
	}
	for _, b := range g.Budgets {
		if b.Project != pr.Name {
			continue
		}
		from, to := engine.PeriodStart(b.Period, now), engine.PeriodEnd(b.Period, now)
		base := budgetKey(p.TenantID, pr.ID, b.Period, from)
		spend := SpendQuery{TenantID: p.TenantID, ProjectID: pr.ID, From: from, To: to}
		per := periodWord(b.Period)
		add := func(key string, limit int64, unit WindowUnit, q SpendQuery, what string) {
			if limit > 0 {
				out = append(out, LimitWindow{Key: key, Limit: limit, Unit: unit, Ends: to, Budget: true, Spend: q, Describe: what})
			}
		}
		add(base+"/tok", b.Tokens, UnitTokens, spend, fmt.Sprintf("the %s token budget of project %s (%d tokens)", per, pr.Name, b.Tokens))
		add(base+"/money", b.Micros, UnitMicros, spend, fmt.Sprintf("the %s budget of project %s (%s)", per, pr.Name, decimalMicros(b.Micros)))
		mine := spend
		mine.UserID = p.UserID
		add(userBudgetKey(base, p.UserID)+"/tok", b.PerUserTokens, UnitTokens, mine,
			fmt.Sprintf("your %s token limit in project %s (%d tokens)", per, pr.Name, b.PerUserTokens))
		add(userBudgetKey(base, p.UserID)+"/money", b.PerUserMicros, UnitMicros, mine,
			fmt.Sprintf("your %s spending limit in project %s (%s)", per, pr.Name, decimalMicros(b.PerUserMicros)))
	}
	return out
}

// budgetKey names a project's budget counters in a period; the budgets
// people read (TokenBudgetViews) name the same counters, so that they show
// what the gateway enforces.
func budgetKey(tenantID, projectID string, period model.BudgetPeriod, from time.Time) string {
	return tenantID + "/budget/" + projectID + "/" + string(period) + "/" + strconv.FormatInt(from.Unix(), 10)
}

// userBudgetKey names one user's part of a project's budget counters.
func userBudgetKey(base, userID string) string { return base + "/u/" + userID }

func periodWord(p model.BudgetPeriod) string {
	switch p {
	case model.PeriodDay:
		return "daily"
	case model.PeriodWeek:
		return "weekly"
	}
	return "monthly"
}

// decimalMicros writes millionths as a decimal: 25500000 → "25.50".
func decimalMicros(m int64) string {
	s := strconv.FormatFloat(float64(m)/1e6, 'f', 6, 64)
	for len(s) > 0 && s[len(s)-1] == '0' && s[len(s)-3] != '.' {
		s = s[:len(s)-1]
	}
	return s
}

// ModelSpend sums a budget window's part of the ledger: tokens and money.
func (s *LLM) ModelSpend(ctx context.Context, q SpendQuery) (tokens, micros int64, err error) {
	rows, err := s.k.Store.SumModelCalls(ctx, q.TenantID, store.ModelUsageQuery{From: q.From, To: q.To, ProjectID: q.ProjectID, UserID: q.UserID,
		ExceptIDs: q.Except})
	if err != nil {
		return 0, 0, s.k.Internal(ctx, err)
	}
	for _, r := range rows {
		tokens += r.InputTokens + r.OutputTokens
		micros += r.CostMicros
	}
	return tokens, micros, nil
}

// RecordModelCalls writes calls to the ledger. The gateway's meter calls
// it in batches, after the calls; a call recorded twice is kept once. It
// is the gateway's own write, never a user's: the context must be the
// gateway's (channel gateway) and carry no user, so that no channel can
// write a ledger row a user asked for; and each call names its tenant.
func (s *LLM) RecordModelCalls(ctx context.Context, calls []*model.ModelCall) error {
	if p, ok := identity.PrincipalFrom(ctx); ok {
		return kernel.Forbidden("model calls are written to the ledger by the gateway after the calls, not by a user (%s)", p.UserName)
	}
	if ch := identity.ChannelFrom(ctx); ch != identity.ChannelGateway {
		return kernel.Forbidden("model calls are written to the ledger only by the gateway's meter, not by channel %s", ch)
	}
	for i, c := range calls {
		if c == nil || c.TenantID == "" {
			return kernel.Invalid("model call %d of %d names no tenant: every ledger row belongs to one", i+1, len(calls))
		}
	}
	if err := s.k.Store.InsertModelCalls(ctx, calls); err != nil {
		return s.k.Internal(ctx, err)
	}
	return nil
}

// ModelAliases lists the aliases a caller may call for a project (or, with
// no project, for any of theirs), by name.
func (s *LLM) ModelAliases(ctx context.Context, projectRef string) ([]*model.Alias, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, _, err := s.k.RecentEstate(ctx, p.TenantID, gatewayEstateAge)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	projectID := ""
	if p.ProjectID != "" || projectRef != "" {
		pr, err := gatewayProject(e, p, projectRef)
		if err != nil {
			return nil, err
		}
		projectID = pr.ID
	}
	out := UsableAliases(e, p, projectID)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Cost is what a call's tokens cost on a model, in millionths of its
// currency, rounded up. It is worked out in 128 bits and saturates at the
// largest int64, so that no count of tokens, however large, can wrap
// around to a negative cost (prices are validated as 0 or more, and a
// negative count reads as 0).
func Cost(m *model.LLMModel, input, output int64) int64 {
	hi1, lo1 := bits.Mul64(uint64(max(input, 0)), uint64(max(m.InputPriceMicros, 0)))
	hi2, lo2 := bits.Mul64(uint64(max(output, 0)), uint64(max(m.OutputPriceMicros, 0)))
	lo, carry := bits.Add64(lo1, lo2, 0)
	hi, over := bits.Add64(hi1, hi2, carry)
	lo, carry = bits.Add64(lo, 999_999, 0)
	hi, over2 := bits.Add64(hi, 0, carry)
	if over|over2 != 0 || hi >= 1_000_000 {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	return int64(min(q, math.MaxInt64))
}
