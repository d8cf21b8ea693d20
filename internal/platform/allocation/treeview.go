package allocation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
)

// TreeNode is the policy view of one node of the organisation tree
// (view.TreeNode).
type TreeNode = view.TreeNode

// PolicyTree returns the policy view of the organisation tree as the
// caller may see it, level by level: the nodes directly under the tenant,
// each with the nodes in it, by name. rootRef, when given, names a
// department or group: only it and what is below it. The figures are the
// tenant's whatever the caller sees (VisibleTree): a department's held
// GPUs count its other teams' work too.
func (s *Allocation) PolicyTree(ctx context.Context, rootRef string) ([]*TreeNode, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	rootID := ""
	if rootRef != "" {
		e, err := s.k.Estate(ctx)
		if err != nil {
			return nil, err
		}
		g, err := kernel.FindGroup(e, rootRef)
		if err != nil {
			return nil, err
		}
		rootID = g.ID
	}
	nodes, err := s.TenantPolicyTree(ctx, p.TenantID, s.k.Now())
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return s.VisibleTree(p, nodes, rootID), nil
}

// TenantPolicyTree is the policy view of a tenant's whole organisation
// tree, for the live view, which cuts it down for each subscriber
// (VisibleTree).
func (s *Allocation) TenantPolicyTree(ctx context.Context, tenantID string, now time.Time) ([]*TreeNode, error) {
	full, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	held, err := s.k.Store.ListSchedulable(ctx, tenantID, 0)
	if err != nil {
		return nil, fmt.Errorf("list tasks holding capacity: %w", err)
	}
	used, err := s.budgetUsed(ctx, tenantID, full, now)
	if err != nil {
		return nil, fmt.Errorf("budget used: %w", err)
	}
	t := &treeBuild{full: full, used: used, now: now, holds: holdings(full, held)}
	if t.waiting, err = s.k.Store.CountQueuedByGroup(ctx, tenantID); err != nil {
		return nil, err
	}
	for _, g := range full.Groups {
		if !g.IsDepartment() {
			t.allBorrowed += t.borrowed(g.ID)
		}
	}
	var out []*TreeNode
	for _, g := range full.Children("") {
		n, _, _ := t.node(g, 0)
		out = append(out, n)
	}
	return out, nil
}

// VisibleTree cuts a tenant's tree down to what p may see, as
// kernel.VisibleEstate does the estate: the groups p sees and the
// departments above them (admins everything), the nodes' figures kept.
// rootID, when set, keeps only that node and what is below it. The nodes
// are copies: the live view cuts one tree for many subscribers.
func (s *Allocation) VisibleTree(p *identity.Principal, nodes []*TreeNode, rootID string) []*TreeNode {
	var sees func(n *TreeNode) bool
	sees = func(n *TreeNode) bool {
		if kernel.SeesGroup(p, n.Group.ID) {
			return true
		}
		return slices.ContainsFunc(n.Children, sees)
	}
	var cut func(n *TreeNode, depth int, parent string) *TreeNode
	cut = func(n *TreeNode, depth int, parent string) *TreeNode {
		c := *n
		c.Depth, c.Parent, c.Children = depth, parent, nil
		for _, ch := range n.Children {
			if sees(ch) {
				c.Children = append(c.Children, cut(ch, depth+1, n.Group.Name))
			}
		}
		return &c
	}
	var out []*TreeNode
	if rootID != "" {
		for _, n := range Flatten(nodes) {
			if n.Group.ID == rootID && sees(n) {
				out = append(out, cut(n, 0, ""))
			}
		}
		return out
	}
	for _, n := range nodes {
		if sees(n) {
			out = append(out, cut(n, 0, ""))
		}
	}
	return out
}

// treeBuild carries what TenantPolicyTree reads once: the tenant's
// estate, the budget used per policy, and what each group's work holds
// (holdings).
type treeBuild struct {
	full  *estate.Estate
	used  map[string]int64
	now   time.Time
	holds map[string]holding
	// waiting is each group's queued tasks; allBorrowed what every team
	// holds above its reservation, together.
	waiting     map[string]int
	allBorrowed model.MilliGPU
}

// node builds g's node and its subtree's in one walk down and up: a
// team's own figures, then its children's summed in as they come back,
// so that a tree of thousands of nodes costs one visit a node (no node
// reads the others', no query a node). inside is what the teams of the
// subtree borrow, which is not lent to the subtree by its own reserve.
func (t *treeBuild) node(g *model.Group, depth int) (n *TreeNode, rate int64, inside model.MilliGPU) {
	n = &TreeNode{Group: g, Depth: depth, Policy: t.full.PolicyOfGroup(g.ID), ReservedGPUs: t.full.EffectiveReservation(g.ID),
		Weight: model.DefaultWeight}
	if l, ok := t.full.EffectiveLimit(g.ID); ok {
		n.EffectiveLimitGPUs = &l
	}
	if !g.IsDepartment() {
		h := t.holds[g.ID]
		n.Held, n.Holding, n.Waiting = h.held, h.tasks, t.waiting[g.ID]
		rate, inside = h.rate, t.borrowed(g.ID)
	}
	if depth < model.MaxDepartmentDepth+1 {
		for _, c := range t.full.Children(g.ID) {
			cn, cr, ci := t.node(c, depth+1)
			cn.Parent = g.Name
			n.Children = append(n.Children, cn)
			n.Held += cn.Held
			n.Holding += cn.Holding
			n.Waiting += cn.Waiting
			rate += cr
			inside += ci
		}
	}
	if n.Policy != nil {
		n.Weight = n.Policy.EffectiveWeight()
		if n.Policy.Budget != nil {
			n.Budget = view.Budget(n.Policy, t.used[n.Policy.ID], rate, t.now)
		}
	}
	reserved := model.GPUs(n.ReservedGPUs)
	if n.Held > reserved {
		n.Borrowed = n.Held - reserved
	} else {
		n.Lent = min(reserved-n.Held, t.allBorrowed-inside)
	}
	return n, rate, inside
}

// Flatten lists a tree depth first (view.Flatten).
func Flatten(nodes []*TreeNode) []*TreeNode { return view.Flatten(nodes) }

// borrowed is what a group's own work holds above its reservation.
func (t *treeBuild) borrowed(groupID string) model.MilliGPU {
	r := model.GPUs(t.full.EffectiveReservation(groupID))
	if h := t.holds[groupID].held; h > r {
		return h - r
	}
	return 0
}
