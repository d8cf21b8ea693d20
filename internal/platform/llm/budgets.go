package llm

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// HeldBudget is what the gateway's limiter holds in a budget window: the
// count the next call is checked against, and the part of it that calls
// in flight have reserved. Counted is false when the limiter has no
// trusted count (the window is unused, or due to be seeded from the
// ledger again): its next call starts from the ledger's sum plus the
// reservations.
type HeldBudget struct {
	Count, Reserved int64
	Counted         bool
}

// BudgetReader reads the limiter the gateway enforces budgets with (in
// this process or in Redis), one HeldBudget per window.
type BudgetReader func(ctx context.Context, windows []LimitWindow, now time.Time) ([]HeldBudget, error)

// SetBudgetReader wires the gateway's limiter into the budgets people
// read. The composition root calls it once the gateway's limiter exists;
// without one (no gateway), budgets read from the ledger alone, with
// nothing reserved.
func (s *LLM) SetBudgetReader(r BudgetReader) { s.held.Store(&r) }

// burnWindow is how far back a budget's burn rate looks: long enough to
// smooth a burst of calls, short enough to follow a change of pace.
const burnWindow = time.Hour

// TokenBudgetView is one token or money budget in its current period, for
// a project as a whole or for one user's part of it. Amounts are tokens,
// or millionths of the models' currency (Money).
type TokenBudgetView struct {
	ProjectID, ProjectName string
	// UserID and UserName are set for a user's part ("" for the project).
	UserID, UserName string
	Period           model.BudgetPeriod
	Money            bool
	Limit            int64
	// Used is what settled calls spent; Reserved what calls in flight
	// hold; Left what a new call may still reserve: Limit less both.
	Used, Reserved, Left int64
	// BurnPerHour is the spend of the last hour (of the period), per hour.
	BurnPerHour float64
	// RunsOutAt is when Left reaches zero at BurnPerHour; nil when that
	// is not before ResetsAt.
	RunsOutAt          *time.Time
	StartsAt, ResetsAt time.Time
}

// TokenBudgetViews lists the token and money budgets of the projects the
// caller uses (projectRef, an id or a name, narrows to one), in their
// current period: each project's whole budget and its users' parts.
// Members see their own part only; admins every user who spent in the
// period. The counts come from the gateway's limiter where it holds them,
// else from the ledger, as the gateway's next call would.
func (s *LLM) TokenBudgetViews(ctx context.Context, projectRef string) ([]*TokenBudgetView, error) {
	return s.tokenBudgetViews(ctx, projectRef, nil)
}

// GroupTokenBudgetViews lists the token and money budgets of a group's
// projects the caller sees, as TokenBudgetViews: what a group's budgetBurn
// subscription shows beside its time budget.
func (s *LLM) GroupTokenBudgetViews(ctx context.Context, groupID string) ([]*TokenBudgetView, error) {
	return s.tokenBudgetViews(ctx, "", func(pr *model.Project) bool { return pr.GroupID == groupID })
}

func (s *LLM) tokenBudgetViews(ctx context.Context, projectRef string, keep func(*model.Project) bool) ([]*TokenBudgetView, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, _, err := s.k.RecentEstate(ctx, p.TenantID, gatewayEstateAge)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	var only *model.Project
	if projectRef != "" {
		if only = e.Project(projectRef); only == nil {
			only = e.ProjectByName(projectRef)
		}
		if only == nil || !kernel.UsesProject(p, only) {
			return nil, kernel.NotFound("no project %s you may see", kernel.Quote(projectRef))
		}
	}
	now := s.k.Now()
	var out []*TokenBudgetView
	var windows []LimitWindow
	for _, b := range e.Gateway.Budgets {
		pr := e.ProjectByName(b.Project)
		if pr == nil || (only != nil && pr.ID != only.ID) || (keep != nil && !keep(pr)) || !kernel.UsesProject(p, pr) {
			continue
		}
		from, to := engine.PeriodStart(b.Period, now), engine.PeriodEnd(b.Period, now)
		base := budgetKey(p.TenantID, pr.ID, b.Period, from)
		spend := SpendQuery{TenantID: p.TenantID, ProjectID: pr.ID, From: from, To: to}
		add := func(key, userID, userName string, tokens, micros int64, q SpendQuery) {
			for _, m := range [2]struct {
				limit  int64
				suffix string
				money  bool
			}{{tokens, "/tok", false}, {micros, "/money", true}} {
				if m.limit <= 0 {
					continue
				}
				unit := UnitTokens
				if m.money {
					unit = UnitMicros
				}
				out = append(out, &TokenBudgetView{ProjectID: pr.ID, ProjectName: pr.Name, UserID: userID, UserName: userName,
					Period: b.Period, Money: m.money, Limit: m.limit, StartsAt: from, ResetsAt: to})
				windows = append(windows, LimitWindow{Key: key + m.suffix, Limit: m.limit, Unit: unit, Ends: to, Budget: true, Spend: q})
			}
		}
		add(base, "", "", b.Tokens, b.Micros, spend)
		if b.PerUserTokens <= 0 && b.PerUserMicros <= 0 {
			continue
		}
		users, err := s.budgetUsers(ctx, p, spend)
		if err != nil {
			return nil, err
		}
		for _, u := range users {
			mine := spend
			mine.UserID = u.ID
			add(userBudgetKey(base, u.ID), u.ID, u.Name, b.PerUserTokens, b.PerUserMicros, mine)
		}
	}
	if err := s.fillBudgets(ctx, out, windows, now); err != nil {
		return nil, err
	}
	return out, nil
}

// budgetUsers lists whose part of a project's budget the caller sees: a
// member their own; an admin each user with spend in the period, by name.
func (s *LLM) budgetUsers(ctx context.Context, p *identity.Principal, q SpendQuery) ([]model.UsageKey, error) {
	if !p.IsAdmin() {
		return []model.UsageKey{{ID: p.UserID, Name: p.UserName}}, nil
	}
	rows, err := s.k.Store.SumModelCalls(ctx, q.TenantID, store.ModelUsageQuery{From: q.From, To: q.To, ProjectID: q.ProjectID, By: []string{store.ByUser}})
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("list the users spending project %s's budget: %w", q.ProjectID, err))
	}
	var out []model.UsageKey
	for _, r := range rows {
		if len(r.Keys) == 1 && r.Keys[0].ID != "" {
			out = append(out, r.Keys[0])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// fillBudgets computes used, reserved, left, burn rate and run-out. A
// window the limiter counts is shown as the limiter enforces it: its count
// less the reservations it holds is used. One it does not count is what
// the gateway would seed it to: the ledger's sum, plus the reservations.
func (s *LLM) fillBudgets(ctx context.Context, views []*TokenBudgetView, windows []LimitWindow, now time.Time) error {
	held := make([]HeldBudget, len(windows))
	if r := s.held.Load(); r != nil && len(windows) > 0 {
		h, err := (*r)(ctx, windows, now)
		if err != nil {
			return s.k.Internal(ctx, fmt.Errorf("read the gateway's budget counters: %w", err))
		}
		held = h
	}
	for i, v := range views {
		h, q := held[i], windows[i].Spend
		count := h.Count
		if !h.Counted {
			tok, mic, err := s.ModelSpend(ctx, q)
			if err != nil {
				return err
			}
			count = pick(v.Money, tok, mic) + h.Reserved
		}
		v.Reserved = h.Reserved
		v.Used = max(count-h.Reserved, 0)
		v.Left = max(v.Limit-count, 0)
		recent := q
		recent.From = max64Time(q.From, now.Add(-burnWindow))
		recent.To = now
		tok, mic, err := s.ModelSpend(ctx, recent)
		if err != nil {
			return err
		}
		hours := max(now.Sub(recent.From), time.Minute).Hours()
		v.BurnPerHour = float64(pick(v.Money, tok, mic)) / hours
		v.RunsOutAt = runOut(v.Left, v.BurnPerHour, now, v.ResetsAt)
	}
	return nil
}

// runOut projects when left is spent at rate per hour: now when nothing is
// left, nil when nothing burns or it lasts until the reset.
func runOut(left int64, rate float64, now, resets time.Time) *time.Time {
	if left <= 0 {
		return &now
	}
	if rate <= 0 {
		return nil
	}
	hours := float64(left) / rate
	if hours >= resets.Sub(now).Hours() {
		return nil
	}
	t := now.Add(time.Duration(hours * float64(time.Hour))).Truncate(time.Second)
	return &t
}

func pick(money bool, tokens, micros int64) int64 {
	if money {
		return micros
	}
	return tokens
}

func max64Time(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Amount is n in the budget's unit, for people: tokens, or money in the
// models' currency (n is then millionths).
func (v *TokenBudgetView) Amount(n int64) float64 {
	if v.Money {
		return float64(n) / 1e6
	}
	return float64(n)
}

// BurnRate is BurnPerHour in the budget's unit, as Amount.
func (v *TokenBudgetView) BurnRate() float64 {
	if v.Money {
		return v.BurnPerHour / 1e6
	}
	return v.BurnPerHour
}
