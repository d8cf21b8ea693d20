package tasks

import (
	"context"
	"strings"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// CheckEnqueue runs an enqueue's checks as the caller (the project and
// compute resource open to them, the spec, the size against the group's
// limit and the pools, the secrets) and returns the task it would write,
// writing nothing. Work that enqueues later on someone's behalf (a
// pipeline's steps) is refused up front by the same rules EnqueueTask
// applies.
func (s *Tasks) CheckEnqueue(ctx context.Context, in EnqueueInput) (*model.Task, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireWrite(p, "enqueue tasks"); err != nil {
		return nil, err
	}
	in.Spec = normalizeSpec(in.Spec)
	if ps := ValidateTaskSpec(in.Name, &in.Spec); len(ps) > 0 {
		return nil, &kernel.Error{Code: kernel.CodeInvalid, Message: "task " + kernel.Quote(in.Name) + ": " + strings.Join(ps, "; "), Problems: ps}
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, err
	}
	task, err := s.newTask(&kernel.Txn{Ctx: ctx, Q: s.k.Store, P: p, Now: s.k.Now()}, e, in)
	if err != nil {
		return nil, err
	}
	if err := checkTaskSecrets(ctx, s.k.Store, e, task); err != nil {
		return nil, err
	}
	return task, nil
}

// AbortAsSystem aborts a task on the control plane's own authority (actor
// names it in the audit trail), by the same path as AbortTask: a pipeline
// whose owner lost access stops the work it started for them.
func (s *Tasks) AbortAsSystem(ctx context.Context, tenantID, id, actor, reason string) (*model.Task, error) {
	return s.abortAs(ctx, kernel.System(tenantID, actor), id, func(*model.Task) error { return nil },
		func(*identity.Principal) string { return reason })
}
