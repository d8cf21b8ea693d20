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
// engine, the studies controller: a pass every studies.Interval (the
// source of truth) and one soon after a task ends or reports metrics, so
// that a trial is recorded, stopped early or followed by the next without
// waiting for the tick. A pass is idempotent, so replicas that both run
// one (the engine's lease changing hands) do no harm.
func (a *App) startStudies(engine bool) {
	if !engine {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopStudies = cancel
	pass := func(ctx context.Context) {
		if err := a.Service.ReconcileStudies(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("studies controller", "err", err)
		}
	}
	kick := make(chan struct{}, 1)
	sub := a.Service.Kernel().Events.Subscribe(256, func(e events.Event) bool {
		switch e.Kind {
		case "task.completed", "task.failed", "task.aborted", "task.metrics":
			return true
		}
		return false
	})
	go func() {
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.C:
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}
	}()
	go func() {
		t := time.NewTicker(studies.Interval)
		defer t.Stop()
		for {
			pass(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-kick:
				select {
				case <-ctx.Done():
					return
				case <-time.After(studyReactDelay):
				}
			}
		}
	}()
}
