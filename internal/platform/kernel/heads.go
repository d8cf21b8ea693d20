package kernel

import (
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// A department head (issue 32) is a user with the lead role in a
// department's membership: the same model.Membership a team lead has, on a
// group of kind department, so that an admin, SSO and the user commands
// assign it the way they assign a team lead. A head's rights reach the
// teams and departments below the department, never the department itself
// (its policy is its parent's head's or an admin's to change), and never
// the tasks' contents of a team the head is not also a member of: SeesTask
// stays a matter of membership.
//
// The rights need the tree, so unlike SeesGroup they take the estate;
// a project-scoped credential has none of them.

// HeadAbove returns the nearest department above the group with id (not
// the group itself) that p heads, or nil when p heads none of them.
func HeadAbove(p *identity.Principal, e *estate.Estate, id string) *model.Group {
	if p == nil || p.ProjectID != "" || e == nil {
		return nil
	}
	for _, a := range e.Ancestors(id) {
		if a.IsDepartment() && p.LeadOf(a.ID) {
			return a
		}
	}
	return nil
}

// HeadsAny reports whether p heads any department of e.
func HeadsAny(p *identity.Principal, e *estate.Estate) bool {
	for _, g := range p.Groups {
		if g.Role == model.GroupRoleLead && e.Department(g.GroupID) != nil {
			return true
		}
	}
	return false
}

// OverseesGroup reports whether p may see a group's policy, compute
// resources, queues (their state and counts, not their tasks' contents)
// and usage: as SeesGroup, or as the head of a department above it.
func OverseesGroup(p *identity.Principal, e *estate.Estate, id string) bool {
	return SeesGroup(p, id) || HeadAbove(p, e, id) != nil
}

// ManagesPolicyOf reports whether p may change the policy of the group
// with id: an unscoped admin, or the head (who may write) of a department
// above it. head is that department, nil for an admin.
func ManagesPolicyOf(p *identity.Principal, e *estate.Estate, id string) (head *model.Group, ok bool) {
	if p.ProjectID != "" || !p.CanWrite() {
		return nil, false
	}
	if p.IsAdmin() {
		return nil, true
	}
	head = HeadAbove(p, e, id)
	return head, head != nil
}

// OverseenGroupIDs returns the ids of the teams p sees the usage and
// queues of: its own groups and every team below a department it heads
// (the departments themselves hold no tasks).
func OverseenGroupIDs(p *identity.Principal, e *estate.Estate) []string {
	ids := p.GroupIDs()
	for _, g := range e.Groups {
		if !g.IsDepartment() && !p.InGroup(g.ID) && HeadAbove(p, e, g.ID) != nil {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// QueuePlace is a task as a department head who is not a member of its
// group sees it: where it waits, for which group, its size and status,
// and none of its contents (spec, tags, run), which stay the members'.
func QueuePlace(task *model.Task) *model.Task {
	if task == nil {
		return nil
	}
	c := *task
	c.Spec, c.Tags, c.Run, c.ClonedFromID = model.TaskSpec{}, nil, model.TaskRun{}, ""
	return &c
}
