package tasks

import (
	"context"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// What the control plane's controllers (studies, pipelines, schedules)
// need of the tasks domain beyond enqueue and clone: to check up front
// where their work would go, and to stop work on their own authority.

// Target resolves where work of the caller would go, by the rules of an
// enqueue: the project (a project id or name, the caller's default when
// empty) and the compute resource open to the caller (an id or name,
// group naming which when several have it). A controller checks it when
// its study or pipeline is created, so a refusal comes before anything is
// enqueued.
func (s *Tasks) Target(ctx context.Context, project, computeResource, group string) (*model.Project, *model.ComputeResource, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	pr, err := resolveProject(p, e, project)
	if err != nil {
		return nil, nil, err
	}
	cr, err := resolveComputeResource(p, e, computeResource, group, false)
	if err != nil {
		return nil, nil, err
	}
	return pr, cr, nil
}

// StopAs ends a task that has not ended on a controller's authority, by
// the abort path (the capacity and the ledger interval are released in
// the same transaction), with reason on its record as it is written.
// actor is the controller, as the audit trail shows it. A task that has
// already ended is a conflict.
func (s *Tasks) StopAs(ctx context.Context, tenantID, id, actor, reason string) (*model.Task, error) {
	return s.abortAs(ctx, kernel.System(tenantID, actor), id, func(*model.Task) error { return nil },
		func(*identity.Principal) string { return reason })
}
