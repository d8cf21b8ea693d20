package server

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/platform/pipelines"
)

// pipelineInterval is how often the pipeline controller's pass runs on
// its own; a task's end or a run's change wakes it sooner.
const pipelineInterval = 2 * time.Second

// pipelineSettle lets a burst of task events settle into one pass.
const pipelineSettle = 50 * time.Millisecond

// startPipelines runs the pipeline controller on a replica that runs the
// engine, until Shutdown: a pass every couple of seconds and one soon
// after any task or pipeline run changes (but not after the controller's
// own step changes, which would wake it for nothing). Its writes are
// conditional, so replicas running it at once are safe.
func (a *App) startPipelines(engine bool) {
	a.startController(engine, &a.stopPipelines, pipelineInterval, pipelineSettle,
		func(e events.Event) bool {
			return e.ObjectKind == "task" || (e.ObjectKind == pipelines.ObjectKind && e.Kind != pipelines.EventKind)
		},
		func(ctx context.Context) {
			if err := a.controllers.AdvancePipelines(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("advance pipelines", "err", err)
			}
		})
}
