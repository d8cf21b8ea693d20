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

// startPipelines runs the pipeline controller on a replica that runs the
// engine, until Shutdown: a pass every couple of seconds (the source of
// truth) and one soon after any task or pipeline run changes. Its writes
// are conditional, so replicas running it at once are safe.
func (a *App) startPipelines(engine bool) {
	if !engine {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopPipelines = cancel
	sub := a.Service.Kernel().Events.Subscribe(64, func(e events.Event) bool {
		return e.ObjectKind == "task" || (e.ObjectKind == pipelines.ObjectKind && e.Kind != pipelines.EventKind)
	})
	go func() {
		<-ctx.Done()
		sub.Close()
	}()
	pass := func(ctx context.Context) {
		if err := a.Service.AdvancePipelines(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("advance pipelines", "err", err)
		}
	}
	go func() {
		t := time.NewTicker(pipelineInterval)
		defer t.Stop()
		for {
			pass(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case _, ok := <-sub.C:
				if !ok {
					return
				}
				// Let a burst of events settle into one pass.
				time.Sleep(50 * time.Millisecond)
				for len(sub.C) > 0 {
					<-sub.C
				}
			}
		}
	}()
}
