package estate

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
)

// Reader is what Load needs of a store.
type Reader interface {
	ListGPUClasses(ctx context.Context, tenantID string) ([]*model.GPUClass, error)
	ListPools(ctx context.Context, tenantID string) ([]*model.Pool, error)
	ListProfiles(ctx context.Context, tenantID string) ([]*model.Profile, error)
	ListGroups(ctx context.Context, tenantID string, page model.Page) ([]*model.Group, error)
	ListPolicies(ctx context.Context, tenantID string) ([]*model.ResourcePolicy, error)
	ListComputeResources(ctx context.Context, tenantID string) ([]*model.ComputeResource, error)
	ListProjects(ctx context.Context, tenantID string, page model.Page) ([]*model.Project, error)
	GetGateway(ctx context.Context, tenantID string) (*model.Gateway, error)
	GetApps(ctx context.Context, tenantID string) (*model.AppCatalogue, error)
}

// Load reads a tenant's whole allocation model.
func Load(ctx context.Context, r Reader, tenantID string) (*Estate, error) {
	var e Estate
	var err error
	if e.GPUClasses, err = r.ListGPUClasses(ctx, tenantID); err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	if e.Pools, err = r.ListPools(ctx, tenantID); err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	if e.Profiles, err = r.ListProfiles(ctx, tenantID); err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	if e.Groups, err = r.ListGroups(ctx, tenantID, model.Page{}); err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	if e.Policies, err = r.ListPolicies(ctx, tenantID); err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	if e.ComputeResources, err = r.ListComputeResources(ctx, tenantID); err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	if e.Projects, err = r.ListProjects(ctx, tenantID, model.Page{}); err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	g, err := r.GetGateway(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	e.Gateway = *g
	apps, err := r.GetApps(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("load estate: %w", err)
	}
	e.Apps = *apps
	return &e, nil
}
