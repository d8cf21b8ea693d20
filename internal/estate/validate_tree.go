package estate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/klique-ai/klique/internal/model"
)

// MaxWeight bounds a policy's weight: enough to give one sibling ten
// thousand times another's share, low enough that shares times weights
// never overflow.
const MaxWeight = 10_000

// tree checks the organisation tree: every parent a department, no cycle,
// at most model.MaxDepartmentDepth levels of departments, and reservations
// that fit inside their parents'.
func (v *validator) tree() {
	for _, g := range v.e.Groups {
		obj := v.e.GroupLabel(g.ID)
		if g.Kind != model.GroupTeam && g.Kind != model.GroupDepartment {
			v.Add(obj, "kind %q is not known: a group is a team or a department", g.Kind)
		}
		if g.ParentID == "" {
			continue
		}
		p := v.e.Group(g.ParentID)
		switch {
		case p == nil:
			v.Add(obj, "sits in a department that does not exist; name one under departments, or leave department out to put it directly under the tenant")
		case p.ID == g.ID:
			v.Add(obj, "sits in itself; give it another parent department")
		case !p.IsDepartment():
			v.Add(obj, "sits in %q, which is a team; groups sit in departments, so name a department (or make %q one)", p.Name, p.Name)
		}
	}
	v.cycles()
	for _, d := range v.e.Departments() {
		if depth := v.e.departmentDepth(d.ID); depth > model.MaxDepartmentDepth {
			v.Add(v.e.GroupLabel(d.ID), "is %d levels of departments deep (%s); departments nest at most %d levels: give it a parent higher up",
				depth, v.e.Path(d.ID), model.MaxDepartmentDepth)
		}
	}
	v.treeReservations()
}

// cycles reports each cycle of parents once, by its members in order from
// the one with the smallest name.
func (v *validator) cycles() {
	reported := map[string]bool{}
	for _, g := range v.e.Groups {
		seen := map[string]int{}
		var path []*model.Group
		for cur := g; cur != nil && cur.ParentID != ""; cur = v.e.Group(cur.ParentID) {
			if i, ok := seen[cur.ID]; ok {
				cycle := path[i:]
				start := 0
				for j, c := range cycle {
					if c.Name < cycle[start].Name {
						start = j
					}
				}
				var names []string
				for j := range cycle {
					names = append(names, cycle[(start+j)%len(cycle)].Name)
				}
				key := strings.Join(names, "\x00")
				if !reported[key] {
					reported[key] = true
					v.Add(v.e.GroupLabel(cycle[start].ID), "departments %s → %s form a cycle; give one of them a parent outside it, or none",
						strings.Join(names, " → "), names[0])
				}
				break
			}
			seen[cur.ID] = len(path)
			path = append(path, cur)
		}
	}
}

// treeReservations checks that what a node reserves fits inside its
// nearest ancestor with a policy: each child on its own, then the children
// together. A department without a policy reserves what its children do
// (EffectiveReservation), so the rule reaches through it. Limits are not
// checked against the parent's: a child's effective limit is the smallest
// along its path, so a larger one is harmless.
func (v *validator) treeReservations() {
	type level struct {
		holder *model.Group // the node whose reservation bounds the children
		kids   []*model.Group
	}
	var levels []level
	for _, g := range v.e.Groups {
		if v.e.PolicyOfGroup(g.ID) != nil && g.IsDepartment() {
			levels = append(levels, level{holder: g, kids: v.reservingChildren(g.ID, map[string]bool{g.ID: true})})
		}
	}
	sort.SliceStable(levels, func(i, j int) bool { return levels[i].holder.Name < levels[j].holder.Name })
	for _, l := range levels {
		parentRes := v.e.PolicyOfGroup(l.holder.ID).ReservationGPUs
		over := false
		sum := 0
		var parts []string
		for _, c := range l.kids {
			r := v.e.EffectiveReservation(c.ID)
			sum += r
			parts = append(parts, fmt.Sprintf("%s %d", c.Name, r))
			if r > parentRes {
				over = true
				kind := "group"
				if c.IsDepartment() {
					kind = "department"
				}
				v.Add(fmt.Sprintf("resource policy of %s %q", kind, c.Name),
					"%s %s reserves %d GPUs but its department %s reserves only %d: lower %s's reservation or raise %s's",
					kind, c.Name, r, l.holder.Name, parentRes, c.Name, l.holder.Name)
			}
		}
		if !over && sum > parentRes {
			v.Add(fmt.Sprintf("resource policy of department %q", l.holder.Name),
				"the reservations of what it holds add up to %d GPUs (%s), more than the %d GPUs department %s reserves: lower theirs or raise its reservation to at least %d",
				sum, strings.Join(parts, ", "), parentRes, l.holder.Name, sum)
		}
	}
}

// reservingChildren returns the nodes whose reservations a department's
// reservation must hold: its children that have a policy or are teams,
// and through each child department without a policy, that one's
// children in the same way. Nodes reserving nothing are left out, so
// that a message names only what counts.
func (v *validator) reservingChildren(id string, seen map[string]bool) []*model.Group {
	var out []*model.Group
	for _, c := range v.e.Children(id) {
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		if v.e.PolicyOfGroup(c.ID) == nil && c.IsDepartment() {
			out = append(out, v.reservingChildren(c.ID, seen)...)
			continue
		}
		if v.e.EffectiveReservation(c.ID) > 0 {
			out = append(out, c)
		}
	}
	return out
}
