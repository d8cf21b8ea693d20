package schedules

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// MissedGrace is how late a cron firing may be and still count as on
// time. A firing later than this was missed (the control plane was
// down): run-once makes it once for all missed, skip drops it.
const MissedGrace = time.Minute

// TriggerLookback is how far before its check a trigger looks again, so
// that an event written by a transaction that committed after a later
// one (its time is older than the check) is still matched. Firings are
// recorded by key, so an event is fired once however often it is seen.
const TriggerLookback = 5 * time.Minute

// triggerBatch bounds the events one trigger fires for in one pass; the
// rest wait for the next.
const triggerBatch = 100

// TickResult counts what a pass did.
type TickResult struct {
	Fired   int
	Skipped int
	Paused  int
	Failed  int
}

// TickSchedules is the schedules pass: it fires every due cron schedule and every
// trigger whose events happened, in every tenant, and pauses those whose
// owner lost access. It is idempotent and safe to run on several
// replicas at once (see the package doc).
func (s *Schedules) TickSchedules(ctx context.Context) (TickResult, error) {
	var res TickResult
	all, err := s.k.Store.ListActiveSchedules(ctx)
	if err != nil {
		return res, fmt.Errorf("schedules pass: list schedules: %w", err)
	}
	var errs []error
	for _, sc := range all {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		var err error
		if sc.Cron != "" {
			err = s.tickCron(ctx, sc, &res)
		} else if sc.Trigger != nil {
			err = s.tickTrigger(ctx, sc, &res)
		}
		if err != nil {
			res.Failed++
			errs = append(errs, fmt.Errorf("schedule %s (%s): %w", sc.Name, sc.ID, err))
		}
	}
	return res, errors.Join(errs...)
}

// tickCron fires a cron schedule whose next run is due.
func (s *Schedules) tickCron(ctx context.Context, sc *model.Schedule, res *TickResult) error {
	now := s.k.Now()
	if sc.NextRunAt == nil || sc.NextRunAt.After(now) {
		return nil
	}
	due := *sc.NextRunAt
	next, err := NextRun(sc.Cron, now)
	if err != nil {
		res.Paused++
		return s.pause(ctx, sc, fmt.Sprintf("its cron expression no longer parses: %v", err))
	}
	// Saved before the minimum interval was raised (or before there was
	// one): it fires no more.
	min, err := s.minInterval(ctx, sc.TenantID)
	if err != nil {
		return err
	}
	if err := CheckInterval(sc.Cron, min); err != nil {
		res.Paused++
		return s.pause(ctx, sc, err.Error())
	}
	claim := *sc
	claim.NextRunAt, claim.UpdatedAt = &next, now
	if now.Sub(due) > MissedGrace && sc.MissedRuns == model.MissedSkip {
		claim.LastResult = fmt.Sprintf("skipped the runs missed since %s (missed runs: skip)", due.Format(time.RFC3339))
		won, err := s.claim(ctx, &claim, due, nil, "schedule.skipped", claim.LastResult)
		if won {
			res.Skipped++
		}
		return err
	}
	key := "at:" + strconv.FormatInt(due.UnixMicro(), 10)
	runID, err := s.start(ctx, sc, key)
	switch {
	case err != nil && accessLost(err):
		res.Paused++
		return s.pause(ctx, sc, "its owner can no longer start it: "+kernel.PublicMessage(err))
	case err != nil && isRefusal(err):
		// Refused for a reason of its own (a parameter, a size): this
		// firing is dropped with the reason, the next one tries again.
		claim.LastRunAt, claim.LastResult, claim.LastError = &due, "refused", kernel.PublicMessage(err)
		_, cerr := s.claim(ctx, &claim, due, nil, "schedule.refused", claim.LastError)
		return errors.Join(err, cerr)
	case err != nil:
		return err // the next pass retries the same firing, with the same key
	}
	claim.LastRunAt, claim.LastRunID, claim.LastResult, claim.LastError = &due, runID, "started", ""
	run := &model.ScheduleRun{TenantID: sc.TenantID, ScheduleID: sc.ID, Key: key, TargetKind: sc.TargetKind, RunID: runID, At: now}
	won, err := s.claim(ctx, &claim, due, run, "schedule.fired",
		fmt.Sprintf("fired for %s: started %s %s", due.Format(time.RFC3339), sc.TargetKind, runID))
	if won {
		res.Fired++
	}
	return err
}

// claim moves a cron schedule on from due, records the firing (run, when
// not nil) and its audit entry, in one transaction; it reports whether
// this pass won the firing.
func (s *Schedules) claim(ctx context.Context, sc *model.Schedule, due time.Time, run *model.ScheduleRun, action, detail string) (bool, error) {
	return s.asPass(ctx, sc, "claimScheduleFiring", func(t *kernel.Txn) (bool, kernel.Audit, error) {
		ok, err := t.Q.ClaimScheduleFiring(ctx, sc, due)
		if err != nil || !ok {
			return false, kernel.Audit{}, lost(err)
		}
		if run != nil {
			if _, err := t.Q.RecordScheduleRun(ctx, run); err != nil {
				return false, kernel.Audit{}, err
			}
		}
		return true, scheduleAudit(action, sc, detail), nil
	})
}

// asPass runs a write of the pass over schedule sc, as the schedules'
// system actor. A body that lost its race to another pass (or replica)
// returns lost(nil): nothing is written, and the write reports false.
func (s *Schedules) asPass(ctx context.Context, sc *model.Schedule, name string, body func(t *kernel.Txn) (bool, kernel.Audit, error)) (bool, error) {
	return kernel.RunAs(ctx, s.k, kernel.System(sc.TenantID, "schedules"), kernel.Op[bool]{Name: name, Body: body})
}

// lost is a pass's error when its write found the schedule moved on by
// another: err, or else ErrRollback (nothing to write).
func lost(err error) error {
	if err != nil {
		return err
	}
	return kernel.ErrRollback
}

// scheduleAudit is an audit entry about schedule sc.
func scheduleAudit(action string, sc *model.Schedule, detail string) kernel.Audit {
	return kernel.Audit{Action: action, Kind: "schedule", ID: sc.ID, Name: sc.Name, Detail: detail}
}

// tickTrigger fires a trigger schedule once for each event it matches
// since its check (and TriggerLookback before), then moves the check on.
func (s *Schedules) tickTrigger(ctx context.Context, sc *model.Schedule, res *TickResult) error {
	src := s.source(sc.Trigger.Event)
	if src == nil {
		return nil // the domain that matches it is not wired on this server
	}
	now := s.k.Now()
	checked := sc.CreatedAt
	if sc.CheckedAt != nil {
		checked = *sc.CheckedAt
	}
	// Events are matched as the owner: a trigger fires only for what
	// they may see (an artifact of another group's run does not).
	octx, err := s.asOwner(ctx, sc, true)
	if err != nil {
		if accessLost(err) {
			res.Paused++
			return s.pause(ctx, sc, kernel.PublicMessage(err))
		}
		return err
	}
	matches, err := src.Matches(octx, sc.TenantID, *sc.Trigger, checked.Add(-TriggerLookback), now, triggerBatch)
	if err != nil {
		return fmt.Errorf("match trigger %s: %w", sc.Trigger.Event, err)
	}
	until := now
	if len(matches) == triggerBatch {
		until = matches[len(matches)-1].At
	}
	capped := runCap{s: s, sc: sc, now: now}
	for _, m := range matches {
		if m.At.Before(sc.CreatedAt) {
			continue
		}
		_, err := s.k.Store.GetScheduleRun(ctx, sc.TenantID, sc.ID, m.Key)
		if err == nil {
			continue // fired already
		}
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("read the firings: %w", err)
		}
		if why, err := capped.refuses(ctx); err != nil {
			return err
		} else if why != "" {
			// Recorded as refused with no run, so it is not tried again.
			if werr := s.fired(ctx, sc, m, "", "refused", why); werr != nil {
				return werr
			}
			continue
		}
		runID, err := s.start(ctx, sc, m.Key)
		switch {
		case err != nil && accessLost(err):
			res.Paused++
			return s.pause(ctx, sc, "its owner can no longer start it: "+kernel.PublicMessage(err))
		case err != nil && isRefusal(err):
			// Recorded as fired with no run, so it is not tried again.
			if werr := s.fired(ctx, sc, m, "", "refused", kernel.PublicMessage(err)); werr != nil {
				return werr
			}
			continue
		case err != nil:
			return err
		}
		if err := s.fired(ctx, sc, m, runID, "started", ""); err != nil {
			return err
		}
		capped.started++
		res.Fired++
	}
	if until.After(checked) {
		if _, err := s.k.Store.AdvanceScheduleCheck(ctx, sc.TenantID, sc.ID, sc.CheckedAt, until); err != nil {
			return fmt.Errorf("move the check on: %w", err)
		}
	}
	return nil
}

// fired records a trigger's firing of an event once, with the schedule's
// last run.
func (s *Schedules) fired(ctx context.Context, sc *model.Schedule, m TriggerMatch, runID, result, lastErr string) error {
	now := s.k.Now()
	_, err := s.asPass(ctx, sc, "recordScheduleFiring", func(t *kernel.Txn) (bool, kernel.Audit, error) {
		won, err := t.Q.RecordScheduleRun(ctx, &model.ScheduleRun{TenantID: sc.TenantID, ScheduleID: sc.ID, Key: m.Key,
			TargetKind: sc.TargetKind, RunID: runID, At: now})
		if err != nil || !won {
			return false, kernel.Audit{}, lost(err)
		}
		if err := t.Q.NoteScheduleRun(ctx, sc.TenantID, sc.ID, now, runID, result, lastErr); err != nil {
			return false, kernel.Audit{}, err
		}
		detail := fmt.Sprintf("fired on %s: started %s %s", m.Key, sc.TargetKind, runID)
		if lastErr != "" {
			detail = fmt.Sprintf("fired on %s: refused: %s", m.Key, lastErr)
		}
		return true, scheduleAudit("schedule.fired", sc, detail), nil
	})
	return err
}

// start starts the schedule's target as its owner, with an idempotency
// key made of the schedule and the firing's key.
func (s *Schedules) start(ctx context.Context, sc *model.Schedule, key string) (string, error) {
	st := s.starter(sc.TargetKind)
	if st == nil {
		return "", kernel.Unavailable("this server cannot start %ss on a schedule", sc.TargetKind)
	}
	octx, err := s.asOwner(identity.WithChannel(ctx, identity.ChannelSchedule), sc, true)
	if err != nil {
		return "", err
	}
	return st.Start(octx, sc.TargetID, sc.Parameters, "schedule-"+sc.ID+"-"+key)
}

// pause stops a schedule with the reason, once.
func (s *Schedules) pause(ctx context.Context, sc *model.Schedule, reason string) error {
	_, err := s.asPass(ctx, sc, "pauseSchedule", func(t *kernel.Txn) (bool, kernel.Audit, error) {
		ok, err := t.Q.PauseScheduleIf(ctx, sc.TenantID, sc.ID, reason, t.Now)
		if err != nil || !ok {
			return false, kernel.Audit{}, lost(err)
		}
		return true, scheduleAudit("schedule.paused", sc, "paused: "+reason), nil
	})
	return err
}

// runCap counts a trigger's runs within the last hour for one pass (read
// once, then counted as the pass starts more), against the cap on runs
// per trigger per hour.
type runCap struct {
	s       *Schedules
	sc      *model.Schedule
	now     time.Time
	read    bool
	started int
	before  int
}

// refuses says why the trigger may start no more runs now, "" when it
// may.
func (c *runCap) refuses(ctx context.Context) (string, error) {
	if !c.read {
		n, err := c.s.k.Store.CountScheduleRuns(ctx, c.sc.TenantID, c.sc.ID, c.now.Add(-time.Hour))
		if err != nil {
			return "", fmt.Errorf("count the runs of the last hour: %w", err)
		}
		c.before, c.read = n, true
	}
	limit := c.s.scheduleLimits().RunsPerHour
	if n := c.before + c.started; n >= limit {
		return fmt.Sprintf("it started %d runs in the last hour, and a trigger may start at most %d an hour: the events past the cap are not run (an admin may raise KLIQUE_TRIGGER_RUNS_PER_HOUR)",
			n, limit), nil
	}
	return "", nil
}
