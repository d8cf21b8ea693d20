package allocation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// EstateWarnings returns what an admin should know about the allocation
// model, such as reservations beyond the capacity behind them.
func (s *Allocation) EstateWarnings(ctx context.Context) ([]estate.Warning, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "read estate warnings"); err != nil {
		return nil, err
	}
	e, err := kernel.LoadEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return e.Warnings(), nil
}

// ExportEstate writes the tenant's allocation model as an estate file.
func (s *Allocation) ExportEstate(ctx context.Context) ([]byte, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "export the estate"); err != nil {
		return nil, err
	}
	e, err := kernel.LoadEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	out, err := e.Export().Marshal()
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("export estate: %w", err))
	}
	return out, nil
}

// ApplyEstate creates and updates every object an estate file describes, in
// one transaction: all of it or, on any problem, nothing. Applying the same
// file twice changes nothing the second time. With dryRun it reports what it
// would do and writes nothing.
func (s *Allocation) ApplyEstate(ctx context.Context, document []byte, dryRun bool) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "apply an estate file"); err != nil {
		return nil, err
	}
	doc, err := estate.ParseDocument(document)
	if err != nil {
		return nil, kernel.Invalid("%v", err)
	}
	return s.k.ChangeEstate(ctx, p, "apply an estate file", dryRun, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		applied, err := doc.Apply(cur, p.TenantID, model.NewID, t.Now)
		if err != nil {
			return "", kernel.InvalidEstate(err)
		}
		*next = *applied
		return "", nil
	})
}

// Reads of single objects and lists, as the caller may see them.

// GPUClass returns a GPU class by id or name.
func (s *Allocation) GPUClass(ctx context.Context, ref string) (*model.GPUClass, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return kernel.FindGPUClass(e, ref)
}

// Pool returns a pool by id or name.
func (s *Allocation) Pool(ctx context.Context, ref string) (*model.Pool, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return kernel.FindPool(e, ref)
}

// Profile returns a profile by id or name.
func (s *Allocation) Profile(ctx context.Context, ref string) (*model.Profile, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return kernel.FindProfile(e, ref)
}

// Policy returns a resource policy by id or by its group's name, if the
// caller may see it.
func (s *Allocation) Policy(ctx context.Context, ref string) (*model.ResourcePolicy, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return kernel.FindPolicy(e, ref)
}

// Group returns a group by id or name, if the caller may see it.
func (s *Allocation) Group(ctx context.Context, ref string) (*model.Group, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return kernel.FindGroup(e, ref)
}

// Project returns a project by id or name, if the caller may use it.
func (s *Allocation) Project(ctx context.Context, ref string) (*model.Project, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return kernel.FindProject(e, ref)
}

// ComputeResource returns a compute resource by id, if the caller may see
// it.
func (s *Allocation) ComputeResource(ctx context.Context, id string) (*model.ComputeResource, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return kernel.FindComputeResource(e, id)
}

// CreateGPUClass adds a GPU class.
func (s *Allocation) CreateGPUClass(ctx context.Context, in GPUClassInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "create GPU classes", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("GPU class", in.Name); err != nil {
			return "", err
		}
		if next.GPUClassByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a GPU class named %s already exists", kernel.Quote(*in.Name))
		}
		c := &model.GPUClass{ID: model.NewID(), TenantID: p.TenantID, Currency: estate.DefaultCurrency, CreatedAt: t.Now}
		if err := applyGPUClass(c, in); err != nil {
			return "", err
		}
		next.GPUClasses = append(next.GPUClasses, c)
		return c.ID, nil
	})
}

// UpdateGPUClass changes a GPU class.
func (s *Allocation) UpdateGPUClass(ctx context.Context, ref string, in GPUClassInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "change GPU classes", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		c, err := kernel.FindGPUClass(next, ref)
		if err != nil {
			return "", err
		}
		return c.ID, applyGPUClass(c, in)
	})
}

func applyGPUClass(c *model.GPUClass, in GPUClassInput) error {
	kernel.SetString(&c.Name, in.Name)
	kernel.SetString(&c.Description, in.Description)
	kernel.SetInt(&c.MemoryGB, in.MemoryGB)
	kernel.SetString(&c.Currency, in.Currency)
	c.Currency = strings.ToUpper(c.Currency)
	if in.PricePerGPUHour != nil {
		v, err := estate.ScaleDecimal("price per GPU-hour", *in.PricePerGPUHour, 6)
		if err != nil {
			return kernel.Invalid("GPU class %s: %v", kernel.Quote(c.Name), err)
		}
		c.PriceMicros = v
	}
	return nil
}

// DeleteGPUClass removes a GPU class no pool or profile uses.
func (s *Allocation) DeleteGPUClass(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "delete GPU classes", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		c, err := kernel.FindGPUClass(next, ref)
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
			return "", kernel.Conflict("GPU class %s is used by %s; change them first", kernel.Quote(c.Name), strings.Join(users, ", "))
		}
		next.GPUClasses = kernel.Remove(next.GPUClasses, c)
		return c.ID, nil
	})
}

// CreatePool adds a pool.
func (s *Allocation) CreatePool(ctx context.Context, in PoolInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "create pools", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("pool", in.Name); err != nil {
			return "", err
		}
		if next.PoolByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a pool named %s already exists", kernel.Quote(*in.Name))
		}
		if in.Kind == nil || in.CapacityGPUs == nil || in.GPUClass == nil {
			return "", kernel.Invalid("a pool needs a kind, a capacity in whole GPUs and a GPU class")
		}
		pool := &model.Pool{ID: model.NewID(), TenantID: p.TenantID, CreatedAt: t.Now}
		next.Pools = append(next.Pools, pool)
		return pool.ID, applyPool(next, pool, in)
	})
}

// UpdatePool changes a pool.
func (s *Allocation) UpdatePool(ctx context.Context, ref string, in PoolInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "change pools", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pool, err := kernel.FindPool(next, ref)
		if err != nil {
			return "", err
		}
		return pool.ID, applyPool(next, pool, in)
	})
}

func applyPool(e *estate.Estate, pool *model.Pool, in PoolInput) error {
	kernel.SetString(&pool.Name, in.Name)
	kernel.SetString(&pool.Description, in.Description)
	if in.Kind != nil {
		pool.Kind = *in.Kind
	}
	kernel.SetInt(&pool.CapacityGPUs, in.CapacityGPUs)
	if in.GPUClass != nil {
		c, err := kernel.FindGPUClass(e, *in.GPUClass)
		if err != nil {
			return kernel.Invalid("pool %s: %v", kernel.Quote(pool.Name), err)
		}
		// A pool's GPU memory comes from its class unless given, as in an
		// estate file: a pool moved to another class takes that class's.
		if in.GPUMemoryGB == nil && (pool.GPUMemoryGB == 0 || pool.GPUClassID != c.ID) {
			pool.GPUMemoryGB = c.MemoryGB
		}
		pool.GPUClassID = c.ID
	}
	kernel.SetInt(&pool.GPUMemoryGB, in.GPUMemoryGB)
	kernel.SetString(&pool.Region, in.Region)
	if in.Labels != nil {
		pool.Labels = in.Labels
	}
	if in.ExecutionPriority != nil {
		order, problems := estate.ResolveExecutionPriority(e, pool, in.ExecutionPriority)
		if len(problems) > 0 {
			return kernel.Invalid("pool %s execution priority: %s", kernel.Quote(pool.Name), strings.Join(problems, "; "))
		}
		pool.ProfileOrder = order
	}
	return nil
}

// DeletePool removes a pool no profile links.
func (s *Allocation) DeletePool(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "delete pools", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pool, err := kernel.FindPool(next, ref)
		if err != nil {
			return "", err
		}
		if profiles := next.ProfilesOnPool(pool.ID); len(profiles) > 0 {
			return "", kernel.Conflict("pool %s is linked from profiles %s; remove it from their pools first", kernel.Quote(pool.Name), kernel.Names(profiles, func(p *model.Profile) string { return p.Name }))
		}
		next.Pools = kernel.Remove(next.Pools, pool)
		return pool.ID, nil
	})
}

// CreateProfile adds a profile.
func (s *Allocation) CreateProfile(ctx context.Context, in ProfileInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "create profiles", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("profile", in.Name); err != nil {
			return "", err
		}
		if next.ProfileByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a profile named %s already exists", kernel.Quote(*in.Name))
		}
		if in.Size == nil {
			return "", kernel.Invalid("a profile needs a size: a fraction (0.125, 0.25, 0.5), whole GPUs (1, 8) or nodes x GPUs per node (2x8)")
		}
		pr := &model.Profile{ID: model.NewID(), TenantID: p.TenantID, TimeWeightMilli: estate.DefaultTimeWeightMilli, CreatedAt: t.Now}
		next.Profiles = append(next.Profiles, pr)
		return pr.ID, applyProfile(next, pr, in)
	})
}

// UpdateProfile changes a profile.
func (s *Allocation) UpdateProfile(ctx context.Context, ref string, in ProfileInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "change profiles", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pr, err := kernel.FindProfile(next, ref)
		if err != nil {
			return "", err
		}
		return pr.ID, applyProfile(next, pr, in)
	})
}

func applyProfile(e *estate.Estate, pr *model.Profile, in ProfileInput) error {
	kernel.SetString(&pr.Name, in.Name)
	kernel.SetString(&pr.Description, in.Description)
	if in.Size != nil {
		size, err := model.ParseSize(*in.Size)
		if err != nil {
			return kernel.Invalid("profile %s: %v", kernel.Quote(pr.Name), err)
		}
		pr.Size = size
	}
	kernel.SetString(&pr.SizeParameter, in.SizeParameter)
	if in.GPUClass != nil {
		pr.GPUClassID = ""
		if *in.GPUClass != "" {
			c, err := kernel.FindGPUClass(e, *in.GPUClass)
			if err != nil {
				return kernel.Invalid("profile %s: %v", kernel.Quote(pr.Name), err)
			}
			pr.GPUClassID = c.ID
		}
	}
	kernel.SetInt(&pr.MinGPUMemoryGB, in.MinGPUMemoryGB)
	if in.TimeWeight != nil {
		w, err := estate.ScaleDecimal("time weight", *in.TimeWeight, 3)
		if err != nil {
			return kernel.Invalid("profile %s: %v", kernel.Quote(pr.Name), err)
		}
		pr.TimeWeightMilli = w
	}
	if in.Pools != nil {
		pr.Pools = nil
		for _, ref := range in.Pools {
			pool, err := kernel.FindPool(e, ref)
			if err != nil {
				return kernel.Invalid("profile %s: %v", kernel.Quote(pr.Name), err)
			}
			pr.Pools = append(pr.Pools, pool.ID)
		}
	}
	if in.QueuingPriority != nil {
		order, problems := estate.ResolveQueuingPriority(e, pr, in.QueuingPriority)
		if len(problems) > 0 {
			return kernel.Invalid("profile %s queuing priority: %s", kernel.Quote(pr.Name), strings.Join(problems, "; "))
		}
		pr.QueuingOrder = order
	}
	return nil
}

// DeleteProfile removes a profile no policy is connected to.
func (s *Allocation) DeleteProfile(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "delete profiles", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pr, err := kernel.FindProfile(next, ref)
		if err != nil {
			return "", err
		}
		if crs := next.ComputeResourcesOfProfile(pr.ID); len(crs) > 0 {
			return "", kernel.Conflict("profile %s is connected to the policies of groups %s; disconnect it first",
				kernel.Quote(pr.Name), kernel.Names(crs, func(c *model.ComputeResource) string { return next.PolicyGroupName(c.PolicyID) }))
		}
		next.Profiles = kernel.Remove(next.Profiles, pr)
		return pr.ID, nil
	})
}

// CreateGroup adds a group.
func (s *Allocation) CreateGroup(ctx context.Context, in GroupInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "create groups", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("group", in.Name); err != nil {
			return "", err
		}
		if next.GroupByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a group named %s already exists", kernel.Quote(*in.Name))
		}
		g := &model.Group{ID: model.NewID(), TenantID: p.TenantID, CreatedAt: t.Now}
		kernel.SetString(&g.Name, in.Name)
		kernel.SetString(&g.Description, in.Description)
		next.Groups = append(next.Groups, g)
		return g.ID, nil
	})
}

// UpdateGroup renames or describes a group.
func (s *Allocation) UpdateGroup(ctx context.Context, ref string, in GroupInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "change groups", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		g, err := kernel.FindGroup(next, ref)
		if err != nil {
			return "", err
		}
		kernel.SetString(&g.Name, in.Name)
		kernel.SetString(&g.Description, in.Description)
		return g.ID, nil
	})
}

// DeleteGroup removes a group without a policy or projects. Its memberships
// go with it.
func (s *Allocation) DeleteGroup(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "delete groups", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		g, err := kernel.FindGroup(next, ref)
		if err != nil {
			return "", err
		}
		if next.PolicyOfGroup(g.ID) != nil {
			return "", kernel.Conflict("group %s has a resource policy; delete the policy first", g.Name)
		}
		var projects []string
		for _, pr := range next.Projects {
			if pr.GroupID == g.ID {
				projects = append(projects, pr.Name)
			}
		}
		if len(projects) > 0 {
			return "", kernel.Conflict("group %s owns projects %s; move or delete them first", g.Name, strings.Join(projects, ", "))
		}
		if refs := next.GatewayReferences(estate.KindGroup, g.Name); len(refs) > 0 {
			return "", kernel.Conflict("group %s is named by the gateway's %s; change them first", g.Name, strings.Join(refs, ", "))
		}
		next.Groups = kernel.Remove(next.Groups, g)
		return g.ID, nil
	})
}

// CreatePolicy gives a group its resource policy.
func (s *Allocation) CreatePolicy(ctx context.Context, in PolicyInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "create resource policies", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if in.Group == nil {
			return "", kernel.Invalid("a resource policy needs the group it belongs to")
		}
		g, err := kernel.FindGroup(next, *in.Group)
		if err != nil {
			return "", kernel.Invalid("%v", err)
		}
		if next.PolicyOfGroup(g.ID) != nil {
			return "", kernel.Conflict("group %s already has a resource policy; change that one", g.Name)
		}
		if in.LimitGPUs == nil {
			return "", kernel.Invalid("a resource policy needs a limit: the most GPUs the group may hold at once")
		}
		pol := &model.ResourcePolicy{ID: model.NewID(), TenantID: p.TenantID, GroupID: g.ID, CreatedAt: t.Now,
			LowWatermark: model.DefaultLowWatermark, AlertThresholdPercent: model.DefaultAlertThresholdPercent}
		next.Policies = append(next.Policies, pol)
		return pol.ID, applyPolicy(next, pol, in)
	})
}

// UpdatePolicy changes a group's resource policy.
func (s *Allocation) UpdatePolicy(ctx context.Context, ref string, in PolicyInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "change resource policies", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pol, err := kernel.FindPolicy(next, ref)
		if err != nil {
			return "", err
		}
		if in.Group != nil {
			if g, err := kernel.FindGroup(next, *in.Group); err != nil || g.ID != pol.GroupID {
				return "", kernel.Invalid("a resource policy cannot move to another group; delete it and create one for the other group")
			}
		}
		return pol.ID, applyPolicy(next, pol, in)
	})
}

func applyPolicy(e *estate.Estate, pol *model.ResourcePolicy, in PolicyInput) error {
	kernel.SetInt(&pol.ReservationGPUs, in.ReservationGPUs)
	kernel.SetInt(&pol.LimitGPUs, in.LimitGPUs)
	if in.ClearTimeBudget && in.TimeBudget != nil {
		return kernel.Invalid("give a time budget or clear it, not both")
	}
	if in.ClearTimeBudget {
		pol.Budget = nil
	}
	if b := in.TimeBudget; b != nil {
		h, err := estate.ScaleDecimal("time budget hours", b.Hours, 3)
		if err != nil {
			return kernel.Invalid("resource policy of group %s: %v", e.GroupName(pol.GroupID), err)
		}
		pol.Budget = &model.TimeBudget{MilliHours: h, Period: b.Period}
	}
	if in.LowWatermarkMinutes != nil {
		pol.LowWatermark = time.Duration(*in.LowWatermarkMinutes) * time.Minute
	}
	kernel.SetInt(&pol.AlertThresholdPercent, in.AlertThresholdPercent)
	return nil
}

// DeletePolicy removes a group's policy and disconnects its compute
// resources, which must have no work queued or running.
func (s *Allocation) DeletePolicy(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "delete resource policies", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pol, err := kernel.FindPolicy(next, ref)
		if err != nil {
			return "", err
		}
		for _, cr := range next.ComputeResourcesOfPolicy(pol.ID) {
			next.ComputeResources = kernel.Remove(next.ComputeResources, cr)
		}
		next.Policies = kernel.Remove(next.Policies, pol)
		return pol.ID, nil
	})
}

// ConnectProfile connects a profile to a group's policy, creating the
// compute resource the group submits to. A profile larger than the group's
// limit is refused.
func (s *Allocation) ConnectProfile(ctx context.Context, in ConnectInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "connect profiles to policies", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pol, err := kernel.FindPolicy(next, in.Policy)
		if err != nil {
			return "", kernel.Invalid("%v", err)
		}
		pr, err := kernel.FindProfile(next, in.Profile)
		if err != nil {
			return "", kernel.Invalid("%v", err)
		}
		if existing := next.ComputeResourceOf(pol.ID, pr.ID); existing != nil {
			return "", kernel.Conflict("profile %s is already connected to group %s's policy as compute resource %s", kernel.Quote(pr.Name), next.GroupName(pol.GroupID), kernel.Quote(existing.Name))
		}
		cr := &model.ComputeResource{ID: model.NewID(), TenantID: p.TenantID, PolicyID: pol.ID, ProfileID: pr.ID, Name: pr.Name, CreatedAt: t.Now}
		kernel.SetString(&cr.Name, in.Name)
		kernel.SetString(&cr.Description, in.Description)
		setRunSettings(cr, in.Image, in.Env, in.Mounts)
		next.ComputeResources = append(next.ComputeResources, cr)
		return cr.ID, nil
	})
}

// UpdateComputeResource renames or describes a compute resource, or changes
// how its tasks run.
func (s *Allocation) UpdateComputeResource(ctx context.Context, id string, in ComputeResourceInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "change compute resources", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		cr, err := kernel.FindComputeResource(next, id)
		if err != nil {
			return "", err
		}
		kernel.SetString(&cr.Name, in.Name)
		kernel.SetString(&cr.Description, in.Description)
		setRunSettings(cr, in.Image, in.Env, in.Mounts)
		return cr.ID, nil
	})
}

// setRunSettings changes how a compute resource's tasks run: nil leaves a
// setting as it is, an empty value clears it.
func setRunSettings(cr *model.ComputeResource, image *string, env map[string]string, mounts []string) {
	kernel.SetString(&cr.Image, image)
	if env != nil {
		cr.Env = maps.Clone(env)
	}
	if mounts != nil {
		cr.Mounts = slices.Clone(mounts)
	}
}

// DisconnectProfile deletes a compute resource that has no work queued or
// running.
func (s *Allocation) DisconnectProfile(ctx context.Context, id string) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "disconnect profiles from policies", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		cr, err := kernel.FindComputeResource(next, id)
		if err != nil {
			return "", err
		}
		next.ComputeResources = kernel.Remove(next.ComputeResources, cr)
		return cr.ID, nil
	})
}

// CreateProject adds a project.
func (s *Allocation) CreateProject(ctx context.Context, in ProjectInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "create projects", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("project", in.Name); err != nil {
			return "", err
		}
		if next.ProjectByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a project named %s already exists", kernel.Quote(*in.Name))
		}
		pr := &model.Project{ID: model.NewID(), TenantID: p.TenantID, CreatedAt: t.Now}
		next.Projects = append(next.Projects, pr)
		return pr.ID, applyProject(next, pr, in)
	})
}

// UpdateProject changes a project.
func (s *Allocation) UpdateProject(ctx context.Context, ref string, in ProjectInput) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "change projects", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pr, err := kernel.FindProject(next, ref)
		if err != nil {
			return "", err
		}
		return pr.ID, applyProject(next, pr, in)
	})
}

func applyProject(e *estate.Estate, pr *model.Project, in ProjectInput) error {
	kernel.SetString(&pr.Name, in.Name)
	kernel.SetString(&pr.Description, in.Description)
	kernel.SetString(&pr.OutputDestination, in.OutputDestination)
	if in.Group != nil {
		pr.GroupID = ""
		if *in.Group != "" {
			g, err := kernel.FindGroup(e, *in.Group)
			if err != nil {
				return kernel.Invalid("project %s: %v", kernel.Quote(pr.Name), err)
			}
			pr.GroupID = g.ID
		}
	}
	return nil
}

// DeleteProject removes a project that has no tasks.
func (s *Allocation) DeleteProject(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.k.ChangeEstate(ctx, p, "delete projects", false, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pr, err := kernel.FindProject(next, ref)
		if err != nil {
			return "", err
		}
		if refs := next.GatewayReferences(estate.KindProject, pr.Name); len(refs) > 0 {
			return "", kernel.Conflict("project %s is named by the gateway's %s; change them first", kernel.Quote(pr.Name), strings.Join(refs, ", "))
		}
		next.Projects = kernel.Remove(next.Projects, pr)
		return pr.ID, nil
	})
}
