package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// EstateResult is what an allocation-model change did.
type EstateResult struct {
	Changes  []estate.Change
	Warnings []estate.Warning
	// Estate is the allocation model after the change.
	Estate *estate.Estate
	// ID is the object the operation was about: created, changed or
	// deleted. Empty for a whole estate file.
	ID     string
	DryRun bool
}

// LoadEstate reads a tenant's whole allocation model.
func LoadEstate(ctx context.Context, q store.Queries, tenantID string) (*estate.Estate, error) {
	return estate.Load(ctx, q, tenantID)
}

// Estate returns the caller's tenant's allocation model as the caller may
// see it: pools, profiles and GPU classes are open to every user of the
// tenant; policies, compute resources, groups and projects only as far as
// the caller's groups reach (admins see everything).
func (k *Kernel) Estate(ctx context.Context) (*estate.Estate, error) {
	p, err := Caller(ctx)
	if err != nil {
		return nil, err
	}
	e := cacheFrom(ctx).get(p.TenantID)
	if e == nil {
		if e, err = k.CurrentEstate(ctx, k.Store, p.TenantID); err != nil {
			return nil, k.Internal(ctx, err)
		}
		cacheFrom(ctx).put(p.TenantID, e)
	}
	if p.IsAdmin() && p.ProjectID == "" {
		return e, nil
	}
	return VisibleEstate(p, e), nil
}

// VisibleEstate cuts an estate down to what a non-admin may see. The
// departments above the caller's groups, and their policies, are part of
// it: their reservations and limits govern the caller's work, and the
// engine names them when they hold it. Their other groups are not. A
// department head sees, besides, everything below the department: its
// teams and departments, their policies and compute resources (not their
// projects, which stay their members').
func VisibleEstate(p *identity.Principal, e *estate.Estate) *estate.Estate {
	v := &estate.Estate{GPUClasses: e.GPUClasses, Pools: e.Pools, Profiles: e.Profiles}
	sees := map[string]bool{}
	for _, g := range e.Groups {
		if OverseesGroup(p, e, g.ID) {
			sees[g.ID] = true
			for _, a := range e.Ancestors(g.ID) {
				sees[a.ID] = true
			}
		}
	}
	for _, g := range e.Groups {
		if sees[g.ID] {
			v.Groups = append(v.Groups, g)
		}
	}
	for _, pol := range e.Policies {
		if sees[pol.GroupID] {
			v.Policies = append(v.Policies, pol)
		}
	}
	for _, cr := range e.ComputeResources {
		if pol := e.Policy(cr.PolicyID); pol != nil && OverseesGroup(p, e, pol.GroupID) {
			v.ComputeResources = append(v.ComputeResources, cr)
		}
	}
	for _, pr := range e.Projects {
		if UsesProject(p, pr) {
			v.Projects = append(v.Projects, pr)
		}
	}
	return v
}

// ChangeEstate is the one way the allocation model changes. It loads the
// tenant's estate, lets mutate change a copy, normalises and validates the
// copy as a whole, checks what deletions would strand, and writes the
// difference with an audit entry per object, all in one transaction: an
// operation run as p (RunAs) that needs a tenant admin.
func (k *Kernel) ChangeEstate(ctx context.Context, p *identity.Principal, what string, dryRun bool,
	mutate func(t *Txn, cur, next *estate.Estate) (string, error)) (*EstateResult, error) {
	return k.changeEstateAs(ctx, p, RightAdmin, what, dryRun, nil, mutate)
}

// ChangeDelegatedEstate is ChangeCallerEstate for a change an admin
// delegates down the organisation tree (a department head's change of a
// policy below the department): it asks nothing of the caller up front,
// and mutate checks, against the estate it changes, that the caller may
// make this change (writing included). Everything else (the lock, validating the whole estate, the
// audit entry per changed object) is ChangeEstate's. What mutate writes
// to *by ("by ann, head of department research") ends each audit entry's
// detail, so the trail says under which right the change was made.
func (k *Kernel) ChangeDelegatedEstate(ctx context.Context, what string,
	mutate func(t *Txn, cur, next *estate.Estate, by *string) (string, error)) (*EstateResult, error) {
	p, err := Caller(ctx)
	if err != nil {
		return nil, err
	}
	var by string
	return k.changeEstateAs(ctx, p, RightRead, what, false, &by, func(t *Txn, cur, next *estate.Estate) (string, error) {
		return mutate(t, cur, next, &by)
	})
}

func (k *Kernel) changeEstateAs(ctx context.Context, p *identity.Principal, right Right, what string, dryRun bool, by *string,
	mutate func(t *Txn, cur, next *estate.Estate) (string, error)) (*EstateResult, error) {
	unlock := func() {}
	defer func() { unlock() }()
	res, err := RunAs(ctx, k, p, Op[*EstateResult]{
		Name: "changeEstate", Right: right, What: what,
		// Changes of one tenant's model are made one at a time.
		Prepare: func(p *identity.Principal) error { unlock = k.LockEstate(p.TenantID); return nil },
		Body: func(t *Txn) (*EstateResult, Audit, error) {
			res, a, err := k.changeEstate(t, dryRun, mutate)
			if by != nil && *by != "" {
				a = a.noted(*by)
			}
			return res, a, err
		},
	})
	if err != nil {
		return nil, err
	}
	if !dryRun && len(res.Changes) > 0 {
		k.estates.forget(p.TenantID)
	}
	return res, nil
}

// ChangeCallerEstate is ChangeEstate as the request's caller, not a dry
// run: a domain's change of one object of the model.
func (k *Kernel) ChangeCallerEstate(ctx context.Context, what string,
	mutate func(t *Txn, cur, next *estate.Estate) (string, error)) (*EstateResult, error) {
	p, err := Caller(ctx)
	if err != nil {
		return nil, err
	}
	return k.ChangeEstate(ctx, p, what, false, mutate)
}

// changeEstate is ChangeEstate's body: it writes the difference mutate
// makes and returns an audit entry per changed object. A dry run, or a
// change that changes nothing, rolls back (ErrRollback) with the result.
func (k *Kernel) changeEstate(t *Txn, dryRun bool, mutate func(t *Txn, cur, next *estate.Estate) (string, error)) (*EstateResult, Audit, error) {
	ctx, tenantID := t.Ctx, t.P.TenantID
	res := &EstateResult{DryRun: dryRun}
	if err := t.Q.LockTenant(ctx, tenantID); err != nil {
		return nil, Audit{}, err
	}
	// Under the lock the version is current: the model read is the
	// one this change applies to.
	cur, err := k.CurrentEstate(ctx, t.Q, tenantID)
	if err != nil {
		return nil, Audit{}, err
	}
	next := cur.Clone()
	if res.ID, err = mutate(t, cur, next); err != nil {
		return nil, Audit{}, err
	}
	next.FollowRenames(cur)
	next.Normalize()
	if err := next.Validate(); err != nil {
		return nil, Audit{}, InvalidEstate(err)
	}
	res.Changes = estate.Diff(cur, next)
	res.Warnings = next.Warnings()
	res.Estate = next
	if err := k.checkDeletes(t, cur, res.Changes); err != nil {
		return nil, Audit{}, err
	}
	if dryRun || len(res.Changes) == 0 {
		return res, Audit{}, ErrRollback
	}
	entries, err := writeChanges(t, cur, next, res.Changes)
	return res, Entries(entries...), err
}

// noted ends the detail of a and of each further entry with note.
func (a Audit) noted(note string) Audit {
	if a.Action != "" {
		a.Detail += " (" + note + ")"
	}
	also := make([]Audit, len(a.Also))
	for i, b := range a.Also {
		also[i] = b.noted(note)
	}
	a.Also = also
	return a
}

// writeChanges writes the changes of an estate change and returns the
// audit entry of each.
func writeChanges(t *Txn, cur, next *estate.Estate, changes []estate.Change) ([]Audit, error) {
	ctx, tenantID := t.Ctx, t.P.TenantID
	if err := parkRenamedComputeResources(t, changes); err != nil {
		return nil, err
	}
	if _, err := t.Q.BumpEstateVersion(ctx, tenantID); err != nil {
		return nil, err
	}
	gatewayChanged, appsChanged := false, false
	entries := make([]Audit, 0, len(changes))
	for _, c := range changes {
		if llmconf.OwnsKind(c.Kind) {
			gatewayChanged = true
		} else if appconf.OwnsKind(c.Kind) {
			appsChanged = true
		} else if err := writeChange(t, c); err != nil {
			return nil, err
		}
		entries = append(entries, Audit{Action: string(c.Kind) + "." + string(c.Action) + "d", Kind: c.Kind, ID: c.ID, Name: c.Name,
			GroupID: groupOfChange(next, cur, c), Detail: c.String()})
	}
	if gatewayChanged {
		if err := t.Q.PutGateway(ctx, tenantID, &next.Gateway, t.Now); err != nil {
			return nil, err
		}
	}
	if appsChanged {
		if err := t.Q.PutApps(ctx, tenantID, &next.Apps, t.Now); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// parkRenamedComputeResources gives every compute resource an update renames
// a temporary name first, so that an estate file may swap the names of two
// compute resources of one group ("1 GPU" <-> "one GPU") even though names
// are unique within a group at every step.
func parkRenamedComputeResources(t *Txn, changes []estate.Change) error {
	for _, c := range changes {
		cr, ok := c.Object.(*model.ComputeResource)
		if !ok || c.Action != estate.Update || !slices.Contains(c.Fields, "name") {
			continue
		}
		// A leading space makes it a name no compute resource can have.
		parked := *cr
		parked.Name = " renaming " + cr.ID
		if err := t.Q.UpdateComputeResource(t.Ctx, &parked); err != nil {
			return fmt.Errorf("rename compute resource %s: %w", cr.Name, err)
		}
	}
	return nil
}

// groupOfChange names the group a changed object belongs to, so that its
// event reaches only those who may see it.
func groupOfChange(next, cur *estate.Estate, c estate.Change) string {
	switch o := c.Object.(type) {
	case *model.ResourcePolicy:
		return o.GroupID
	case *model.ComputeResource:
		for _, e := range []*estate.Estate{next, cur} {
			if pol := e.Policy(o.PolicyID); pol != nil {
				return pol.GroupID
			}
		}
	case *model.Group:
		return o.ID
	case *model.Project:
		return o.GroupID
	}
	return ""
}

// checkDeletes refuses deletions that would strand work: a compute resource
// with tasks queued or running, or a project that has tasks. The store keeps
// every task's compute resource and project, and every API key's project,
// so those are refused too, with a message that says why, rather than
// failing in the store.
func (k *Kernel) checkDeletes(t *Txn, cur *estate.Estate, changes []estate.Change) error {
	var keys []*model.APIKey
	for _, c := range changes {
		if c.Action != estate.Delete {
			continue
		}
		switch o := c.Object.(type) {
		case *model.ComputeResource:
			n, err := t.Q.CountTasks(t.Ctx, o.TenantID, store.TaskFilter{ComputeResourceID: o.ID, Statuses: ActiveStatuses})
			if err != nil {
				return err
			}
			if n > 0 {
				return Conflict("compute resource %s of group %s has %d tasks queued or running; abort them or let them finish before disconnecting it",
					Quote(o.Name), cur.PolicyGroupName(o.PolicyID), n)
			}
		case *model.Pool:
			n, err := t.Q.CountTasks(t.Ctx, o.TenantID, store.TaskFilter{PoolID: o.ID, Statuses: ActiveStatuses})
			if err != nil {
				return err
			}
			if n > 0 {
				return Conflict("pool %s holds %d tasks; abort them or let them finish before deleting it", Quote(o.Name), n)
			}
		case *model.Project:
			n, err := t.Q.CountTasks(t.Ctx, o.TenantID, store.TaskFilter{ProjectID: o.ID})
			if err != nil {
				return err
			}
			if n > 0 {
				return Conflict("project %s has %d tasks; a project with tasks is kept for their history", Quote(o.Name), n)
			}
			if keys == nil {
				if keys, err = t.Q.ListAPIKeys(t.Ctx, o.TenantID, ""); err != nil {
					return err
				}
			}
			n = 0
			for _, k := range keys {
				if k.ProjectID == o.ID && k.Active(t.Now) {
					n++
				}
			}
			if n > 0 {
				return Conflict("project %s has %d active API keys scoped to it; revoke them first (revoked and expired keys go with the project)", Quote(o.Name), n)
			}
		}
	}
	return nil
}

// ActiveStatuses are the statuses of tasks that hold or wait for capacity.
var ActiveStatuses = []model.TaskStatus{model.TaskQueued, model.TaskPlaced, model.TaskRunning}

// writeChange writes one change to the store. A deleted object is the
// current estate's, which readers share: it is not touched.
func writeChange(t *Txn, c estate.Change) error {
	ctx, q := t.Ctx, t.Q
	if c.Action != estate.Delete {
		stampUpdated(c.Object, t.Now)
	}
	var err error
	switch o := c.Object.(type) {
	case *model.GPUClass:
		err = crud(c.Action, func() error { return q.CreateGPUClass(ctx, o) }, func() error { return q.UpdateGPUClass(ctx, o) }, func() error { return q.DeleteGPUClass(ctx, o.TenantID, o.ID) })
	case *model.Group:
		err = crud(c.Action, func() error { return q.CreateGroup(ctx, o) }, func() error { return q.UpdateGroup(ctx, o) }, func() error { return q.DeleteGroup(ctx, o.TenantID, o.ID) })
	case *model.Pool:
		err = crud(c.Action, func() error { return q.CreatePool(ctx, o) }, func() error { return q.UpdatePool(ctx, o) }, func() error { return q.DeletePool(ctx, o.TenantID, o.ID) })
	case *model.Profile:
		err = crud(c.Action, func() error { return q.CreateProfile(ctx, o) }, func() error { return q.UpdateProfile(ctx, o) }, func() error { return q.DeleteProfile(ctx, o.TenantID, o.ID) })
	case *model.ResourcePolicy:
		err = crud(c.Action, func() error { return q.CreatePolicy(ctx, o) }, func() error { return q.UpdatePolicy(ctx, o) }, func() error { return q.DeletePolicy(ctx, o.TenantID, o.ID) })
	case *model.ComputeResource:
		err = crud(c.Action, func() error { return q.CreateComputeResource(ctx, o) }, func() error { return q.UpdateComputeResource(ctx, o) }, func() error { return q.DeleteComputeResource(ctx, o.TenantID, o.ID) })
	case *model.Project:
		err = crud(c.Action, func() error { return q.CreateProject(ctx, o) }, func() error { return q.UpdateProject(ctx, o) }, func() error { return q.DeleteProject(ctx, o.TenantID, o.ID) })
	default:
		err = fmt.Errorf("unknown object %T", c.Object)
	}
	if errors.Is(err, store.ErrConflict) {
		if c.Action == estate.Delete {
			return Conflict("cannot %s: other records still refer to it", c.String())
		}
		return Conflict("%s conflicts with another object of the same name; reload and try again", c.String())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.String(), err)
	}
	return nil
}

// stampUpdated sets the UpdatedAt of a created or changed object.
func stampUpdated(obj any, now time.Time) {
	switch o := obj.(type) {
	case *model.GPUClass:
		o.UpdatedAt = now
	case *model.Group:
		o.UpdatedAt = now
	case *model.Pool:
		o.UpdatedAt = now
	case *model.Profile:
		o.UpdatedAt = now
	case *model.ResourcePolicy:
		o.UpdatedAt = now
	case *model.ComputeResource:
		o.UpdatedAt = now
	case *model.Project:
		o.UpdatedAt = now
	}
}

func crud(a estate.Action, create, update, del func() error) error {
	switch a {
	case estate.Create:
		return create()
	case estate.Update:
		return update()
	case estate.Delete:
		return del()
	}
	return fmt.Errorf("unknown action %q", a)
}

// Summary says in one line what the change did: "2 created, 1 updated", or
// "no changes".
func (r *EstateResult) Summary() string {
	counts := map[estate.Action]int{}
	for _, c := range r.Changes {
		counts[c.Action]++
	}
	var parts []string
	for _, a := range []estate.Action{estate.Create, estate.Update, estate.Delete} {
		if n := counts[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %sd", n, strings.TrimSuffix(string(a), "e")+"e"))
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	s := strings.Join(parts, ", ")
	if r.DryRun {
		s += " (dry run: nothing was written)"
	}
	return s
}
