package schedules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// MaxNameLength bounds a schedule's name.
const MaxNameLength = 100

// Schedules is the schedules domain. What starts each target kind and
// matches each trigger event is given at construction and never changes.
type Schedules struct {
	k *kernel.Kernel

	starters map[string]Starter
	sources  map[string]TriggerSource
	limits   Limits
}

// Deps is what the schedules domain needs of the domains whose objects a
// schedule starts or whose events trigger one, given at construction (the
// platform service wires them), and its limits.
type Deps struct {
	// Starters start each target kind (model.ScheduleTarget*); a
	// schedule of a kind without one is refused.
	Starters map[string]Starter
	// Sources match each trigger event (model.Trigger*) besides
	// task.completed, which this domain matches itself.
	Sources map[string]TriggerSource
	// Limits bound what schedules can start; zero fields take the
	// defaults.
	Limits Limits
}

// New returns the domain over a kernel, wired to what it needs.
func New(k *kernel.Kernel, d Deps) *Schedules {
	s := &Schedules{k: k, starters: maps.Clone(d.Starters), sources: maps.Clone(d.Sources), limits: d.Limits}
	if s.starters == nil {
		s.starters = map[string]Starter{}
	}
	if s.sources == nil {
		s.sources = map[string]TriggerSource{}
	}
	s.sources[model.TriggerTaskCompleted] = taskCompleted{k: k}
	return s
}

func (s *Schedules) starter(kind string) Starter { return s.starters[kind] }

func (s *Schedules) source(event string) TriggerSource { return s.sources[event] }

// ScheduleInput is a schedule to create, or (UpdateSchedule) the fields
// to change: nil fields keep their value.
type ScheduleInput struct {
	Name *string
	// TargetKind is task (the default), pipeline or study; TargetID the
	// task to clone or the pipeline or study to start.
	TargetKind *string
	TargetID   *string
	Parameters map[string]string
	// Cron or Trigger: exactly one. Setting one clears the other.
	Cron    *string
	Trigger *model.ScheduleTrigger
	// MissedRuns is run-once (the default) or skip.
	MissedRuns *string
}

// visible returns the schedule of id the caller may see: its owner's and
// the tenant admins'. Another tenant's or another user's answers "not
// found".
func (s *Schedules) visible(ctx context.Context, p *identity.Principal, id string) (*model.Schedule, error) {
	sc, err := s.k.Store.GetSchedule(ctx, p.TenantID, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sees(p, sc)) {
		return nil, kernel.NotFound("no schedule %s", kernel.Quote(id))
	}
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("get schedule %s: %w", id, err))
	}
	return sc, nil
}

func sees(p *identity.Principal, sc *model.Schedule) bool {
	return sc.TenantID == p.TenantID && (p.IsAdmin() || sc.OwnerID == p.UserID)
}

// SeesSchedule is who may see a schedule: its owner and the tenant's
// admins (for the live updates).
func (s *Schedules) SeesSchedule(p *identity.Principal, sc *model.Schedule) bool {
	return p != nil && sc != nil && sees(p, sc)
}

// TenantSchedule reads a schedule on the platform's own behalf, nil when
// it is gone (for the live updates, which check SeesSchedule per
// subscriber).
func (s *Schedules) TenantSchedule(ctx context.Context, tenantID, id string) (*model.Schedule, error) {
	sc, err := s.k.Store.GetSchedule(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return sc, err
}

// Schedule returns a schedule the caller sees.
func (s *Schedules) Schedule(ctx context.Context, id string) (*model.Schedule, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return s.visible(ctx, p, id)
}

// Schedules lists the schedules the caller sees, by name: their own, or
// all of the tenant's for an admin.
func (s *Schedules) Schedules(ctx context.Context) ([]*model.Schedule, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.k.Store.ListSchedules(ctx, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("list schedules: %w", err))
	}
	out := all[:0]
	for _, sc := range all {
		if sees(p, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// ScheduleRuns lists a schedule's last firings, newest first.
func (s *Schedules) ScheduleRuns(ctx context.Context, id string, limit int) ([]*model.ScheduleRun, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.visible(ctx, p, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	runs, err := s.k.Store.ListScheduleRuns(ctx, p.TenantID, id, limit)
	return runs, s.k.Internal(ctx, err)
}

// ScheduleOfRun returns the schedule that started a run (a task, say) the
// caller already sees, nil when none did. The schedule shows as its
// name and id only: seeing a task does not open its schedule.
func (s *Schedules) ScheduleOfRun(ctx context.Context, runID string) (*model.ScheduleRun, *model.Schedule, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	runs, err := s.k.Store.ScheduleRunsOf(ctx, p.TenantID, []string{runID})
	if err != nil || runs[runID] == nil {
		return nil, nil, s.k.Internal(ctx, err)
	}
	r := runs[runID]
	sc, err := s.k.Store.GetSchedule(ctx, p.TenantID, r.ScheduleID)
	if errors.Is(err, store.ErrNotFound) {
		return r, nil, nil
	}
	return r, sc, s.k.Internal(ctx, err)
}

// CreateSchedule saves a schedule owned by the caller, after checking
// that they may start its target now.
func (s *Schedules) CreateSchedule(ctx context.Context, in ScheduleInput) (*model.Schedule, error) {
	var sc *model.Schedule
	var target string
	return kernel.Run(ctx, s.k, kernel.Op[*model.Schedule]{
		Name: "createSchedule", Right: kernel.RightWrite, What: "create schedules",
		Prepare: func(p *identity.Principal) (err error) {
			now := s.k.Now()
			sc = &model.Schedule{TenantID: p.TenantID, OwnerID: p.UserID, TargetKind: model.ScheduleTargetTask,
				MissedRuns: model.MissedRunOnce, CreatedAt: now, UpdatedAt: now}
			target, err = s.apply(ctx, sc, in, true)
			return err
		},
		Body: func(t *kernel.Txn) (*model.Schedule, kernel.Audit, error) {
			if err := t.Q.CreateSchedule(ctx, sc); err != nil {
				if errors.Is(err, store.ErrConflict) {
					return nil, kernel.Audit{}, kernel.Conflict("you already have a schedule named %s: choose another name, or update that one", kernel.Quote(sc.Name))
				}
				return nil, kernel.Audit{}, fmt.Errorf("create schedule %s: %w", sc.Name, err)
			}
			return sc, kernel.Audit{Action: "schedule.created", Kind: "schedule", ID: sc.ID, Name: sc.Name,
				Detail: fmt.Sprintf("%s %s %s", describeWhen(sc), sc.TargetKind, target)}, nil
		},
	})
}

// UpdateSchedule changes a schedule the caller owns (or, as an admin,
// any). A changed cron expression or trigger starts afresh from now.
func (s *Schedules) UpdateSchedule(ctx context.Context, id string, in ScheduleInput) (*model.Schedule, error) {
	return s.change(ctx, id, "update", func(sc *model.Schedule) (string, error) {
		target, err := s.apply(ctx, sc, in, false)
		return target, err
	})
}

// PauseSchedule stops a schedule's firings until ResumeSchedule.
func (s *Schedules) PauseSchedule(ctx context.Context, id string) (*model.Schedule, error) {
	return s.change(ctx, id, "pause", func(sc *model.Schedule) (string, error) {
		p, _ := kernel.Caller(ctx)
		sc.Paused, sc.PausedReason, sc.NextRunAt = true, "paused by "+p.UserName, nil
		return sc.PausedReason, nil
	})
}

// ResumeSchedule restarts a paused schedule from now: the firings it
// would have made while paused are not made. The owner's access is
// checked again first.
func (s *Schedules) ResumeSchedule(ctx context.Context, id string) (*model.Schedule, error) {
	return s.change(ctx, id, "resume", func(sc *model.Schedule) (string, error) {
		if err := s.checkOwner(ctx, sc); err != nil {
			return "", err
		}
		if sc.Cron != "" {
			if err := s.checkInterval(ctx, sc.TenantID, sc.Cron); err != nil {
				return "", err
			}
		}
		sc.Paused, sc.PausedReason = false, ""
		return "", s.restart(sc)
	})
}

// DeleteSchedule removes a schedule; what it started stays.
func (s *Schedules) DeleteSchedule(ctx context.Context, id string) (*model.Schedule, error) {
	var sc *model.Schedule
	return kernel.Run(ctx, s.k, kernel.Op[*model.Schedule]{
		Name: "deleteSchedule", Right: kernel.RightWrite, What: "delete schedules",
		Prepare: func(p *identity.Principal) (err error) {
			sc, err = s.visible(ctx, p, id)
			return err
		},
		Body: func(t *kernel.Txn) (*model.Schedule, kernel.Audit, error) {
			if err := t.Q.DeleteSchedule(ctx, t.P.TenantID, id); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return nil, kernel.Audit{}, kernel.NotFound("no schedule %s", kernel.Quote(id))
				}
				return nil, kernel.Audit{}, fmt.Errorf("delete schedule %s: %w", id, err)
			}
			return sc, kernel.Audit{Action: "schedule.deleted", Kind: "schedule", ID: sc.ID, Name: sc.Name, Detail: "deleted"}, nil
		},
	})
}

// change applies fn to a schedule the caller sees and writes it.
func (s *Schedules) change(ctx context.Context, id, verb string, fn func(sc *model.Schedule) (string, error)) (*model.Schedule, error) {
	var sc *model.Schedule
	var detail string
	return kernel.Run(ctx, s.k, kernel.Op[*model.Schedule]{
		Name: verb + "Schedule", Right: kernel.RightWrite, What: verb + " schedules",
		Prepare: func(p *identity.Principal) (err error) {
			if sc, err = s.visible(ctx, p, id); err != nil {
				return err
			}
			if detail, err = fn(sc); err != nil {
				return err
			}
			sc.UpdatedAt = s.k.Now()
			return nil
		},
		Body: func(t *kernel.Txn) (*model.Schedule, kernel.Audit, error) {
			if err := t.Q.UpdateSchedule(ctx, sc); err != nil {
				if errors.Is(err, store.ErrConflict) {
					return nil, kernel.Audit{}, kernel.Conflict("the owner already has a schedule named %s: choose another name", kernel.Quote(sc.Name))
				}
				if errors.Is(err, store.ErrNotFound) {
					return nil, kernel.Audit{}, kernel.NotFound("no schedule %s", kernel.Quote(id))
				}
				return nil, kernel.Audit{}, fmt.Errorf("%s schedule %s: %w", verb, id, err)
			}
			if detail == "" {
				detail = describeWhen(sc)
			}
			return sc, kernel.Audit{Action: "schedule." + pastTense(verb), Kind: "schedule", ID: sc.ID, Name: sc.Name, Detail: detail}, nil
		},
	})
}

func pastTense(verb string) string {
	if strings.HasSuffix(verb, "e") {
		return verb + "d"
	}
	return verb + "ed"
}

// apply validates in onto sc (all of it on create, the fields set on
// update) and returns the target's name. Nothing is written.
func (s *Schedules) apply(ctx context.Context, sc *model.Schedule, in ScheduleInput, create bool) (string, error) {
	var ps []string
	oldProject := sc.ProjectID
	if in.Name != nil || create {
		name := ""
		if in.Name != nil {
			name = *in.Name
		}
		switch n := strings.TrimSpace(name); {
		case n == "":
			ps = append(ps, "name is empty: give the schedule a name")
		case n != name:
			ps = append(ps, "name starts or ends with a space")
		case utf8.RuneCountInString(name) > MaxNameLength || !utf8.ValidString(name):
			ps = append(ps, fmt.Sprintf("name is longer than %d characters", MaxNameLength))
		}
		sc.Name = name
	}
	if in.TargetKind != nil {
		sc.TargetKind = *in.TargetKind
	}
	if in.TargetID != nil {
		sc.TargetID = strings.TrimSpace(*in.TargetID)
	}
	if in.Parameters != nil {
		sc.Parameters = maps.Clone(in.Parameters)
	}
	if in.MissedRuns != nil {
		sc.MissedRuns = *in.MissedRuns
	}
	switch sc.MissedRuns {
	case model.MissedRunOnce, model.MissedSkip:
	default:
		ps = append(ps, fmt.Sprintf("missed runs %q: say run-once (one run on start for all missed) or skip", sc.MissedRuns))
	}
	whenChanged := in.Cron != nil || in.Trigger != nil
	if in.Cron != nil && in.Trigger != nil && strings.TrimSpace(*in.Cron) != "" {
		ps = append(ps, "give a cron expression or a trigger, not both")
	}
	if in.Cron != nil && strings.TrimSpace(*in.Cron) != "" {
		sc.Cron, sc.Trigger = strings.TrimSpace(*in.Cron), nil
	} else if in.Trigger != nil {
		sc.Cron, sc.Trigger = "", in.Trigger
	}
	if sc.Cron == "" && sc.Trigger == nil {
		ps = append(ps, "say when it runs: a cron expression (UTC), such as '0 3 * * *', or a trigger")
	}
	if sc.Cron != "" {
		problem, err := s.cronProblem(ctx, sc, create || in.Cron != nil)
		if err != nil {
			return "", err
		}
		if problem != "" {
			ps = append(ps, problem)
		}
	}
	var st Starter
	switch sc.TargetKind {
	case model.ScheduleTargetTask, model.ScheduleTargetPipeline, model.ScheduleTargetStudy:
		if st = s.starter(sc.TargetKind); st == nil {
			ps = append(ps, fmt.Sprintf("this server cannot start %ss on a schedule yet", sc.TargetKind))
		}
	default:
		ps = append(ps, fmt.Sprintf("target kind %q: say task, pipeline or study", sc.TargetKind))
	}
	if sc.TargetID == "" {
		ps = append(ps, "say what it starts: the id of a task to clone, or of a pipeline or study")
	}
	if len(ps) > 0 {
		return "", &kernel.Error{Code: kernel.CodeInvalid, Message: "schedule " + kernel.Quote(sc.Name) + ": " + strings.Join(ps, "; "), Problems: ps}
	}
	if sc.Trigger != nil && (create || in.Trigger != nil) {
		if stray := strayFields(*sc.Trigger); len(stray) > 0 && triggerFields[sc.Trigger.Event] != nil {
			return "", kernel.Invalid("schedule %s: the %s trigger takes %s, not %s: leave %s out",
				kernel.Quote(sc.Name), sc.Trigger.Event, strings.Join(triggerFields[sc.Trigger.Event], ", "),
				strings.Join(stray, ", "), strings.Join(stray, " and "))
		}
		src := s.source(sc.Trigger.Event)
		if src == nil {
			return "", kernel.Invalid("schedule %s: trigger event %q: say task.completed, artifact.published or pipeline.finished (this server matches: %s)",
				kernel.Quote(sc.Name), sc.Trigger.Event, strings.Join(s.events(), ", "))
		}
		trig, err := src.Validate(ctx, *sc.Trigger)
		if err != nil {
			return "", err
		}
		sc.Trigger = &trig
	}
	// The target is checked as the owner: on update by an admin, that is
	// not the caller.
	octx, err := s.asOwner(ctx, sc, false)
	if err != nil {
		return "", err
	}
	target, err := st.Check(octx, sc.TargetID, sc.Parameters)
	if err != nil {
		return "", err
	}
	sc.ProjectID = target.ProjectID
	if create || sc.ProjectID != oldProject {
		if err := s.checkCaps(ctx, sc, !create); err != nil {
			return "", err
		}
	}
	if create || whenChanged {
		if err := s.restart(sc); err != nil {
			return "", err
		}
	}
	return kernel.Quote(target.Name), nil
}

// cronProblem says what is wrong with a schedule's cron expression, ""
// when nothing: it must parse, and, when it is new (interval), fire no
// more often than the tenant's minimum interval.
func (s *Schedules) cronProblem(ctx context.Context, sc *model.Schedule, interval bool) (string, error) {
	if !interval {
		if _, err := ParseCron(sc.Cron); err != nil {
			return err.Error(), nil
		}
		return "", nil
	}
	min, err := s.minInterval(ctx, sc.TenantID)
	if err != nil {
		return "", s.k.Internal(ctx, err)
	}
	if err := CheckInterval(sc.Cron, min); err != nil {
		return err.Error(), nil
	}
	return "", nil
}

// restart sets a schedule's next firing (cron) or its check (trigger)
// from now, as on creation or resumption.
func (s *Schedules) restart(sc *model.Schedule) error {
	now := s.k.Now()
	sc.NextRunAt, sc.CheckedAt = nil, nil
	if sc.Paused {
		return nil
	}
	if sc.Cron != "" {
		next, err := NextRun(sc.Cron, now)
		if err != nil {
			return kernel.Invalid("schedule %s: %v", kernel.Quote(sc.Name), err)
		}
		sc.NextRunAt = &next
		return nil
	}
	sc.CheckedAt = &now
	return nil
}

func (s *Schedules) events() []string {
	var out []string
	for _, e := range []string{model.TriggerTaskCompleted, model.TriggerArtifactPublished, model.TriggerPipelineFinished} {
		if s.sources[e] != nil {
			out = append(out, e)
		}
	}
	return out
}

// asOwner returns ctx acting as the schedule's owner: the caller when it
// is the owner and fresh is false (a request, authenticated just now,
// with its credential's scope), else the owner read afresh from the
// store (a disabled owner is refused), as a firing acts.
func (s *Schedules) asOwner(ctx context.Context, sc *model.Schedule, fresh bool) (context.Context, error) {
	if p, ok := identity.PrincipalFrom(ctx); ok && !fresh && p.UserID == sc.OwnerID && p.TenantID == sc.TenantID {
		return ctx, nil
	}
	p, err := identity.LoadPrincipal(ctx, s.k.Store, sc.TenantID, sc.OwnerID)
	if err != nil {
		if errors.Is(err, identity.ErrUnauthenticated) {
			return nil, kernel.Unauthenticated("the schedule's owner cannot act: %v", err)
		}
		return nil, fmt.Errorf("read the owner of schedule %s: %w", sc.ID, err)
	}
	return identity.WithPrincipal(ctx, p), nil
}

// checkOwner checks that the owner may still start the target.
func (s *Schedules) checkOwner(ctx context.Context, sc *model.Schedule) error {
	octx, err := s.asOwner(ctx, sc, true)
	if err != nil {
		return err
	}
	st := s.starter(sc.TargetKind)
	if st == nil {
		return kernel.Unavailable("this server cannot start %ss on a schedule", sc.TargetKind)
	}
	_, err = st.Check(octx, sc.TargetID, sc.Parameters)
	return err
}

// describeWhen says when a schedule fires, for the audit trail and lists.
func describeWhen(sc *model.Schedule) string {
	if sc.Cron != "" {
		return "cron " + kernel.Quote(sc.Cron) + " (UTC)"
	}
	if sc.Trigger == nil {
		return "never"
	}
	switch sc.Trigger.Event {
	case model.TriggerTaskCompleted:
		return fmt.Sprintf("when a task of project %s completes with tag %s", sc.Trigger.ProjectID, kernel.Quote(sc.Trigger.Tag))
	case model.TriggerArtifactPublished:
		if sc.Trigger.ProjectID != "" {
			return fmt.Sprintf("when an artifact named %s is published in project %s", kernel.Quote(sc.Trigger.Artifact), sc.Trigger.ProjectID)
		}
		return fmt.Sprintf("when an artifact named %s is published", kernel.Quote(sc.Trigger.Artifact))
	case model.TriggerPipelineFinished:
		end := "finishes"
		if sc.Trigger.State != "" {
			end = "ends " + sc.Trigger.State
		}
		return fmt.Sprintf("when a run of pipeline %s of project %s %s", kernel.Quote(sc.Trigger.Pipeline), sc.Trigger.ProjectID, end)
	}
	return "on " + sc.Trigger.Event
}

// ScheduleWhen says when a schedule fires, in words.
func (s *Schedules) ScheduleWhen(sc *model.Schedule) string { return describeWhen(sc) }
