package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/platform"
)

// The organisation tree's read tool (issue 32): the policy view level by
// level, as the caller may see it. The platform decides what is visible
// (admins the whole tree, others the departments above their groups and
// those groups); the tool only shapes the nodes.

type departmentsArgs struct {
	Department string `json:"department,omitempty" jsonschema:"only this department or group and what is below it (else the whole tree you may see)"`
}

type treeNodeView struct {
	Name string `json:"name"`
	// Parent and Level place the node in the tree: the list is flat
	// (depth first) because a tool's output schema cannot recurse.
	Parent      string `json:"parent,omitempty" jsonschema:"the department it sits in; absent at the top of the tree you see"`
	Level       int    `json:"level" jsonschema:"0 at the top of the tree you see, 1 for what sits in those, and so on"`
	Kind        string `json:"kind" jsonschema:"department, or group (a team, which has compute resources and projects)"`
	Description string `json:"description,omitempty"`
	// ReservationGPUs is the node's effective reservation.
	ReservationGPUs    int             `json:"reservationGpus" jsonschema:"GPUs reserved for the node and everything below it (a department without a policy: what its children reserve)"`
	LimitGPUs          *int            `json:"limitGpus,omitempty" jsonschema:"its own policy's limit; absent when it has no policy"`
	EffectiveLimitGPUs *int            `json:"effectiveLimitGpus,omitempty" jsonschema:"the most GPUs its work may hold: the smallest limit on its path to the tenant; absent when none sets one"`
	Weight             int             `json:"weight" jsonschema:"its share of GPUs lent among its siblings"`
	HeldGPUs           float64         `json:"heldGpus" jsonschema:"GPUs the work below it holds now"`
	BorrowedGPUs       float64         `json:"borrowedGpus" jsonschema:"the part of heldGpus above its reservation, which may be reclaimed"`
	LentGPUs           float64         `json:"lentGpus" jsonschema:"the part of its idle reservation that groups outside it use above their own reservations; reclaimed when its work asks"`
	HoldingTasks       int             `json:"holdingTasks"`
	WaitingTasks       int             `json:"waitingTasks" jsonschema:"tasks waiting in the compute resources below it"`
	Budget             *treeBudgetView `json:"budget,omitempty" jsonschema:"its time budget in the current period, when its policy has one (a department's counts its teams' work)"`
}

// treeBudgetView is a node's time budget in its period.
type treeBudgetView struct {
	Period    string  `json:"period" jsonschema:"day, week or month, on the UTC calendar"`
	Hours     float64 `json:"hours"`
	UsedHours float64 `json:"usedHours"`
	LeftHours float64 `json:"leftHours"`
	UsedUp    bool    `json:"usedUp" jsonschema:"no new budgeted work below it starts until the reset"`
}

type departmentsView struct {
	Nodes []*treeNodeView `json:"nodes" jsonschema:"the nodes, depth first: each department followed by what sits in it (by name), the nodes at the top of the tree you see (or the one asked for) at level 0"`
}

func (s *Server) addTreeTools() {
	addTool(s, toolDef{name: "list_departments", title: "Show the organisation tree and its policy view",
		description: "The organisation tree you may see (departments, then the groups in them), level by level, with each node's policy view: " +
			"GPUs reserved, its limit and effective limit (the smallest on its path), weight, and the GPUs its work holds, borrows above its reservation " +
			"and lends to others, with tasks waiting below it. Admins see the whole tree; others the departments above their groups and those groups."},
		s.listDepartments)
}

func (s *Server) listDepartments(ctx context.Context, in *departmentsArgs) (*departmentsView, string, error) {
	nodes, err := s.svc.Allocation.PolicyTree(ctx, strings.TrimSpace(in.Department))
	if err != nil {
		return nil, "", err
	}
	out := &departmentsView{Nodes: []*treeNodeView{}}
	var add func(n *platform.TreeNode, parent string, level int)
	add = func(n *platform.TreeNode, parent string, level int) {
		v := &treeNodeView{Name: n.Group.Name, Parent: parent, Level: level, Kind: "group", Description: n.Group.Description, ReservationGPUs: n.ReservedGPUs,
			EffectiveLimitGPUs: n.EffectiveLimitGPUs, Weight: n.Weight, HeldGPUs: n.Held.Float(), BorrowedGPUs: n.Borrowed.Float(),
			LentGPUs: n.Lent.Float(), HoldingTasks: n.Holding, WaitingTasks: n.Waiting}
		if n.Group.IsDepartment() {
			v.Kind = "department"
		}
		if n.Policy != nil {
			l := n.Policy.LimitGPUs
			v.LimitGPUs = &l
		}
		if b := n.Budget; b != nil {
			v.Budget = &treeBudgetView{Period: string(b.Period), Hours: hours(b.Total), UsedHours: hours(b.Used), LeftHours: hours(b.Left), UsedUp: b.UsedUp}
		}
		out.Nodes = append(out.Nodes, v)
		for _, c := range n.Children {
			add(c, v.Name, level+1)
		}
	}
	for _, n := range nodes {
		add(n, "", 0)
	}
	return out, fmt.Sprintf("listed %d nodes of the organisation tree", len(out.Nodes)), nil
}
