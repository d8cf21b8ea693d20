package estate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/klique-ai/klique/internal/model"
)

// The organisation tree: a tenant's groups are teams and departments
// (model.GroupKind). A department sits under another department or the
// tenant; a team sits under a department or the tenant; projects belong to
// teams. The tree lives in Group.ParentID, so that it is read, diffed and
// stored with the groups themselves.

// KindDepartment is the kind changes and audit entries give a department;
// a team's changes keep KindGroup.
const KindDepartment = "department"

// Department returns the department with id, or nil (also for a team).
func (e *Estate) Department(id string) *model.Group {
	if g := e.Group(id); g != nil && g.IsDepartment() {
		return g
	}
	return nil
}

// DepartmentByName returns the department named name, or nil.
func (e *Estate) DepartmentByName(name string) *model.Group {
	if g := e.GroupByName(name); g != nil && g.IsDepartment() {
		return g
	}
	return nil
}

// Departments returns the tenant's departments by name.
func (e *Estate) Departments() []*model.Group {
	var out []*model.Group
	for _, g := range e.Groups {
		if g.IsDepartment() {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Children returns the groups, departments and teams, that sit directly in
// the department with id parentID ("" for the top of the tree), by name.
func (e *Estate) Children(parentID string) []*model.Group {
	var out []*model.Group
	for _, g := range e.Groups {
		if g.ParentID == parentID {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Ancestors returns the departments above the group with id, nearest
// first. It stops at a parent that does not exist and at a cycle, which
// Validate refuses, so that it is safe on an estate not yet validated.
func (e *Estate) Ancestors(id string) []*model.Group {
	var out []*model.Group
	seen := map[string]bool{id: true}
	g := e.Group(id)
	for g != nil && g.ParentID != "" && !seen[g.ParentID] {
		seen[g.ParentID] = true
		p := e.Group(g.ParentID)
		if p == nil {
			break
		}
		out = append(out, p)
		g = p
	}
	return out
}

// InSubtree reports whether the group with id is the group with rootID or
// sits below it.
func (e *Estate) InSubtree(id, rootID string) bool {
	if id == rootID {
		return true
	}
	for _, a := range e.Ancestors(id) {
		if a.ID == rootID {
			return true
		}
	}
	return false
}

// Path names the group with id and the departments above it, from the top
// of the tree down: "research → vision".
func (e *Estate) Path(id string) string {
	anc := e.Ancestors(id)
	parts := make([]string, 0, len(anc)+1)
	for i := len(anc) - 1; i >= 0; i-- {
		parts = append(parts, anc[i].Name)
	}
	parts = append(parts, e.GroupName(id))
	return strings.Join(parts, " → ")
}

// GroupLabel names a group with its kind, "department research" or "group
// vision", as problems and changes say it.
func (e *Estate) GroupLabel(id string) string {
	if g := e.Group(id); g != nil && g.IsDepartment() {
		return fmt.Sprintf("department %q", g.Name)
	}
	return fmt.Sprintf("group %q", e.GroupName(id))
}

// EffectiveReservation is the GPUs reserved for the group with id and
// everything below it: its policy's reservation, or for a department with
// no policy of its own the sum of its children's (such a department only
// gathers its children, and reserves what they reserve).
func (e *Estate) EffectiveReservation(id string) int {
	return e.effectiveReservation(id, map[string]bool{})
}

func (e *Estate) effectiveReservation(id string, seen map[string]bool) int {
	if pol := e.PolicyOfGroup(id); pol != nil {
		return pol.ReservationGPUs
	}
	if seen[id] {
		return 0
	}
	seen[id] = true
	g := e.Group(id)
	if g == nil || !g.IsDepartment() {
		return 0
	}
	sum := 0
	for _, c := range e.Children(id) {
		sum += e.effectiveReservation(c.ID, seen)
	}
	return sum
}

// EffectiveLimit is the most GPUs the group with id may hold at once: the
// smallest limit along its path to the top of the tree, its own included
// (a limit of 0 pauses the whole subtree below it). ok is false when no
// policy on the path sets a limit.
func (e *Estate) EffectiveLimit(id string) (limit int, ok bool) {
	for _, g := range append([]*model.Group{e.Group(id)}, e.Ancestors(id)...) {
		if g == nil {
			continue
		}
		if pol := e.PolicyOfGroup(g.ID); pol != nil && (!ok || pol.LimitGPUs < limit) {
			limit, ok = pol.LimitGPUs, true
		}
	}
	return limit, ok
}

// departmentDepth is how many levels of departments hold the department
// with id, itself included: 1 for a department directly under the tenant.
func (e *Estate) departmentDepth(id string) int {
	return len(e.Ancestors(id)) + 1
}

// PolicyParents maps each policy's id to the id of the policy of the
// nearest department above its group that has one (a department without
// a policy has no budget to charge), leaving out policies with none above
// them: the tree engine.BudgetUsedInTree charges a team's work up. A flat
// estate gives an empty map.
func (e *Estate) PolicyParents() map[string]string {
	out := map[string]string{}
	for _, pol := range e.Policies {
		for _, a := range e.Ancestors(pol.GroupID) {
			if up := e.PolicyOfGroup(a.ID); up != nil {
				out[pol.ID] = up.ID
				break
			}
		}
	}
	return out
}
