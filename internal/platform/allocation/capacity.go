package allocation

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// GPU classes, pools and profiles: the capacity side of the allocation
// model, each change described on a copy of the estate; kernel.ChangeEstate
// does the rest.

// CreateGPUClass adds a GPU class.
func (s *Allocation) CreateGPUClass(ctx context.Context, in GPUClassInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "create GPU classes", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("GPU class", in.Name); err != nil {
			return "", err
		}
		if next.GPUClassByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a GPU class named %s already exists", kernel.Quote(*in.Name))
		}
		c := &model.GPUClass{ID: model.NewID(), TenantID: t.P.TenantID, Currency: basis.DefaultCurrency, CreatedAt: t.Now}
		if err := applyGPUClass(c, in); err != nil {
			return "", err
		}
		next.GPUClasses = append(next.GPUClasses, c)
		return c.ID, nil
	})
}

// UpdateGPUClass changes a GPU class.
func (s *Allocation) UpdateGPUClass(ctx context.Context, ref string, in GPUClassInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change GPU classes", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
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
		v, err := basis.ScaleDecimal("price per GPU-hour", *in.PricePerGPUHour, 6)
		if err != nil {
			return kernel.Invalid("GPU class %s: %v", kernel.Quote(c.Name), err)
		}
		c.PriceMicros = v
	}
	return nil
}

// DeleteGPUClass removes a GPU class no pool or profile uses.
func (s *Allocation) DeleteGPUClass(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "delete GPU classes", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
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
	return s.k.ChangeCallerEstate(ctx, "create pools", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("pool", in.Name); err != nil {
			return "", err
		}
		if next.PoolByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a pool named %s already exists", kernel.Quote(*in.Name))
		}
		if in.Kind == nil || in.CapacityGPUs == nil || in.GPUClass == nil {
			return "", kernel.Invalid("a pool needs a kind, a capacity in whole GPUs and a GPU class")
		}
		pool := &model.Pool{ID: model.NewID(), TenantID: t.P.TenantID, CreatedAt: t.Now}
		next.Pools = append(next.Pools, pool)
		return pool.ID, applyPool(next, pool, in)
	})
}

// UpdatePool changes a pool.
func (s *Allocation) UpdatePool(ctx context.Context, ref string, in PoolInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change pools", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
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
	kernel.SetString(&pool.OutputDestination, in.OutputDestination)
	if in.Labels != nil {
		pool.Labels = in.Labels
	}
	if in.ClaimTimeoutSeconds != nil {
		pool.ClaimTimeout = nil
		if n := *in.ClaimTimeoutSeconds; n >= 0 {
			d := time.Duration(n) * time.Second
			pool.ClaimTimeout = &d
		}
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
	return s.k.ChangeCallerEstate(ctx, "delete pools", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
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
	return s.k.ChangeCallerEstate(ctx, "create profiles", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("profile", in.Name); err != nil {
			return "", err
		}
		if next.ProfileByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a profile named %s already exists", kernel.Quote(*in.Name))
		}
		if in.Size == nil {
			return "", kernel.Invalid("a profile needs a size: a fraction (0.125, 0.25, 0.5), whole GPUs (1, 8) or nodes x GPUs per node (2x8)")
		}
		pr := &model.Profile{ID: model.NewID(), TenantID: t.P.TenantID, TimeWeightMilli: estate.DefaultTimeWeightMilli, CreatedAt: t.Now}
		next.Profiles = append(next.Profiles, pr)
		return pr.ID, applyProfile(next, pr, in)
	})
}

// UpdateProfile changes a profile.
func (s *Allocation) UpdateProfile(ctx context.Context, ref string, in ProfileInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change profiles", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
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
		w, err := basis.ScaleDecimal("time weight", *in.TimeWeight, 3)
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
	return s.k.ChangeCallerEstate(ctx, "delete profiles", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
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
