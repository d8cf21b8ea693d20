package live

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
)

// policyTreeTick is how often a policyTree subscription gets a fresh view
// while nothing happens: running work burns the budgets on the tree.
const policyTreeTick = time.Minute

// PolicyTreeUpdate is the organisation tree's policy view, level by level,
// as work is enqueued, placed and ends and as the tree's policies change.
// The feed builds the tenant's whole tree once; each subscriber gets it
// cut to what they may see (Reads.VisibleTree), from the node they asked
// for.
type PolicyTreeUpdate struct {
	TenantID string
	Kind     string
	At       time.Time
	Nodes    []*view.TreeNode
	Missed   int
}

func (u *PolicyTreeUpdate) missed() *int { return &u.Missed }

// SubscribePolicyTree follows the policy view of the organisation tree as
// the caller may see it, or of one department or group and what is below
// it (departmentRef, checked as the caller sees the tree).
func (s *Live) SubscribePolicyTree(ctx context.Context, departmentRef string) (<-chan *PolicyTreeUpdate, error) {
	rootID := ""
	if departmentRef != "" {
		e, err := s.k.Estate(ctx)
		if err != nil {
			return nil, err
		}
		g, err := kernel.FindGroup(e, departmentRef)
		if err != nil {
			return nil, err
		}
		rootID = g.ID
	}
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	build := func(ctx context.Context, kind string) []*PolicyTreeUpdate {
		u, err := s.policyTree(ctx, tenantID, kind)
		if err != nil {
			if ctx.Err() == nil {
				s.k.Log.Warn("policy tree subscription: read the tree", "err", err)
			}
			return nil
		}
		return []*PolicyTreeUpdate{u}
	}
	r := s.subs.trees.Join("tree|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			return e.TenantID == tenantID && (e.ObjectKind == "task" && taskLifecycle(e.Kind) ||
				e.ObjectKind == estate.KindPolicy || e.ObjectKind == estate.KindGroup || e.ObjectKind == estate.KindDepartment)
		},
		func(ctx context.Context, batch []events.Event) []*PolicyTreeUpdate {
			return build(ctx, batch[len(batch)-1].Kind)
		}, policyTreeTick, func(ctx context.Context) []*PolicyTreeUpdate { return build(ctx, "tick") }))
	first, err := s.policyTree(ctx, tenantID, "snapshot")
	if err != nil {
		return nil, s.failSubscription(ctx, err, r.Close, release)
	}
	return pump(ctx, s, r, release, []*PolicyTreeUpdate{first},
		func(p *identity.Principal, u *PolicyTreeUpdate) (*PolicyTreeUpdate, bool) {
			if p.TenantID != u.TenantID {
				return nil, false
			}
			c := *u
			c.Nodes = s.reads.VisibleTree(p, u.Nodes, rootID)
			return &c, true
		}), nil
}

func (s *Live) policyTree(ctx context.Context, tenantID, kind string) (*PolicyTreeUpdate, error) {
	now := s.k.Now()
	nodes, err := s.reads.TenantPolicyTree(ctx, tenantID, now)
	if err != nil {
		return nil, err
	}
	return &PolicyTreeUpdate{TenantID: tenantID, Kind: kind, At: now, Nodes: nodes}, nil
}
