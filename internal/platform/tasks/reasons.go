package tasks

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// TaskReason says, in words a developer can act on, why a task is where it
// is: for a waiting task, its place in line and what holds the head of its
// queue; after a preemption, why it was preempted too.
func (s *Tasks) TaskReason(ctx context.Context, t *model.Task) (string, error) {
	if t.Status == model.TaskPlaced {
		return s.placedReason(ctx, t)
	}
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

// PoolWorkers is what the tasks domain needs to know of a pool's workers to
// say why placed work waits; the fleet knows it (wired by the platform
// facade).
type PoolWorkers struct {
	PoolName string
	Online   int
	// LastSeen is the last heartbeat of any worker of the pool; zero when
	// none has registered.
	LastSeen     time.Time
	Autoscaled   bool
	ClaimTimeout time.Duration
}

// PoolWorkersFunc returns what the fleet knows of a pool's workers; ok is
// false for a pool that is gone.
type PoolWorkersFunc func(ctx context.Context, tenantID, poolID string) (pw PoolWorkers, ok bool, err error)

// placedReason says why a placed task waits. While a worker of its pool is
// online it waits for that worker to claim it (the reason the engine or
// the pool's autoscaler wrote). While none is, it says so, with when one
// was last seen, and, with a claim timeout, when the task goes back to its
// compute resource if none claims it.
func (s *Tasks) placedReason(ctx context.Context, t *model.Task) (string, error) {
	if s.poolWorkers == nil || t.PoolID == "" {
		return t.Reason, nil
	}
	pw, ok, err := s.poolWorkers(ctx, t.TenantID, t.PoolID)
	if err != nil {
		return "", s.k.Internal(ctx, err)
	}
	if !ok || pw.Online > 0 {
		return t.Reason, nil
	}
	why := engine.PlacedNoWorkerReason(pw.PoolName, pw.LastSeen)
	switch {
	case pw.ClaimTimeout > 0 && t.PlacedAt != nil:
		why += "; unless one claims it by " + t.PlacedAt.Add(pw.ClaimTimeout).UTC().Format("2006-01-02 15:04:05 UTC") +
			", it goes back to the front of its compute resource"
	case pw.Autoscaled && strings.HasPrefix(t.Reason, "placed on pool "+pw.PoolName+"; waiting for a node: "):
		// What the pool's autoscaler last said of this task (fleet's
		// autoscaler sync writes it) is the more useful half: keep it.
		why += strings.TrimPrefix(t.Reason, "placed on pool "+pw.PoolName)
	case pw.Autoscaled && t.Reason != "" && !strings.HasPrefix(t.Reason, "placed on pool "):
		why += "; its autoscaler: " + t.Reason
	case pw.Autoscaled:
		why += "; it waits for the pool's autoscaler to bring one"
	}
	return why, nil
}
