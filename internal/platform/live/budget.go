package live

import (
	"context"
	"fmt"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
)

// budgetTick is how often a budgetBurn subscription gets a fresh view while
// nothing happens: running work burns budget by the minute.
const budgetTick = time.Minute

// BudgetBurnUpdate is a group's time budget as its work burns it.
type BudgetBurnUpdate struct {
	TenantID string
	GroupID  string
	Kind     string
	At       time.Time
	Policy   *view.PolicyView
	Alert    string
	Missed   int
}

// AlertText is the alert, or nil when the update raises none.
func (u *BudgetBurnUpdate) AlertText() *string {
	if u.Alert == "" {
		return nil
	}
	return &u.Alert
}

// SubscribeBudgetBurn follows a resource policy's budget: used, left, burn
// rate and projected run-out, updated when its group's work starts or
// stops, when an alert is raised, and every minute while work burns it.
func (s *Live) SubscribeBudgetBurn(ctx context.Context, policyRef string) (<-chan *BudgetBurnUpdate, error) {
	pol, err := s.k.Policy(ctx, policyRef)
	if err != nil {
		return nil, err
	}
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	polID, groupID := pol.ID, pol.GroupID
	build := func(ctx context.Context, kind string) []*BudgetBurnUpdate {
		u, err := s.budgetBurn(ctx, tenantID, polID, kind)
		if err != nil {
			if ctx.Err() == nil {
				s.k.Log.Warn("budget subscription: read policy view", "policy", polID, "err", err)
			}
			return nil
		}
		return []*BudgetBurnUpdate{u}
	}
	r := s.subs.budgets.Join("budget|"+tenantID+"|"+polID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			return e.TenantID == tenantID && (e.ObjectKind == "task" && e.GroupID == groupID && taskLifecycle(e.Kind) ||
				e.ObjectID == polID)
		},
		func(ctx context.Context, batch []events.Event) []*BudgetBurnUpdate {
			var out []*BudgetBurnUpdate
			for _, e := range batch {
				if e.Kind == "budget.alert" {
					out = append(out, build(ctx, e.Kind)...)
				}
			}
			if len(out) == 0 {
				out = build(ctx, batch[len(batch)-1].Kind)
			}
			return out
		}, budgetTick, func(ctx context.Context) []*BudgetBurnUpdate { return build(ctx, "tick") }))
	first, err := s.budgetBurn(ctx, tenantID, polID, "snapshot")
	if err != nil {
		return nil, s.failSubscription(ctx, err, r.Close, release)
	}
	return pump(ctx, s, r, release, []*BudgetBurnUpdate{first},
		func(p *identity.Principal, u *BudgetBurnUpdate) (*BudgetBurnUpdate, bool) {
			return u, p.TenantID == u.TenantID && (kernel.SeesGroup(p, u.GroupID) || s.headAbove(ctx, p, u.GroupID))
		}), nil
}

func (s *Live) budgetBurn(ctx context.Context, tenantID, policyID, kind string) (*BudgetBurnUpdate, error) {
	now := s.k.Now()
	v, err := s.reads.TenantPolicyView(ctx, tenantID, policyID, now)
	if err != nil {
		return nil, err
	}
	u := &BudgetBurnUpdate{TenantID: tenantID, GroupID: v.Policy.GroupID, Kind: kind, At: now, Policy: v}
	if kind == "budget.alert" && v.Budget != nil {
		u.Alert = budgetAlertText(v)
	}
	return u, nil
}

// budgetAlertText says what a budget alert is about, as the engine's audit
// entry does.
func budgetAlertText(v *view.PolicyView) string {
	b, group := v.Budget, ""
	if v.Group != nil {
		group = v.Group.Name
	}
	if b.UsedUp {
		return fmt.Sprintf("group %s has used up its time budget of %s h; it resets %s", group, engine.FormatMicroHours(b.Total), b.ResetsAt.Format(time.RFC3339))
	}
	return fmt.Sprintf("group %s has used %d%% of its time budget of %s h; it resets %s", group, b.Used*100/max(b.Total, 1),
		engine.FormatMicroHours(b.Total), b.ResetsAt.Format(time.RFC3339))
}
