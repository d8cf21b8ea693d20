package allocation

import (
	"context"
	"fmt"
	"sort"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
	"github.com/klique-ai/klique/internal/store"
)

// TreeNode is the policy view of one node of the organisation tree, a
// department or a group, with the nodes directly in it. A department's
// figures count everything below it, as its policy does.
type TreeNode struct {
	Group *model.Group
	// Depth is 0 at the top of the tree returned; Parent names the
	// department the node sits in there ("" at the top).
	Depth  int
	Parent string
	// Policy is the node's own resource policy, nil when it has none (a
	// department without one only gathers its children).
	Policy *model.ResourcePolicy
	// ReservedGPUs is the node's effective reservation (estate.EffectiveReservation).
	ReservedGPUs int
	// EffectiveLimitGPUs is the smallest limit on the node's path to the
	// tenant, nil when no policy on it sets one.
	EffectiveLimitGPUs *int
	// Weight is the node's share of lent GPUs among its siblings.
	Weight int
	// Held is what the work below the node holds; Borrowed the part above
	// its reservation; Lent the part of its idle reservation that groups
	// outside it use above their own reservations (the smaller of the two).
	Held, Borrowed, Lent model.MilliGPU
	Holding, Waiting     int
	// Budget is the node's time budget, when its policy has one.
	Budget   *view.BudgetView
	Children []*TreeNode
}

// PolicyTree returns the policy view of the organisation tree as the
// caller may see it, level by level: the nodes directly under the tenant,
// each with the nodes in it, by name. rootRef, when given, names a
// department or group: only it and what is below it.
func (s *Allocation) PolicyTree(ctx context.Context, rootRef string) ([]*TreeNode, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	roots := []*model.Group{}
	if rootRef != "" {
		g, err := kernel.FindGroup(e, rootRef)
		if err != nil {
			return nil, err
		}
		roots = append(roots, g)
	} else {
		for _, g := range e.Groups {
			// The top of what the caller sees: a node whose parent is
			// not visible to them sits at the top of their tree.
			if g.ParentID == "" || e.Group(g.ParentID) == nil {
				roots = append(roots, g)
			}
		}
		sort.SliceStable(roots, func(i, j int) bool { return roots[i].Name < roots[j].Name })
	}
	full, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	held, err := s.k.Store.ListSchedulable(ctx, p.TenantID, 0)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	views, err := s.PolicyViews(ctx, "")
	if err != nil {
		return nil, err
	}
	budgets := map[string]*view.BudgetView{}
	for _, v := range views {
		budgets[v.Policy.GroupID] = v.Budget
	}
	t := &treeBuild{s: s, tenantID: p.TenantID, e: e, full: full, budgets: budgets,
		held: map[string]model.MilliGPU{}, holding: map[string]int{}}
	for _, task := range held {
		cr := full.ComputeResource(task.ComputeResourceID)
		if cr == nil || task.Status == model.TaskQueued {
			continue
		}
		if pol := full.Policy(cr.PolicyID); pol != nil {
			t.held[pol.GroupID] += task.Size.Total()
			t.holding[pol.GroupID]++
		}
	}
	var out []*TreeNode
	for _, g := range roots {
		n, err := t.node(ctx, g, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// treeBuild carries what PolicyTree reads once: e is the estate as the
// caller sees it (which nodes are shown), full the tenant's (what the work
// below a node holds, whoever may see it), held and holding per group
// whose policy the work runs under.
type treeBuild struct {
	s        *Allocation
	tenantID string
	e, full  *estate.Estate
	budgets  map[string]*view.BudgetView
	held     map[string]model.MilliGPU
	holding  map[string]int
}

func (t *treeBuild) node(ctx context.Context, g *model.Group, depth int) (*TreeNode, error) {
	n := &TreeNode{Group: g, Depth: depth, Policy: t.full.PolicyOfGroup(g.ID), ReservedGPUs: t.full.EffectiveReservation(g.ID),
		Weight: model.DefaultWeight, Budget: t.budgets[g.ID]}
	if l, ok := t.full.EffectiveLimit(g.ID); ok {
		n.EffectiveLimitGPUs = &l
	}
	if n.Policy != nil {
		n.Weight = n.Policy.EffectiveWeight()
	}
	var teams []string
	var outside model.MilliGPU
	for _, x := range t.full.Groups {
		if !t.full.InSubtree(x.ID, g.ID) {
			if !x.IsDepartment() {
				outside += t.borrowed(x.ID)
			}
			continue
		}
		n.Held += t.held[x.ID]
		n.Holding += t.holding[x.ID]
		if !x.IsDepartment() {
			teams = append(teams, x.ID)
		}
	}
	reserved := model.GPUs(n.ReservedGPUs)
	if n.Held > reserved {
		n.Borrowed = n.Held - reserved
	} else {
		n.Lent = min(reserved-n.Held, outside)
	}
	if len(teams) > 0 {
		w, err := t.s.k.Store.CountTasks(ctx, t.tenantID, store.TaskFilter{Statuses: []model.TaskStatus{model.TaskQueued}, GroupIDs: teams})
		if err != nil {
			return nil, t.s.k.Internal(ctx, fmt.Errorf("count waiting tasks below %s: %w", g.Name, err))
		}
		n.Waiting = w
	}
	if depth >= model.MaxDepartmentDepth+1 {
		return n, nil
	}
	for _, c := range t.e.Children(g.ID) {
		cn, err := t.node(ctx, c, depth+1)
		if err != nil {
			return nil, err
		}
		cn.Parent = g.Name
		n.Children = append(n.Children, cn)
	}
	return n, nil
}

// Flatten lists a tree depth first: each node followed by the nodes in
// it, in order.
func Flatten(nodes []*TreeNode) []*TreeNode {
	var out []*TreeNode
	for _, n := range nodes {
		out = append(out, n)
		out = append(out, Flatten(n.Children)...)
	}
	return out
}

// borrowed is what a group's own work holds above its reservation.
func (t *treeBuild) borrowed(groupID string) model.MilliGPU {
	r := model.GPUs(t.full.EffectiveReservation(groupID))
	if h := t.held[groupID]; h > r {
		return h - r
	}
	return 0
}
