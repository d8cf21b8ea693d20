package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
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

// loadEstate reads a tenant's whole allocation model.
func loadEstate(ctx context.Context, q store.Queries, tenantID string) (*estate.Estate, error) {
	return estate.Load(ctx, q, tenantID)
}

// Estate returns the caller's tenant's allocation model as the caller may
// see it: pools, profiles and GPU classes are open to every user of the
// tenant; policies, compute resources, groups and projects only as far as
// the caller's groups reach (admins see everything).
func (s *Service) Estate(ctx context.Context) (*estate.Estate, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	e := cacheFrom(ctx).get(p.TenantID)
	if e == nil {
		if e, err = s.currentEstate(ctx, s.store, p.TenantID); err != nil {
			return nil, s.internal(ctx, err)
		}
		cacheFrom(ctx).put(p.TenantID, e)
	}
	if p.IsAdmin() && p.ProjectID == "" {
		return e, nil
	}
	return visibleEstate(p, e), nil
}

// visibleEstate cuts an estate down to what a non-admin may see.
func visibleEstate(p *identity.Principal, e *estate.Estate) *estate.Estate {
	v := &estate.Estate{GPUClasses: e.GPUClasses, Pools: e.Pools, Profiles: e.Profiles}
	for _, g := range e.Groups {
		if seesGroup(p, g.ID) {
			v.Groups = append(v.Groups, g)
		}
	}
	for _, pol := range e.Policies {
		if seesGroup(p, pol.GroupID) {
			v.Policies = append(v.Policies, pol)
		}
	}
	for _, cr := range e.ComputeResources {
		if pol := e.Policy(cr.PolicyID); pol != nil && seesGroup(p, pol.GroupID) {
			v.ComputeResources = append(v.ComputeResources, cr)
		}
	}
	for _, pr := range e.Projects {
		if usesProject(p, pr) {
			v.Projects = append(v.Projects, pr)
		}
	}
	return v
}

// EstateWarnings returns what an admin should know about the allocation
// model, such as reservations beyond the capacity behind them.
func (s *Service) EstateWarnings(ctx context.Context) ([]estate.Warning, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "read estate warnings"); err != nil {
		return nil, err
	}
	e, err := loadEstate(ctx, s.store, p.TenantID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	return e.Warnings(), nil
}

// ExportEstate writes the tenant's allocation model as an estate file.
func (s *Service) ExportEstate(ctx context.Context) ([]byte, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "export the estate"); err != nil {
		return nil, err
	}
	e, err := loadEstate(ctx, s.store, p.TenantID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	out, err := e.Export().Marshal()
	if err != nil {
		return nil, s.internal(ctx, fmt.Errorf("export estate: %w", err))
	}
	return out, nil
}

// ApplyEstate creates and updates every object an estate file describes, in
// one transaction: all of it or, on any problem, nothing. Applying the same
// file twice changes nothing the second time. With dryRun it reports what it
// would do and writes nothing.
func (s *Service) ApplyEstate(ctx context.Context, document []byte, dryRun bool) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "apply an estate file"); err != nil {
		return nil, err
	}
	doc, err := estate.ParseDocument(document)
	if err != nil {
		return nil, invalid("%v", err)
	}
	return s.changeEstate(ctx, p, "apply an estate file", dryRun, func(t *txn, cur, next *estate.Estate) (string, error) {
		applied, err := doc.Apply(cur, p.TenantID, model.NewID, t.now)
		if err != nil {
			return "", invalidEstate(err)
		}
		*next = *applied
		return "", nil
	})
}

var errDryRun = errors.New("dry run")

// changeEstate is the one way the allocation model changes. It loads the
// tenant's estate, lets mutate change a copy, normalises and validates the
// copy as a whole, checks what deletions would strand, and writes the
// difference with an audit entry per object, all in one transaction.
func (s *Service) changeEstate(ctx context.Context, p *identity.Principal, what string, dryRun bool,
	mutate func(t *txn, cur, next *estate.Estate) (string, error)) (*EstateResult, error) {
	if err := requireAdmin(p, what); err != nil {
		return nil, err
	}
	defer s.lockEstate(p.TenantID)()
	res := &EstateResult{DryRun: dryRun}
	err := s.write(ctx, p, func(t *txn) error {
		if err := t.q.LockTenant(ctx, p.TenantID); err != nil {
			return err
		}
		// Under the lock the version is current: the model read is the
		// one this change applies to.
		cur, err := s.currentEstate(ctx, t.q, p.TenantID)
		if err != nil {
			return err
		}
		next := cur.Clone()
		if res.ID, err = mutate(t, cur, next); err != nil {
			return err
		}
		next.FollowRenames(cur)
		next.Normalize()
		if err := next.Validate(); err != nil {
			return invalidEstate(err)
		}
		res.Changes = estate.Diff(cur, next)
		res.Warnings = next.Warnings()
		res.Estate = next
		if err := s.checkDeletes(t, cur, res.Changes); err != nil {
			return err
		}
		if dryRun {
			return errDryRun
		}
		if err := parkRenamedComputeResources(t, res.Changes); err != nil {
			return err
		}
		if len(res.Changes) > 0 {
			if _, err := t.q.BumpEstateVersion(ctx, p.TenantID); err != nil {
				return err
			}
		}
		gatewayChanged := false
		for _, c := range res.Changes {
			if estate.GatewayKind(c.Kind) {
				gatewayChanged = true
			} else if err := writeChange(t, c); err != nil {
				return err
			}
			if err := t.record(string(c.Kind)+"."+string(c.Action)+"d", c.Kind, c.ID, c.Name, groupOfChange(next, cur, c), c.String()); err != nil {
				return err
			}
		}
		if gatewayChanged {
			if err := t.q.PutGateway(ctx, p.TenantID, &next.Gateway, t.now); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	if len(res.Changes) > 0 {
		s.estates.forget(p.TenantID)
	}
	return res, nil
}

// parkRenamedComputeResources gives every compute resource an update renames
// a temporary name first, so that an estate file may swap the names of two
// compute resources of one group ("1 GPU" <-> "one GPU") even though names
// are unique within a group at every step.
func parkRenamedComputeResources(t *txn, changes []estate.Change) error {
	for _, c := range changes {
		cr, ok := c.Object.(*model.ComputeResource)
		if !ok || c.Action != estate.Update || !slices.Contains(c.Fields, "name") {
			continue
		}
		// A leading space makes it a name no compute resource can have.
		parked := *cr
		parked.Name = " renaming " + cr.ID
		if err := t.q.UpdateComputeResource(t.ctx, &parked); err != nil {
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
func (s *Service) checkDeletes(t *txn, cur *estate.Estate, changes []estate.Change) error {
	var keys []*model.APIKey
	for _, c := range changes {
		if c.Action != estate.Delete {
			continue
		}
		switch o := c.Object.(type) {
		case *model.ComputeResource:
			n, err := t.q.CountTasks(t.ctx, o.TenantID, store.TaskFilter{ComputeResourceID: o.ID, Statuses: activeStatuses})
			if err != nil {
				return err
			}
			if n > 0 {
				return conflict("compute resource %s of group %s has %d tasks queued or running; abort them or let them finish before disconnecting it",
					quote(o.Name), cur.PolicyGroupName(o.PolicyID), n)
			}
		case *model.Pool:
			n, err := t.q.CountTasks(t.ctx, o.TenantID, store.TaskFilter{PoolID: o.ID, Statuses: activeStatuses})
			if err != nil {
				return err
			}
			if n > 0 {
				return conflict("pool %s holds %d tasks; abort them or let them finish before deleting it", quote(o.Name), n)
			}
		case *model.Project:
			n, err := t.q.CountTasks(t.ctx, o.TenantID, store.TaskFilter{ProjectID: o.ID})
			if err != nil {
				return err
			}
			if n > 0 {
				return conflict("project %s has %d tasks; a project with tasks is kept for their history", quote(o.Name), n)
			}
			if keys == nil {
				if keys, err = t.q.ListAPIKeys(t.ctx, o.TenantID, ""); err != nil {
					return err
				}
			}
			n = 0
			for _, k := range keys {
				if k.ProjectID == o.ID && k.Active(t.now) {
					n++
				}
			}
			if n > 0 {
				return conflict("project %s has %d active API keys scoped to it; revoke them first (revoked and expired keys go with the project)", quote(o.Name), n)
			}
		}
	}
	return nil
}

// activeStatuses are the statuses of tasks that hold or wait for capacity.
var activeStatuses = []model.TaskStatus{model.TaskQueued, model.TaskPlaced, model.TaskRunning}

// writeChange writes one change to the store. A deleted object is the
// current estate's, which readers share: it is not touched.
func writeChange(t *txn, c estate.Change) error {
	ctx, q := t.ctx, t.q
	if c.Action != estate.Delete {
		stampUpdated(c.Object, t.now)
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
			return conflict("cannot %s: other records still refer to it", c.String())
		}
		return conflict("%s conflicts with another object of the same name; reload and try again", c.String())
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

// Reference resolution: by id first, then by name. Errors name what was
// asked for, never another tenant's objects (those are not in the estate).

func findGPUClass(e *estate.Estate, ref string) (*model.GPUClass, error) {
	if c := e.GPUClass(ref); c != nil {
		return c, nil
	}
	if c := e.GPUClassByName(ref); c != nil {
		return c, nil
	}
	return nil, notFound("no GPU class %s", quote(ref))
}

func findPool(e *estate.Estate, ref string) (*model.Pool, error) {
	if p := e.Pool(ref); p != nil {
		return p, nil
	}
	if p := e.PoolByName(ref); p != nil {
		return p, nil
	}
	return nil, notFound("no pool %s", quote(ref))
}

func findProfile(e *estate.Estate, ref string) (*model.Profile, error) {
	if p := e.Profile(ref); p != nil {
		return p, nil
	}
	if p := e.ProfileByName(ref); p != nil {
		return p, nil
	}
	return nil, notFound("no profile %s", quote(ref))
}

func findGroup(e *estate.Estate, ref string) (*model.Group, error) {
	if g := e.Group(ref); g != nil {
		return g, nil
	}
	if g := e.GroupByName(ref); g != nil {
		return g, nil
	}
	return nil, notFound("no group %s", quote(ref))
}

// findPolicy accepts a policy id or the name (or id) of its group.
func findPolicy(e *estate.Estate, ref string) (*model.ResourcePolicy, error) {
	if p := e.Policy(ref); p != nil {
		return p, nil
	}
	g, err := findGroup(e, ref)
	if err != nil {
		return nil, notFound("no resource policy %s (give a policy id or the name of its group)", quote(ref))
	}
	if p := e.PolicyOfGroup(g.ID); p != nil {
		return p, nil
	}
	return nil, notFound("group %s has no resource policy", g.Name)
}

func findProject(e *estate.Estate, ref string) (*model.Project, error) {
	if p := e.Project(ref); p != nil {
		return p, nil
	}
	if p := e.ProjectByName(ref); p != nil {
		return p, nil
	}
	return nil, notFound("no project %s", quote(ref))
}

// Reads of single objects and lists, as the caller may see them.

// GPUClass returns a GPU class by id or name.
func (s *Service) GPUClass(ctx context.Context, ref string) (*model.GPUClass, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return findGPUClass(e, ref)
}

// Pool returns a pool by id or name.
func (s *Service) Pool(ctx context.Context, ref string) (*model.Pool, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return findPool(e, ref)
}

// Profile returns a profile by id or name.
func (s *Service) Profile(ctx context.Context, ref string) (*model.Profile, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return findProfile(e, ref)
}

// Policy returns a resource policy by id or by its group's name, if the
// caller may see it.
func (s *Service) Policy(ctx context.Context, ref string) (*model.ResourcePolicy, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return findPolicy(e, ref)
}

// Group returns a group by id or name, if the caller may see it.
func (s *Service) Group(ctx context.Context, ref string) (*model.Group, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return findGroup(e, ref)
}

// Project returns a project by id or name, if the caller may use it.
func (s *Service) Project(ctx context.Context, ref string) (*model.Project, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return findProject(e, ref)
}

// ComputeResource returns a compute resource by id, if the caller may see
// it.
func (s *Service) ComputeResource(ctx context.Context, id string) (*model.ComputeResource, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return findComputeResource(e, id)
}

// findComputeResource accepts a compute resource's id, or its name when only
// one compute resource in e has it (names are shared between groups: "1 GPU"
// of one group and "1 GPU" of another are two compute resources).
func findComputeResource(e *estate.Estate, ref string) (*model.ComputeResource, error) {
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
		return nil, notFound("no compute resource %s", quote(ref))
	case 1:
		return named[0], nil
	}
	return nil, invalid("compute resource %s exists for groups %s; give its id (see 'klique get computeresources -o json')",
		quote(ref), names(named, func(c *model.ComputeResource) string { return e.PolicyGroupName(c.PolicyID) }))
}

// Mutations of the allocation model. Each one describes its change on a copy
// of the estate; changeEstate does the rest.

// setString sets a field from an input. Values are taken as given: a name
// with a leading or trailing space is refused by validation, the same as in
// an estate file, rather than quietly changed.
func setString(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func requireName(kind string, name *string) error {
	if name == nil || strings.TrimSpace(*name) == "" {
		return invalid("a %s needs a name", kind)
	}
	return nil
}

// CreateGPUClass adds a GPU class.
func (s *Service) CreateGPUClass(ctx context.Context, in GPUClassInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "create GPU classes", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		if err := requireName("GPU class", in.Name); err != nil {
			return "", err
		}
		if next.GPUClassByName(strings.TrimSpace(*in.Name)) != nil {
			return "", conflict("a GPU class named %s already exists", quote(*in.Name))
		}
		c := &model.GPUClass{ID: model.NewID(), TenantID: p.TenantID, Currency: estate.DefaultCurrency, CreatedAt: t.now}
		if err := applyGPUClass(c, in); err != nil {
			return "", err
		}
		next.GPUClasses = append(next.GPUClasses, c)
		return c.ID, nil
	})
}

// UpdateGPUClass changes a GPU class.
func (s *Service) UpdateGPUClass(ctx context.Context, ref string, in GPUClassInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "change GPU classes", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		c, err := findGPUClass(next, ref)
		if err != nil {
			return "", err
		}
		return c.ID, applyGPUClass(c, in)
	})
}

func applyGPUClass(c *model.GPUClass, in GPUClassInput) error {
	setString(&c.Name, in.Name)
	setString(&c.Description, in.Description)
	setInt(&c.MemoryGB, in.MemoryGB)
	setString(&c.Currency, in.Currency)
	c.Currency = strings.ToUpper(c.Currency)
	if in.PricePerGPUHour != nil {
		v, err := estate.ScaleDecimal("price per GPU-hour", *in.PricePerGPUHour, 6)
		if err != nil {
			return invalid("GPU class %s: %v", quote(c.Name), err)
		}
		c.PriceMicros = v
	}
	return nil
}

// DeleteGPUClass removes a GPU class no pool or profile uses.
func (s *Service) DeleteGPUClass(ctx context.Context, ref string) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "delete GPU classes", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		c, err := findGPUClass(next, ref)
		if err != nil {
			return "", err
		}
		var users []string
		for _, pool := range next.Pools {
			if pool.GPUClassID == c.ID {
				users = append(users, "pool "+pool.Name)
			}
		}
		for _, pr := range next.Profiles {
			if pr.GPUClassID == c.ID {
				users = append(users, "profile "+pr.Name)
			}
		}
		if len(users) > 0 {
			return "", conflict("GPU class %s is used by %s; change them first", quote(c.Name), strings.Join(users, ", "))
		}
		next.GPUClasses = remove(next.GPUClasses, c)
		return c.ID, nil
	})
}

// CreatePool adds a pool.
func (s *Service) CreatePool(ctx context.Context, in PoolInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "create pools", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		if err := requireName("pool", in.Name); err != nil {
			return "", err
		}
		if next.PoolByName(strings.TrimSpace(*in.Name)) != nil {
			return "", conflict("a pool named %s already exists", quote(*in.Name))
		}
		if in.Kind == nil || in.CapacityGPUs == nil || in.GPUClass == nil {
			return "", invalid("a pool needs a kind, a capacity in whole GPUs and a GPU class")
		}
		pool := &model.Pool{ID: model.NewID(), TenantID: p.TenantID, CreatedAt: t.now}
		next.Pools = append(next.Pools, pool)
		return pool.ID, applyPool(next, pool, in)
	})
}

// UpdatePool changes a pool.
func (s *Service) UpdatePool(ctx context.Context, ref string, in PoolInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "change pools", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pool, err := findPool(next, ref)
		if err != nil {
			return "", err
		}
		return pool.ID, applyPool(next, pool, in)
	})
}

func applyPool(e *estate.Estate, pool *model.Pool, in PoolInput) error {
	setString(&pool.Name, in.Name)
	setString(&pool.Description, in.Description)
	if in.Kind != nil {
		pool.Kind = *in.Kind
	}
	setInt(&pool.CapacityGPUs, in.CapacityGPUs)
	if in.GPUClass != nil {
		c, err := findGPUClass(e, *in.GPUClass)
		if err != nil {
			return invalid("pool %s: %v", quote(pool.Name), err)
		}
		// A pool's GPU memory comes from its class unless given, as in an
		// estate file: a pool moved to another class takes that class's.
		if in.GPUMemoryGB == nil && (pool.GPUMemoryGB == 0 || pool.GPUClassID != c.ID) {
			pool.GPUMemoryGB = c.MemoryGB
		}
		pool.GPUClassID = c.ID
	}
	setInt(&pool.GPUMemoryGB, in.GPUMemoryGB)
	setString(&pool.Region, in.Region)
	if in.Labels != nil {
		pool.Labels = in.Labels
	}
	if in.ExecutionPriority != nil {
		order, problems := estate.ResolveExecutionPriority(e, pool, in.ExecutionPriority)
		if len(problems) > 0 {
			return invalid("pool %s execution priority: %s", quote(pool.Name), strings.Join(problems, "; "))
		}
		pool.ProfileOrder = order
	}
	return nil
}

// DeletePool removes a pool no profile links.
func (s *Service) DeletePool(ctx context.Context, ref string) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "delete pools", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pool, err := findPool(next, ref)
		if err != nil {
			return "", err
		}
		if profiles := next.ProfilesOnPool(pool.ID); len(profiles) > 0 {
			return "", conflict("pool %s is linked from profiles %s; remove it from their pools first", quote(pool.Name), names(profiles, func(p *model.Profile) string { return p.Name }))
		}
		next.Pools = remove(next.Pools, pool)
		return pool.ID, nil
	})
}

// CreateProfile adds a profile.
func (s *Service) CreateProfile(ctx context.Context, in ProfileInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "create profiles", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		if err := requireName("profile", in.Name); err != nil {
			return "", err
		}
		if next.ProfileByName(strings.TrimSpace(*in.Name)) != nil {
			return "", conflict("a profile named %s already exists", quote(*in.Name))
		}
		if in.Size == nil {
			return "", invalid("a profile needs a size: a fraction (0.125, 0.25, 0.5), whole GPUs (1, 8) or nodes x GPUs per node (2x8)")
		}
		pr := &model.Profile{ID: model.NewID(), TenantID: p.TenantID, TimeWeightMilli: estate.DefaultTimeWeightMilli, CreatedAt: t.now}
		next.Profiles = append(next.Profiles, pr)
		return pr.ID, applyProfile(next, pr, in)
	})
}

// UpdateProfile changes a profile.
func (s *Service) UpdateProfile(ctx context.Context, ref string, in ProfileInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "change profiles", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pr, err := findProfile(next, ref)
		if err != nil {
			return "", err
		}
		return pr.ID, applyProfile(next, pr, in)
	})
}

func applyProfile(e *estate.Estate, pr *model.Profile, in ProfileInput) error {
	setString(&pr.Name, in.Name)
	setString(&pr.Description, in.Description)
	if in.Size != nil {
		size, err := model.ParseSize(*in.Size)
		if err != nil {
			return invalid("profile %s: %v", quote(pr.Name), err)
		}
		pr.Size = size
	}
	setString(&pr.SizeParameter, in.SizeParameter)
	if in.GPUClass != nil {
		pr.GPUClassID = ""
		if *in.GPUClass != "" {
			c, err := findGPUClass(e, *in.GPUClass)
			if err != nil {
				return invalid("profile %s: %v", quote(pr.Name), err)
			}
			pr.GPUClassID = c.ID
		}
	}
	setInt(&pr.MinGPUMemoryGB, in.MinGPUMemoryGB)
	if in.TimeWeight != nil {
		w, err := estate.ScaleDecimal("time weight", *in.TimeWeight, 3)
		if err != nil {
			return invalid("profile %s: %v", quote(pr.Name), err)
		}
		pr.TimeWeightMilli = w
	}
	if in.Pools != nil {
		pr.Pools = nil
		for _, ref := range in.Pools {
			pool, err := findPool(e, ref)
			if err != nil {
				return invalid("profile %s: %v", quote(pr.Name), err)
			}
			pr.Pools = append(pr.Pools, pool.ID)
		}
	}
	if in.QueuingPriority != nil {
		order, problems := estate.ResolveQueuingPriority(e, pr, in.QueuingPriority)
		if len(problems) > 0 {
			return invalid("profile %s queuing priority: %s", quote(pr.Name), strings.Join(problems, "; "))
		}
		pr.QueuingOrder = order
	}
	return nil
}

// DeleteProfile removes a profile no policy is connected to.
func (s *Service) DeleteProfile(ctx context.Context, ref string) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "delete profiles", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pr, err := findProfile(next, ref)
		if err != nil {
			return "", err
		}
		if crs := next.ComputeResourcesOfProfile(pr.ID); len(crs) > 0 {
			return "", conflict("profile %s is connected to the policies of groups %s; disconnect it first",
				quote(pr.Name), names(crs, func(c *model.ComputeResource) string { return next.PolicyGroupName(c.PolicyID) }))
		}
		next.Profiles = remove(next.Profiles, pr)
		return pr.ID, nil
	})
}

// CreateGroup adds a group.
func (s *Service) CreateGroup(ctx context.Context, in GroupInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "create groups", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		if err := requireName("group", in.Name); err != nil {
			return "", err
		}
		if next.GroupByName(strings.TrimSpace(*in.Name)) != nil {
			return "", conflict("a group named %s already exists", quote(*in.Name))
		}
		g := &model.Group{ID: model.NewID(), TenantID: p.TenantID, CreatedAt: t.now}
		setString(&g.Name, in.Name)
		setString(&g.Description, in.Description)
		next.Groups = append(next.Groups, g)
		return g.ID, nil
	})
}

// UpdateGroup renames or describes a group.
func (s *Service) UpdateGroup(ctx context.Context, ref string, in GroupInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "change groups", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		g, err := findGroup(next, ref)
		if err != nil {
			return "", err
		}
		setString(&g.Name, in.Name)
		setString(&g.Description, in.Description)
		return g.ID, nil
	})
}

// DeleteGroup removes a group without a policy or projects. Its memberships
// go with it.
func (s *Service) DeleteGroup(ctx context.Context, ref string) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "delete groups", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		g, err := findGroup(next, ref)
		if err != nil {
			return "", err
		}
		if next.PolicyOfGroup(g.ID) != nil {
			return "", conflict("group %s has a resource policy; delete the policy first", g.Name)
		}
		var projects []string
		for _, pr := range next.Projects {
			if pr.GroupID == g.ID {
				projects = append(projects, pr.Name)
			}
		}
		if len(projects) > 0 {
			return "", conflict("group %s owns projects %s; move or delete them first", g.Name, strings.Join(projects, ", "))
		}
		if refs := next.GatewayReferences(estate.KindGroup, g.Name); len(refs) > 0 {
			return "", conflict("group %s is named by the gateway's %s; change them first", g.Name, strings.Join(refs, ", "))
		}
		next.Groups = remove(next.Groups, g)
		return g.ID, nil
	})
}

// CreatePolicy gives a group its resource policy.
func (s *Service) CreatePolicy(ctx context.Context, in PolicyInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "create resource policies", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		if in.Group == nil {
			return "", invalid("a resource policy needs the group it belongs to")
		}
		g, err := findGroup(next, *in.Group)
		if err != nil {
			return "", invalid("%v", err)
		}
		if next.PolicyOfGroup(g.ID) != nil {
			return "", conflict("group %s already has a resource policy; change that one", g.Name)
		}
		if in.LimitGPUs == nil {
			return "", invalid("a resource policy needs a limit: the most GPUs the group may hold at once")
		}
		pol := &model.ResourcePolicy{ID: model.NewID(), TenantID: p.TenantID, GroupID: g.ID, CreatedAt: t.now,
			LowWatermark: model.DefaultLowWatermark, AlertThresholdPercent: model.DefaultAlertThresholdPercent}
		next.Policies = append(next.Policies, pol)
		return pol.ID, applyPolicy(next, pol, in)
	})
}

// UpdatePolicy changes a group's resource policy.
func (s *Service) UpdatePolicy(ctx context.Context, ref string, in PolicyInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "change resource policies", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pol, err := findPolicy(next, ref)
		if err != nil {
			return "", err
		}
		if in.Group != nil {
			if g, err := findGroup(next, *in.Group); err != nil || g.ID != pol.GroupID {
				return "", invalid("a resource policy cannot move to another group; delete it and create one for the other group")
			}
		}
		return pol.ID, applyPolicy(next, pol, in)
	})
}

func applyPolicy(e *estate.Estate, pol *model.ResourcePolicy, in PolicyInput) error {
	setInt(&pol.ReservationGPUs, in.ReservationGPUs)
	setInt(&pol.LimitGPUs, in.LimitGPUs)
	if in.ClearTimeBudget && in.TimeBudget != nil {
		return invalid("give a time budget or clear it, not both")
	}
	if in.ClearTimeBudget {
		pol.Budget = nil
	}
	if b := in.TimeBudget; b != nil {
		h, err := estate.ScaleDecimal("time budget hours", b.Hours, 3)
		if err != nil {
			return invalid("resource policy of group %s: %v", e.GroupName(pol.GroupID), err)
		}
		pol.Budget = &model.TimeBudget{MilliHours: h, Period: b.Period}
	}
	if in.LowWatermarkMinutes != nil {
		pol.LowWatermark = time.Duration(*in.LowWatermarkMinutes) * time.Minute
	}
	setInt(&pol.AlertThresholdPercent, in.AlertThresholdPercent)
	return nil
}

// DeletePolicy removes a group's policy and disconnects its compute
// resources, which must have no work queued or running.
func (s *Service) DeletePolicy(ctx context.Context, ref string) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "delete resource policies", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pol, err := findPolicy(next, ref)
		if err != nil {
			return "", err
		}
		for _, cr := range next.ComputeResourcesOfPolicy(pol.ID) {
			next.ComputeResources = remove(next.ComputeResources, cr)
		}
		next.Policies = remove(next.Policies, pol)
		return pol.ID, nil
	})
}

// ConnectProfile connects a profile to a group's policy, creating the
// compute resource the group submits to. A profile larger than the group's
// limit is refused.
func (s *Service) ConnectProfile(ctx context.Context, in ConnectInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "connect profiles to policies", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pol, err := findPolicy(next, in.Policy)
		if err != nil {
			return "", invalid("%v", err)
		}
		pr, err := findProfile(next, in.Profile)
		if err != nil {
			return "", invalid("%v", err)
		}
		if existing := next.ComputeResourceOf(pol.ID, pr.ID); existing != nil {
			return "", conflict("profile %s is already connected to group %s's policy as compute resource %s", quote(pr.Name), next.GroupName(pol.GroupID), quote(existing.Name))
		}
		cr := &model.ComputeResource{ID: model.NewID(), TenantID: p.TenantID, PolicyID: pol.ID, ProfileID: pr.ID, Name: pr.Name, CreatedAt: t.now}
		setString(&cr.Name, in.Name)
		setString(&cr.Description, in.Description)
		setRunSettings(cr, in.Image, in.Env, in.Mounts)
		next.ComputeResources = append(next.ComputeResources, cr)
		return cr.ID, nil
	})
}

// UpdateComputeResource renames or describes a compute resource, or changes
// how its tasks run.
func (s *Service) UpdateComputeResource(ctx context.Context, id string, in ComputeResourceInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "change compute resources", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		cr, err := findComputeResource(next, id)
		if err != nil {
			return "", err
		}
		setString(&cr.Name, in.Name)
		setString(&cr.Description, in.Description)
		setRunSettings(cr, in.Image, in.Env, in.Mounts)
		return cr.ID, nil
	})
}

// setRunSettings changes how a compute resource's tasks run: nil leaves a
// setting as it is, an empty value clears it.
func setRunSettings(cr *model.ComputeResource, image *string, env map[string]string, mounts []string) {
	setString(&cr.Image, image)
	if env != nil {
		cr.Env = maps.Clone(env)
	}
	if mounts != nil {
		cr.Mounts = slices.Clone(mounts)
	}
}

// DisconnectProfile deletes a compute resource that has no work queued or
// running.
func (s *Service) DisconnectProfile(ctx context.Context, id string) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "disconnect profiles from policies", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		cr, err := findComputeResource(next, id)
		if err != nil {
			return "", err
		}
		next.ComputeResources = remove(next.ComputeResources, cr)
		return cr.ID, nil
	})
}

// CreateProject adds a project.
func (s *Service) CreateProject(ctx context.Context, in ProjectInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "create projects", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		if err := requireName("project", in.Name); err != nil {
			return "", err
		}
		if next.ProjectByName(strings.TrimSpace(*in.Name)) != nil {
			return "", conflict("a project named %s already exists", quote(*in.Name))
		}
		pr := &model.Project{ID: model.NewID(), TenantID: p.TenantID, CreatedAt: t.now}
		next.Projects = append(next.Projects, pr)
		return pr.ID, applyProject(next, pr, in)
	})
}

// UpdateProject changes a project.
func (s *Service) UpdateProject(ctx context.Context, ref string, in ProjectInput) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "change projects", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pr, err := findProject(next, ref)
		if err != nil {
			return "", err
		}
		return pr.ID, applyProject(next, pr, in)
	})
}

func applyProject(e *estate.Estate, pr *model.Project, in ProjectInput) error {
	setString(&pr.Name, in.Name)
	setString(&pr.Description, in.Description)
	setString(&pr.OutputDestination, in.OutputDestination)
	if in.Group != nil {
		pr.GroupID = ""
		if *in.Group != "" {
			g, err := findGroup(e, *in.Group)
			if err != nil {
				return invalid("project %s: %v", quote(pr.Name), err)
			}
			pr.GroupID = g.ID
		}
	}
	return nil
}

// DeleteProject removes a project that has no tasks.
func (s *Service) DeleteProject(ctx context.Context, ref string) (*EstateResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.changeEstate(ctx, p, "delete projects", false, func(t *txn, cur, next *estate.Estate) (string, error) {
		pr, err := findProject(next, ref)
		if err != nil {
			return "", err
		}
		if refs := next.GatewayReferences(estate.KindProject, pr.Name); len(refs) > 0 {
			return "", conflict("project %s is named by the gateway's %s; change them first", quote(pr.Name), strings.Join(refs, ", "))
		}
		next.Projects = remove(next.Projects, pr)
		return pr.ID, nil
	})
}

func remove[T comparable](list []T, v T) []T {
	out := list[:0:0]
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func names[T any](list []T, name func(T) string) string {
	var out []string
	for _, v := range list {
		out = append(out, name(v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
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
