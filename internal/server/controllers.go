package server

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
)

// startController starts a controller (see runController) on a replica
// that runs the engine, and keeps in stop what ends it at Shutdown; on
// other replicas it does nothing.
func (a *App) startController(engine bool, stop *context.CancelFunc, interval, settle time.Duration,
	wakes func(events.Event) bool, pass func(context.Context)) {
	if !engine {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	*stop = cancel
	go a.runController(ctx, interval, settle, wakes, pass)
}

// runController runs pass now, then every interval and, sooner, settle
// after an event that wakes accepts, until ctx ends. The periodic pass
// is the source of truth; the events only shorten the wait, so an event
// dropped by a full subscription costs at most one interval, and a burst
// of them settles into one pass. The control plane's controllers
// (pipelines, studies, schedules) run this way on the replica that runs
// the engine; each pass is idempotent, so two replicas running one at
// once (the engine's lease changing hands) do no harm.
func (a *App) runController(ctx context.Context, interval, settle time.Duration, wakes func(events.Event) bool, pass func(context.Context)) {
	sub := a.Events.Subscribe(256, wakes)
	defer sub.Close()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-sub.C:
			select {
			case <-ctx.Done():
				return
			case <-time.After(settle):
			}
			for len(sub.C) > 0 {
				<-sub.C
			}
		}
	}
}
