package kernel

import (
	"context"
	"errors"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Reference resolution: by id first, then by name. Errors name what was
// asked for, never another tenant's objects (those are not in the estate).

func FindGPUClass(e *estate.Estate, ref string) (*model.GPUClass, error) {
	if c := e.GPUClass(ref); c != nil {
		return c, nil
	}
	if c := e.GPUClassByName(ref); c != nil {
		return c, nil
	}
	return nil, NotFound("no GPU class %s", Quote(ref))
}

func FindPool(e *estate.Estate, ref string) (*model.Pool, error) {
	if p := e.Pool(ref); p != nil {
		return p, nil
	}
	if p := e.PoolByName(ref); p != nil {
		return p, nil
	}
	return nil, NotFound("no pool %s", Quote(ref))
}

func FindProfile(e *estate.Estate, ref string) (*model.Profile, error) {
	if p := e.Profile(ref); p != nil {
		return p, nil
	}
	if p := e.ProfileByName(ref); p != nil {
		return p, nil
	}
	return nil, NotFound("no profile %s", Quote(ref))
}

func FindGroup(e *estate.Estate, ref string) (*model.Group, error) {
	if g := e.Group(ref); g != nil {
		return g, nil
	}
	if g := e.GroupByName(ref); g != nil {
		return g, nil
	}
	return nil, NotFound("no group %s", Quote(ref))
}

// FindPolicy accepts a policy id or the name (or id) of its group.
func FindPolicy(e *estate.Estate, ref string) (*model.ResourcePolicy, error) {
	if p := e.Policy(ref); p != nil {
		return p, nil
	}
	g, err := FindGroup(e, ref)
	if err != nil {
		return nil, NotFound("no resource policy %s (give a policy id or the name of its group)", Quote(ref))
	}
	if p := e.PolicyOfGroup(g.ID); p != nil {
		return p, nil
	}
	return nil, NotFound("group %s has no resource policy", g.Name)
}

func FindProject(e *estate.Estate, ref string) (*model.Project, error) {
	if p := e.Project(ref); p != nil {
		return p, nil
	}
	if p := e.ProjectByName(ref); p != nil {
		return p, nil
	}
	return nil, NotFound("no project %s", Quote(ref))
}

// UsedProject finds, by id or name, a project p uses. One they may not
// use is refused as unknown, naming only what they asked for, so that a
// reference never tells whether another group's project exists.
func (k *Kernel) UsedProject(ctx context.Context, p *identity.Principal, ref string) (*model.Project, error) {
	e, err := k.CurrentEstate(ctx, k.Store, p.TenantID)
	if err != nil {
		return nil, k.Internal(ctx, err)
	}
	pr, err := FindProject(e, ref)
	if err != nil || !UsesProject(p, pr) {
		return nil, NotFound("no project %s", Quote(ref))
	}
	return pr, nil
}

// FindComputeResource accepts a compute resource's id, or its name when only
// one compute resource in e has it (names are shared between groups: "1 GPU"
// of one group and "1 GPU" of another are two compute resources).
func FindComputeResource(e *estate.Estate, ref string) (*model.ComputeResource, error) {
	if cr := e.ComputeResource(ref); cr != nil {
		return cr, nil
	}
	var named []*model.ComputeResource
	for _, cr := range e.ComputeResources {
		if cr.Name == ref {
			named = append(named, cr)
		}
	}
	switch len(named) {
	case 0:
		return nil, NotFound("no compute resource %s", Quote(ref))
	case 1:
		return named[0], nil
	}
	return nil, Invalid("compute resource %s exists for groups %s; give its id (see 'klique get computeresources -o json')",
		Quote(ref), Names(named, func(c *model.ComputeResource) string { return e.PolicyGroupName(c.PolicyID) }))
}

func FindUser(ctx context.Context, q store.Queries, tenantID, ref string) (*model.User, error) {
	u, err := q.GetUser(ctx, tenantID, ref)
	if errors.Is(err, store.ErrNotFound) {
		u, err = q.GetUserByName(ctx, tenantID, ref)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, NotFound("no user %s", Quote(ref))
	}
	return u, err
}

func (k *Kernel) SeesUser(ctx context.Context, p *identity.Principal, userID string) (bool, error) {
	if p.IsAdmin() || userID == p.UserID {
		return true, nil
	}
	ms, err := k.Store.ListMembershipsByUser(ctx, p.TenantID, userID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if p.InGroup(m.GroupID) {
			return true, nil
		}
	}
	return false, nil
}

// UserInGroup reports whether a user is a member of a group. Admins count
// as members of every group, as they may use every project.
func UserInGroup(ctx context.Context, q store.Queries, tenantID, userID, groupID string) (bool, error) {
	u, err := q.GetUser(ctx, tenantID, userID)
	if err != nil {
		return false, err
	}
	if u.Role.IsAdmin() {
		return true, nil
	}
	ms, err := q.ListMembershipsByUser(ctx, tenantID, userID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.GroupID == groupID {
			return true, nil
		}
	}
	return false, nil
}

// LeadOf reports whether a user leads a group now: leads add members, and
// only admins make, demote or remove leads.
func LeadOf(ctx context.Context, q store.Queries, tenantID, groupID, userID string) (bool, error) {
	ms, err := q.ListMembershipsByUser(ctx, tenantID, userID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.GroupID == groupID {
			return m.Role == model.GroupRoleLead, nil
		}
	}
	return false, nil
}

// Task returns a task the caller may see; another tenant's, or one the
// caller may not see, is not found.
func (k *Kernel) Task(ctx context.Context, id string) (*model.Task, error) {
	p, err := Caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := k.Store.GetTask(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !SeesTask(p, t)) {
		return nil, NotFound("no task %s", Quote(id))
	}
	return t, k.Internal(ctx, err)
}

// User returns a user the caller may see: themselves, members of their
// groups, or anyone for admins.
func (k *Kernel) User(ctx context.Context, ref string) (*model.User, error) {
	p, err := Caller(ctx)
	if err != nil {
		return nil, err
	}
	u, err := FindUser(ctx, k.Store, p.TenantID, ref)
	if err != nil {
		return nil, k.Internal(ctx, err)
	}
	ok, err := k.SeesUser(ctx, p, u.ID)
	if err != nil {
		return nil, k.Internal(ctx, err)
	}
	if !ok {
		return nil, NotFound("no user %s", Quote(ref))
	}
	return u, nil
}

// ComputeResource returns a compute resource by id (or by a name only one
// has), if the caller may see it.
func (k *Kernel) ComputeResource(ctx context.Context, ref string) (*model.ComputeResource, error) {
	e, err := k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return FindComputeResource(e, ref)
}

// Policy returns a resource policy by id or by its group's name, if the
// caller may see it.
func (k *Kernel) Policy(ctx context.Context, ref string) (*model.ResourcePolicy, error) {
	e, err := k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return FindPolicy(e, ref)
}
