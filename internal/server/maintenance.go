package server

import (
	"context"
	"time"
)

// pruneInterval is how often the idempotency keys past their 24 hours are
// deleted.
const pruneInterval = time.Hour

// pruneIdempotencyKeys deletes, every pruneInterval until ctx ends, the
// idempotency keys older than their time to live. Every replica does it;
// the delete is the same whoever runs it.
func (a *App) pruneIdempotencyKeys(ctx context.Context) {
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		if n, err := a.controllers.PruneIdempotencyKeys(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("prune idempotency keys", "err", err)
		} else if n > 0 {
			a.log.Info("pruned idempotency keys", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
