package schedules

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Limits bound what schedules can start, so that a schedule cannot run
// away with a tenant's compute: how often one may fire, how many a user
// and a project may have, and how many runs a trigger may start an hour
// (a task.completed trigger whose target's clones keep its tag feeds
// itself). Zero fields take the defaults.
type Limits struct {
	// MinInterval is the shortest time between two firings of a cron
	// schedule, for every tenant; a tenant's admin may raise it for the
	// tenant (SetScheduleMinimumInterval), not lower it.
	MinInterval time.Duration
	// PerUser caps the schedules one user owns; PerProject those whose
	// target is in one project, whoever owns them.
	PerUser, PerProject int
	// RunsPerHour caps the runs a trigger schedule starts in an hour.
	RunsPerHour int
}

// The defaults of Limits (docs/operations.md, Limits).
const (
	DefaultMinInterval = time.Minute
	DefaultPerUser     = 50
	DefaultPerProject  = 200
	DefaultRunsPerHour = 60
)

// MaxMinInterval bounds the minimum interval a tenant's admin may set.
const MaxMinInterval = 24 * time.Hour

// scheduleLimits returns the limits in force, defaults filled in.
func (s *Schedules) scheduleLimits() Limits {
	l := s.limits
	if l.MinInterval <= 0 {
		l.MinInterval = DefaultMinInterval
	}
	if l.PerUser <= 0 {
		l.PerUser = DefaultPerUser
	}
	if l.PerProject <= 0 {
		l.PerProject = DefaultPerProject
	}
	if l.RunsPerHour <= 0 {
		l.RunsPerHour = DefaultRunsPerHour
	}
	return l
}

// minIntervalKey is the setting that holds a tenant's own minimum
// interval (a Go duration), in the server's settings.
func minIntervalKey(tenantID string) string { return "schedules.min_interval/" + tenantID }

// minInterval is the minimum interval of a tenant's schedules: its
// admin's, when set and not below the server's, else the server's.
func (s *Schedules) minInterval(ctx context.Context, tenantID string) (time.Duration, error) {
	floor := s.scheduleLimits().MinInterval
	v, err := s.k.Store.GetSetting(ctx, minIntervalKey(tenantID))
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && v == ""):
		return floor, nil
	case err != nil:
		return 0, fmt.Errorf("read the minimum interval of schedules: %w", err)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < floor {
		return floor, nil // unreadable, or the server's was raised since
	}
	return d, nil
}

// ScheduleMinimumInterval is the shortest time between two firings of a
// schedule in the caller's tenant.
func (s *Schedules) ScheduleMinimumInterval(ctx context.Context) (time.Duration, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return 0, err
	}
	d, err := s.minInterval(ctx, p.TenantID)
	return d, s.k.Internal(ctx, err)
}

// SetScheduleMinimumInterval sets the shortest time between two firings
// of a schedule in the caller's tenant (a tenant admin's): a Go duration
// such as "5m", at least the server's minimum and at most a day; empty
// goes back to the server's. It returns the minimum now in force.
// Schedules saved under a shorter one are paused at their next firing,
// with the reason.
func (s *Schedules) SetScheduleMinimumInterval(ctx context.Context, interval string) (time.Duration, error) {
	var d time.Duration
	return kernel.Run(ctx, s.k, kernel.Op[time.Duration]{
		Name: "setScheduleMinimumInterval", Right: kernel.RightAdmin, What: "set the minimum interval of schedules",
		Check: func(*identity.Principal) (err error) {
			d, err = s.parseMinInterval(interval)
			return err
		},
		Body: func(t *kernel.Txn) (time.Duration, kernel.Audit, error) {
			value := ""
			if interval != "" {
				value = d.String()
			}
			if err := t.Q.PutSetting(ctx, minIntervalKey(t.P.TenantID), value); err != nil {
				return 0, kernel.Audit{}, fmt.Errorf("set the minimum interval of schedules: %w", err)
			}
			return d, kernel.Audit{Action: "schedule.minimum_interval_set", Kind: "tenant", ID: t.P.TenantID,
				Detail: "schedules fire at most every " + d.String()}, nil
		},
	})
}

// parseMinInterval is the minimum interval a tenant admin asks for: the
// server's when empty, else at least it and at most MaxMinInterval.
func (s *Schedules) parseMinInterval(interval string) (time.Duration, error) {
	floor := s.scheduleLimits().MinInterval
	if interval == "" {
		return floor, nil
	}
	d, err := time.ParseDuration(interval)
	if err != nil {
		return 0, kernel.Invalid("minimum interval %q: give a duration such as 5m or 1h", interval)
	}
	if d < floor || d > MaxMinInterval {
		return 0, kernel.Invalid("minimum interval %s: give at least %s (this server's minimum) and at most %s", d, floor, MaxMinInterval)
	}
	return d, nil
}

// checkInterval refuses a cron expression that fires more often than the
// tenant's minimum interval.
func (s *Schedules) checkInterval(ctx context.Context, tenantID, expr string) error {
	min, err := s.minInterval(ctx, tenantID)
	if err != nil {
		return s.k.Internal(ctx, err)
	}
	if err := CheckInterval(expr, min); err != nil {
		return kernel.Invalid("%v", err)
	}
	return nil
}

// checkCaps refuses a schedule that would take its owner or its project
// past their caps: sc is the schedule as it would be saved, existing
// says whether it is saved already (an update, counted once).
func (s *Schedules) checkCaps(ctx context.Context, sc *model.Schedule, existing bool) error {
	all, err := s.k.Store.ListSchedules(ctx, sc.TenantID)
	if err != nil {
		return s.k.Internal(ctx, fmt.Errorf("count schedules: %w", err))
	}
	l := s.scheduleLimits()
	mine, inProject := 0, 0
	for _, o := range all {
		if existing && o.ID == sc.ID {
			continue
		}
		if o.OwnerID == sc.OwnerID {
			mine++
		}
		if sc.ProjectID != "" && o.ProjectID == sc.ProjectID {
			inProject++
		}
	}
	if !existing && mine >= l.PerUser {
		return kernel.Invalid("you have %d schedules, and a user may have at most %d: delete one you no longer need, or ask an admin to raise KLIQUE_SCHEDULES_PER_USER",
			mine, l.PerUser)
	}
	if sc.ProjectID != "" && inProject >= l.PerProject {
		name := sc.ProjectID
		if pr, err := s.k.Store.GetProject(ctx, sc.TenantID, sc.ProjectID); err == nil {
			name = pr.Name
		}
		return kernel.Invalid("project %s has %d schedules, and a project may have at most %d: delete one it no longer needs, or ask an admin to raise KLIQUE_SCHEDULES_PER_PROJECT",
			name, inProject, l.PerProject)
	}
	return nil
}
