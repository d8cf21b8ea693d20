package fleet

import (
	"context"
	"strings"

	"github.com/klique-ai/klique/internal/platform/kernel"
)

// TunnelBinding is what a tunnel connection may carry: the app instances
// of one worker, or (for a task credential, the task's own process inside
// an HPC job) the one attempt of one task that worker holds.
type TunnelBinding struct {
	TenantID string
	WorkerID string
	// TaskID and Attempt are set when the tunnel is limited to one task.
	TaskID  string
	Attempt int
}

// BindTunnel checks that the caller may hold the tunnel of the worker it
// names and says what the tunnel may carry. A worker credential holds the
// tunnel of a worker it registered; a task credential holds one for its
// own running attempt only, under the worker that holds the task, and
// names no worker. The check is the same as every other worker call's: a
// worker or task of another credential is not found.
func (s *Fleet) BindTunnel(ctx context.Context, workerID string) (*TunnelBinding, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if scope := taskScopeFrom(ctx); scope != nil {
		t, err := s.myTask(ctx, s.k.Store, w, scope.TaskID, scope.Attempt, true)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		if workerID != "" && workerID != t.Run.WorkerID {
			return nil, kernel.Forbidden("a task credential opens a tunnel for task %s only: leave out workerId", scope.TaskID)
		}
		return &TunnelBinding{TenantID: w.TenantID, WorkerID: t.Run.WorkerID, TaskID: scope.TaskID, Attempt: scope.Attempt}, nil
	}
	workerID = strings.TrimSpace(workerID)
	if workerID == "" {
		return nil, kernel.Invalid("name the worker the tunnel is for: ?workerId= with the id registration returned")
	}
	worker, err := s.myWorker(ctx, w, workerID)
	if err != nil {
		return nil, err
	}
	return &TunnelBinding{TenantID: w.TenantID, WorkerID: worker.ID}, nil
}
