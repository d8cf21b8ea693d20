package allocation

import (
	"context"
	"fmt"

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
	// The document is read once the right is checked: a caller who may
	// not apply one is refused before being told what is wrong with it.
	return s.k.ChangeEstate(ctx, p, "apply an estate file", dryRun, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		doc, err := estate.ParseDocument(document)
		if err != nil {
			return "", kernel.Invalid("%v", err)
		}
		applied, err := doc.Apply(cur, t.P.TenantID, model.NewID, t.Now)
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
