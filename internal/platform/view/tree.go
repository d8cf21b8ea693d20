package view

import "github.com/klique-ai/klique/internal/model"

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
	Budget   *BudgetView
	Children []*TreeNode
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
