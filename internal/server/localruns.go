package server

import (
	"context"
	"time"
)

// localRunSweepInterval is how often a replica that runs the engine ends
// the local runs that stopped reporting (tasks.LocalRunStaleAfter, half an
// hour): a minute late is nothing against that.
const localRunSweepInterval = time.Minute

// sweepStaleLocalRuns ends, as failed, the local runs whose process
// stopped reporting. The writes are conditional on the run still being
// local and silent, so replicas sweeping at once are safe.
func (a *App) sweepStaleLocalRuns(ctx context.Context) {
	n, err := a.controllers.SweepStaleLocalRuns(ctx)
	if err != nil && ctx.Err() == nil {
		a.log.Warn("sweep stale local runs", "err", err)
	}
	if n > 0 {
		a.log.Info("local runs that stopped reporting ended as failed", "runs", n)
	}
}
