package tasks

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// CheckClone says whether the caller could clone a task now, with the
// original's project and compute resource, without enqueuing anything:
// a schedule checks it when it is saved and resumed, so that an owner
// who lost access is told then rather than at the next firing.
func (s *Tasks) CheckClone(ctx context.Context, id string) (*model.Task, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireWrite(p, "enqueue tasks"); err != nil {
		return nil, err
	}
	orig, err := s.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, err
	}
	if _, err := resolveProject(p, e, orig.ProjectID); err != nil {
		return nil, err
	}
	if _, err := resolveComputeResource(p, e, orig.ComputeResourceID, "", true); err != nil {
		return nil, err
	}
	return orig, nil
}
