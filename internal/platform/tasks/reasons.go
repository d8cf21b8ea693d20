package tasks

import (
	"context"
	"errors"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// TaskReason says, in words a developer can act on, why a task is where it
// is: for a waiting task, its place in line and what holds the head of its
// queue; after a preemption, why it was preempted too.
func (s *Tasks) TaskReason(ctx context.Context, t *model.Task) (string, error) {
	if t.Status != model.TaskQueued {
		return t.Reason, nil
	}
	pos, err := s.TaskPosition(ctx, t)
	if err != nil {
		return "", err
	}
	qs, err := s.k.Store.GetQueueState(ctx, t.TenantID, t.ComputeResourceID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		qs = nil
	case err != nil:
		return "", s.k.Internal(ctx, err)
	}
	return engine.WaitingReason(t, pos, qs), nil
}
