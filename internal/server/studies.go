package server

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/platform/studies"
)

// studyReactDelay gathers a burst of task events (the metric points of
// several trials) into one pass of the studies controller.
const studyReactDelay = 250 * time.Millisecond

// startStudies runs, until Shutdown and only on a replica that runs the
// engine, the studies controller: a pass every studies.Interval and one
// soon after a task ends or reports metrics, so that a trial is
// recorded, stopped early or followed by the next without waiting for
// the tick.
func (a *App) startStudies(engine bool) {
	a.startController(engine, &a.stopStudies, studies.Interval, studyReactDelay,
		func(e events.Event) bool {
			switch e.Kind {
			case "task.completed", "task.failed", "task.aborted", "task.metrics":
				return true
			}
			return false
		},
		func(ctx context.Context) {
			if err := a.controllers.ReconcileStudies(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("studies controller", "err", err)
			}
		})
}
