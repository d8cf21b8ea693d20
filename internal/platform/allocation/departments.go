package allocation

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// The organisation tree's reads. Each reads the caller's tenant's estate
// as the caller may see it (kernel.Estate): admins the whole tree, others
// the departments above their groups and those groups, never another
// tenant's.

// Departments lists the departments the caller may see, by name.
func (s *Allocation) Departments(ctx context.Context) ([]*model.Group, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return e.Departments(), nil
}

// Department returns a department by id or name, if the caller may see
// it.
func (s *Allocation) Department(ctx context.Context, ref string) (*model.Group, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	g, err := kernel.FindGroup(e, ref)
	if err != nil || !g.IsDepartment() {
		return nil, kernel.NotFound("no department %s", kernel.Quote(ref))
	}
	return g, nil
}

// ParentDepartment returns the department a group or department sits in,
// or nil at the top of the tree (or when the caller may not see it).
func (s *Allocation) ParentDepartment(ctx context.Context, g *model.Group) (*model.Group, error) {
	if g.ParentID == "" {
		return nil, nil
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return e.Department(g.ParentID), nil
}

// DepartmentChildren returns what sits directly in a department, as far
// as the caller may see: its departments and its groups, each by name.
func (s *Allocation) DepartmentChildren(ctx context.Context, id string) (departments, groups []*model.Group, err error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range e.Children(id) {
		if c.IsDepartment() {
			departments = append(departments, c)
		} else {
			groups = append(groups, c)
		}
	}
	return departments, groups, nil
}

// NodeLimits is the policy view of one node of the tree: what it and
// everything below it reserve, and the most it may hold once every limit
// above it is counted.
type NodeLimits struct {
	ReservedGPUs int
	// EffectiveLimitGPUs is nil when no policy on the node's path sets a
	// limit.
	EffectiveLimitGPUs *int
}

// TreeLimits returns the policy view of a group or department the caller
// may see.
func (s *Allocation) TreeLimits(ctx context.Context, id string) (*NodeLimits, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	g, err := kernel.FindGroup(e, id)
	if err != nil {
		return nil, err
	}
	out := &NodeLimits{ReservedGPUs: e.EffectiveReservation(g.ID)}
	if l, ok := e.EffectiveLimit(g.ID); ok {
		out.EffectiveLimitGPUs = &l
	}
	return out, nil
}
