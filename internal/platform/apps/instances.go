package apps

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// InstanceFilter narrows AppInstances. Empty fields do not filter.
type InstanceFilter struct {
	App string
	// Active keeps instances that have not ended.
	Active bool
}

// SeesInstance reports whether p may see (and, with a later slice, open)
// an instance: its owner, whom the launch shared it with (the members of
// its group, or named users), and admins. A credential scoped to a project
// sees only that project's instances.
func SeesInstance(p *identity.Principal, t *model.Task) bool {
	if t.TenantID != p.TenantID || t.Spec.Kind != model.TaskKindApplication || t.Spec.App == nil {
		return false
	}
	if p.ProjectID != "" && t.ProjectID != p.ProjectID {
		return false
	}
	return p.IsAdmin() || t.OwnerID == p.UserID ||
		(t.Spec.App.ShareGroup && p.InGroup(t.GroupID)) || slices.Contains(t.Spec.App.ShareUsers, p.UserID)
}

// mayStop: the owner, a lead of its group, or an admin.
func mayStop(p *identity.Principal, t *model.Task) bool {
	return p.CanWrite() && (p.IsAdmin() || t.OwnerID == p.UserID || p.LeadOf(t.GroupID))
}

// AppInstances lists the instances the caller may see, newest first.
func (s *Apps) AppInstances(ctx context.Context, f InstanceFilter) ([]*model.AppInstance, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	tf := store.TaskFilter{}
	if f.Active {
		tf.Statuses = []model.TaskStatus{model.TaskQueued, model.TaskPlaced, model.TaskRunning}
	}
	if !p.IsAdmin() {
		// Shared instances are in the caller's groups; their own anywhere.
		tf.GroupIDs, tf.VisibleToUserID, tf.RestrictToGroups = p.GroupIDs(), p.UserID, true
	}
	tasks, err := s.k.Store.ListTasks(ctx, p.TenantID, tf, store.Page{Limit: 1000}, true)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	var out []*model.AppInstance
	for _, t := range tasks {
		if SeesInstance(p, t) && (f.App == "" || t.Spec.App.App == f.App) {
			in, err := s.decorate(ctx, s.instance(t))
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}

// AppInstance returns an instance the caller may see.
func (s *Apps) AppInstance(ctx context.Context, id string) (*model.AppInstance, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.k.Store.GetTask(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !SeesInstance(p, t)) {
		return nil, kernel.NotFound("no app instance %s; list yours with 'klique app ls --instances'", kernel.Quote(id))
	}
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return s.decorate(ctx, s.instance(t))
}

// TenantAppInstance reads an instance on the platform's own behalf, for
// the live domain's feed (which checks each subscriber with
// SeesAppInstance): nil, nil for a task that is not an app instance.
func (s *Apps) TenantAppInstance(ctx context.Context, tenantID, id string) (*model.AppInstance, error) {
	t, err := s.k.Store.GetTask(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read app instance %s: %w", id, err)
	}
	if t.Spec.Kind != model.TaskKindApplication || t.Spec.App == nil {
		return nil, nil
	}
	return s.decorate(ctx, s.instance(t))
}

// SeesAppInstance is SeesInstance, for the live domain.
func (s *Apps) SeesAppInstance(p *identity.Principal, t *model.Task) bool { return SeesInstance(p, t) }

// StopApp stops an instance through the tasks domain's abort path: its
// GPUs are released and its ledger interval closes, with the reason
// "stopped by <user>".
func (s *Apps) StopApp(ctx context.Context, id string) (*model.AppInstance, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.enqueueReady(); err != nil {
		return nil, err
	}
	in, err := s.AppInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	if !mayStop(p, in.Task) {
		return nil, kernel.Forbidden("only the instance's owner, a lead of its group or an admin can stop app instance %s", kernel.Quote(in.Task.Name))
	}
	if in.Task.Status.Final() {
		return nil, kernel.Conflict("app instance %s has already stopped (%s)", kernel.Quote(in.Task.Name), in.Task.Status)
	}
	t, err := s.abort(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.decorate(ctx, s.instance(t))
}
