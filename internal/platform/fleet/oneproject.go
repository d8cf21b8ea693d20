package fleet

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// A bare-metal worker whose tasks share one user on its host (it is not
// root, or runs every task --run-as one user) cannot keep them from
// reading each other's environment and files, so it runs tasks of one
// project at a time: while it runs some, its claims name their project
// (agentapi.ClaimRequest.Project) and take only tasks of it. An admin who
// states in the estate that the pool is single-tenant lifts the rule
// (docs/worker.md, "What is isolated on a host").

// claimProject is the project a claim is kept to: the one the worker
// names, unless its pool is single-tenant.
func (s *Fleet) claimProject(ctx context.Context, w *identity.Worker, project string) (string, error) {
	if project == "" {
		return "", nil
	}
	if len(project) > 64 {
		return "", kernel.Invalid("project %q is not a project id: a claim names the id of the project its worker runs", project)
	}
	pool, err := s.k.Store.GetPool(ctx, w.TenantID, w.PoolID)
	if err != nil {
		return "", s.k.Internal(ctx, fmt.Errorf("read pool %s: %w", w.PoolName, err))
	}
	if pool.SingleTenant {
		return "", nil
	}
	return project, nil
}

// maxNoted bounds the waiting tasks one claim gives the reason to.
const maxNoted = 200

// noteOneProject gives the tasks of other projects placed on the worker's
// pool, still waiting, the reason this worker does not take them: the
// why-waiting sentence.
func (s *Fleet) noteOneProject(ctx context.Context, w *identity.Worker, worker *model.Worker, projectID string) {
	if ok, err := s.k.Store.Claimable(ctx, w.TenantID, w.PoolID, anyFit); err != nil || !ok {
		return
	}
	tasks, err := s.k.Store.ListTasks(ctx, w.TenantID, store.TaskFilter{PoolID: w.PoolID,
		Statuses: []model.TaskStatus{model.TaskPlaced}}, model.Page{Limit: maxNoted}, false)
	if err != nil {
		s.k.Log.WarnContext(ctx, "list the tasks waiting on a pool", "pool", w.PoolName, "error", err)
		return
	}
	var ids []string
	for _, t := range tasks {
		if t.ProjectID != projectID {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	name := projectID
	if p, err := s.k.Store.GetProject(ctx, w.TenantID, projectID); err == nil {
		name = p.Name
	}
	reason := fmt.Sprintf("placed on pool %s; waiting: worker %s runs tasks of project %s, and the tasks on its host share one user, "+
		"so it runs one project at a time (run the worker as root to give each task a uid of its own, or mark the pool singleTenant in the estate)",
		w.PoolName, worker.Hostname, name)
	if _, err := s.k.Store.SetPlacedReason(ctx, w.TenantID, w.PoolID, ids, reason); err != nil {
		s.k.Log.WarnContext(ctx, "record why placed tasks wait", "pool", w.PoolName, "error", err)
	}
}
