package apps

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// The session idle limits (docs/apps.md, "Idle limits"). An instance has
// up to two: a maximum lifetime, counted from the start of its current
// attempt, and an idle limit, counted from its last use. Use is traffic
// through a router or the gateway (appnet.Activity, written to the store
// by every replica as a coarse last-activity time) or GPU or CPU use at or
// over the idle thresholds as its worker reports them (the fleet domain
// writes the same time). The sweep warns an instance the tenant's lead
// time before a limit stops it, once, and then stops it through the same
// abort path as a stop, with the reason on its record.

// Expirer stops a running app instance on the control plane's own
// authority, through the tasks domain's abort path (attempt fences it).
type Expirer func(ctx context.Context, tenantID, id string, attempt int, actor, reason string) (*model.Task, error)

// idleActor is the actor the audit trail shows for the sweep's warnings
// and stops.
const idleActor = "idle limits"

// IdleState is an instance's idle state at now, under the limits its
// launch set: when it will be stopped, and why, unless it is used first.
// It is a pure function of the task and the time.
func IdleState(t *model.Task, now time.Time) *model.AppIdle {
	a := t.Spec.App
	if a == nil {
		return &model.AppIdle{}
	}
	st := &model.AppIdle{IdleMinutes: a.IdleMinutes, MaxLifetimeMinutes: a.MaxLifetimeMinutes, WarnedAt: t.Run.AppWarnedAt}
	if t.Status != model.TaskRunning || t.Run.StartedAt == nil {
		return st
	}
	start := *t.Run.StartedAt
	if a.IdleMinutes > 0 {
		since := start
		if at := t.Run.AppActiveAt; at != nil && at.After(since) {
			since = *at
		}
		if since.After(now) {
			since = now
		}
		stop := since.Add(time.Duration(a.IdleMinutes) * time.Minute)
		st.IdleSince, st.StopsAt = &since, &stop
		st.StopReason = fmt.Sprintf("stopped: idle for %s (no traffic, GPU under %g %%, CPU under %g %%)",
			Minutes(a.IdleMinutes), model.IdleGPUPercent, model.IdleCPUPercent)
	}
	if a.MaxLifetimeMinutes > 0 {
		stop := start.Add(time.Duration(a.MaxLifetimeMinutes) * time.Minute)
		if st.StopsAt == nil || stop.Before(*st.StopsAt) {
			st.StopsAt = &stop
			st.StopReason = "stopped: reached its maximum lifetime of " + Minutes(a.MaxLifetimeMinutes)
		}
	}
	return st
}

// Minutes writes a number of minutes as a person would: "30 minutes",
// "8 hours", "1 day 2 hours", "1 hour 30 minutes".
func Minutes(n int) string {
	unit := func(v int, one string) string {
		if v == 1 {
			return "1 " + one
		}
		return strconv.Itoa(v) + " " + one + "s"
	}
	d, h, m := n/(24*60), n/60%24, n%60
	var parts []string
	if d > 0 {
		parts = append(parts, unit(d, "day"))
	}
	if h > 0 {
		parts = append(parts, unit(h, "hour"))
	}
	if m > 0 || len(parts) == 0 {
		parts = append(parts, unit(m, "minute"))
	}
	return strings.Join(parts, " ")
}

// SweepResult says what one sweep did.
type SweepResult struct {
	Warned, Cleared, Stopped int
}

// SweepIdle applies the idle limits of every tenant's running instances at
// the kernel's now: it warns an instance whose limits stop it within the
// tenant's lead time (once: the warning is a conditional write, so of
// several replicas sweeping at once one alone tells of it), clears the
// warning of one used since, and stops one whose limit has passed, through
// the tasks domain's abort path, with the reason on its record. Every
// replica may run it: each write is idempotent.
func (s *Apps) SweepIdle(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	if s.expire == nil {
		return res, errors.New("sweep idle app instances: the stop path is not wired")
	}
	tenants, err := s.k.Store.ListTenants(ctx)
	if err != nil {
		return res, fmt.Errorf("sweep idle app instances: list tenants: %w", err)
	}
	var errs []error
	for _, tn := range tenants {
		if err := s.sweepTenant(ctx, tn.ID, &res); err != nil {
			errs = append(errs, fmt.Errorf("sweep idle app instances of tenant %s: %w", tn.ID, err))
		}
	}
	return res, errors.Join(errs...)
}

func (s *Apps) sweepTenant(ctx context.Context, tenantID string, res *SweepResult) error {
	running, err := runningApps(ctx, s.k.Store, tenantID)
	if err != nil || len(running) == 0 {
		return err
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return fmt.Errorf("read the estate: %w", err)
	}
	lead := time.Duration(e.Apps.Settings.IdleWarning()) * time.Minute
	now := s.k.Now()
	var errs []error
	for _, t := range running {
		st := IdleState(t, now)
		switch {
		case st.StopsAt == nil:
			continue
		case !now.Before(*st.StopsAt):
			_, err := s.expire(ctx, tenantID, t.ID, t.Run.Attempt, idleActor, st.StopReason)
			var ke *kernel.Error
			if errors.As(err, &ke) && ke.Code == kernel.CodeConflict {
				continue // stopped, or claimed again, since it was read
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", t.ID, err))
				continue
			}
			res.Stopped++
		case now.Add(lead).Before(*st.StopsAt):
			if st.WarnedAt != nil {
				// Used since the warning: the countdown starts again.
				changed, err := s.setWarned(ctx, t, nil, "")
				if err != nil {
					errs = append(errs, err)
				} else if changed {
					res.Cleared++
				}
			}
		case st.WarnedAt == nil:
			detail := fmt.Sprintf("will be %s at %s unless it is used", strings.TrimPrefix(st.StopReason, "stopped: "), st.StopsAt.Format(time.RFC3339))
			if !strings.HasPrefix(st.StopReason, "stopped: idle") {
				detail = fmt.Sprintf("will be stopped at %s: it will have %s", st.StopsAt.Format(time.RFC3339), strings.TrimPrefix(st.StopReason, "stopped: "))
			}
			changed, err := s.setWarned(ctx, t, &now, detail)
			if err != nil {
				errs = append(errs, err)
			} else if changed {
				res.Warned++
			}
		}
	}
	return errors.Join(errs...)
}

// setWarned records (at set) or clears an instance's idle warning; the
// warning is audited and published as app.idle_warning, its clearing as
// app.idle_cleared, by the replica whose write changed it.
func (s *Apps) setWarned(ctx context.Context, t *model.Task, at *time.Time, detail string) (bool, error) {
	changed, err := kernel.RunAs(ctx, s.k, kernel.System(t.TenantID, idleActor), kernel.Op[bool]{
		Name: "warnIdleApp", Right: kernel.RightRead, What: "warn of idle apps",
		// A warning is audited; its clearing only published.
		Unaudited: true,
		Body: func(tx *kernel.Txn) (bool, kernel.Audit, error) {
			changed, err := tx.Q.SetAppIdleWarned(tx.Ctx, t.TenantID, t.ID, t.Run.Attempt, at)
			switch {
			case err != nil:
				return false, kernel.Audit{}, err
			case !changed:
				return false, kernel.Audit{}, nil
			case at == nil:
				tx.Publish(eventOf(tx, "app.idle_cleared", t))
				return true, kernel.Audit{}, nil
			}
			return true, kernel.Audit{Action: "app.idle_warning", Kind: "task", ID: t.ID, Name: t.Name, GroupID: t.GroupID, Detail: detail}, nil
		},
	})
	if err != nil {
		return false, fmt.Errorf("idle warning of %s: %w", t.ID, err)
	}
	return changed, nil
}

func eventOf(tx *kernel.Txn, kind string, t *model.Task) events.Event {
	return events.Event{TenantID: t.TenantID, Kind: kind, ObjectKind: "task", ObjectID: t.ID, ObjectName: t.Name, GroupID: t.GroupID, At: tx.Now}
}

// runningApps lists a tenant's running app instances that have a limit.
func runningApps(ctx context.Context, q store.Queries, tenantID string) ([]*model.Task, error) {
	var out []*model.Task
	page := store.Page{Limit: 1000}
	for {
		tasks, err := q.ListTasks(ctx, tenantID, store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning}}, page, false)
		if err != nil {
			return nil, fmt.Errorf("list running app instances: %w", err)
		}
		for _, t := range tasks {
			if a := t.Spec.App; t.Spec.Kind == model.TaskKindApplication && a != nil && (a.IdleMinutes > 0 || a.MaxLifetimeMinutes > 0) {
				out = append(out, t)
			}
		}
		if len(tasks) < page.Limit {
			return out, nil
		}
		page.After = strconv.FormatInt(tasks[len(tasks)-1].QueueSeq, 10)
	}
}

// NoteAppActivity records traffic a replica carried to an instance (its
// router or gateway), coarsely, so whichever replica sweeps sees it.
// Notes of unknown or ended instances are ignored.
func (s *Apps) NoteAppActivity(ctx context.Context, taskID string, at time.Time) error {
	if now := s.k.Now(); at.After(now) {
		at = now
	}
	if _, err := s.k.Store.TouchAppActivity(ctx, taskID, at); err != nil {
		return fmt.Errorf("note the activity of app instance %s: %w", taskID, err)
	}
	return nil
}

// decorate adds an instance's runtime and idle state, read now.
func (s *Apps) decorate(ctx context.Context, in *model.AppInstance) (*model.AppInstance, error) {
	t, now := in.Task, s.k.Now()
	in.Idle = IdleState(t, now)
	rt := &model.AppRuntime{LastActivity: t.Run.AppActiveAt}
	if t.Status == model.TaskRunning && t.Run.StartedAt != nil {
		rt.Uptime = now.Sub(*t.Run.StartedAt)
		points, err := s.k.Store.LastMetrics(ctx, t.TenantID, t.ID)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		for _, p := range points {
			if p.Attempt != t.Run.Attempt {
				continue
			}
			v := p.Value
			switch p.Name {
			case "gpu.utilization":
				rt.GPUUtilization = &v
			case "cpu.utilization":
				rt.CPUUtilization = &v
			}
		}
	}
	in.Runtime = rt
	return in, nil
}
