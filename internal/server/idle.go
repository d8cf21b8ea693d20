package server

import (
	"context"
	"time"
)

// idleSweepInterval is how often a replica applies the session idle limits
// (warn, then stop): well under a minute, the limits' own grain.
const idleSweepInterval = 20 * time.Second

// activityFlushInterval is how often a replica writes the traffic its
// router and gateway carried to app instances; the store keeps it to
// about a minute (store.AppActivityGrain), so this only bounds the delay.
const activityFlushInterval = 20 * time.Second

// startAppIdle runs, until Shutdown, the writes of this replica's app
// traffic (every replica: each sees only its own) and, on a replica that
// runs the engine, the idle sweep and the stale local runs' sweep. All are
// idempotent database writes, so several replicas doing them at once is
// safe.
func (a *App) startAppIdle(engine bool) {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopIdle = cancel
	go a.every(ctx, activityFlushInterval, a.flushAppActivity())
	if engine {
		go a.every(ctx, localRunSweepInterval, a.sweepStaleLocalRuns)
		go a.every(ctx, idleSweepInterval, func(ctx context.Context) {
			res, err := a.controllers.SweepIdle(ctx)
			if err != nil && ctx.Err() == nil {
				a.log.Warn("sweep idle app instances", "err", err)
			}
			if res.Warned+res.Stopped > 0 {
				a.log.Info("app idle limits", "warned", res.Warned, "stopped", res.Stopped, "cleared", res.Cleared)
			}
		})
	}
}

// flushAppActivity returns a job that writes the instances used since its
// last run.
func (a *App) flushAppActivity() func(context.Context) {
	var last time.Time
	return func(ctx context.Context) {
		for id, at := range a.AppActivity.UsedSince(last) {
			if at.After(last) {
				last = at
			}
			if err := a.controllers.NoteAppActivity(ctx, id, at); err != nil && ctx.Err() == nil {
				a.log.Warn("note app activity", "instance", id, "err", err)
			}
		}
	}
}

// every runs job now and every interval until ctx ends.
func (a *App) every(ctx context.Context, interval time.Duration, job func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		job(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
