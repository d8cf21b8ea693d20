package server

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/platform/schedules"
)

// schedulesInterval is how often a replica that runs the engine runs the
// schedules pass (docs/schedules.md): a cron firing is at most this late.
const schedulesInterval = 2 * time.Second

// schedulesSettle lets a burst of events a trigger may match settle into
// one pass.
const schedulesSettle = 20 * time.Millisecond

// startSchedules runs, until Shutdown, the schedules pass on a replica
// that runs the engine: every schedulesInterval, and soon after an event
// a trigger may match (a task completing, an artifact published, a
// pipeline finishing). The pass is idempotent across replicas, and the
// periodic run is the source of truth: the events only shorten the wait.
func (a *App) startSchedules(engine bool) {
	a.startController(engine, &a.stopSchedules, schedulesInterval, schedulesSettle,
		func(e events.Event) bool { return schedules.Wakes(e.Kind) },
		func(ctx context.Context) {
			res, err := a.controllers.TickSchedules(ctx)
			if err != nil && ctx.Err() == nil {
				a.log.Warn("schedules pass", "err", err)
			}
			if res.Fired+res.Skipped+res.Paused > 0 {
				a.log.Info("schedules pass", "fired", res.Fired, "skipped", res.Skipped, "paused", res.Paused)
			}
		})
}
