package pipelines

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// The controller: one pass over every run not yet ended. It looks at final
// task states only to move steps on (a preempted task is requeued by the
// engine and its step simply stays queued). Every change is a conditional
// write (UpdatePipelineStep's from state and attempt count,
// SetPipelineRunState's from states), and every enqueue carries an
// idempotency key per step attempt, so replicas running passes at once
// never enqueue a step twice: the loser of a race gets the winner's task.

// actor is the name the controller's own writes show in the audit trail.
const actor = "pipeline controller"

// AdvancePipelines advances every active run of every tenant once.
func (s *Pipelines) AdvancePipelines(ctx context.Context) error {
	tenants, err := s.k.Store.ListTenants(ctx)
	if err != nil {
		return fmt.Errorf("advance pipelines: list tenants: %w", err)
	}
	var errs []error
	for _, tn := range tenants {
		ids, err := s.k.Store.ListActivePipelineRuns(ctx, tn.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("advance pipelines of tenant %s: %w", tn.ID, err))
			continue
		}
		for _, id := range ids {
			if err := s.advance(ctx, tn.ID, id); err != nil {
				errs = append(errs, fmt.Errorf("advance pipeline run %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// pass is one run being advanced.
type pass struct {
	s    *Pipelines
	r    *model.PipelineRun
	plan *Plan
	// owner is a context acting as the run's owner.
	owner context.Context
	defs  map[string]*model.PipelineStepDef
}

func (s *Pipelines) advance(ctx context.Context, tenantID, id string) error {
	r, err := s.k.Store.GetPipelineRun(ctx, tenantID, id)
	if err != nil || r.State.Final() {
		return err
	}
	ps := &pass{s: s, r: r, defs: map[string]*model.PipelineStepDef{}}
	for i := range r.Definition.Steps {
		ps.defs[r.Definition.Steps[i].Name] = &r.Definition.Steps[i]
	}
	plan, probs := Check(&r.Definition, r.Params)
	if len(probs) > 0 {
		return ps.finish(ctx, model.PipelineRunFailed, "its definition no longer checks: "+strings.Join(probs, "; "))
	}
	ps.plan = plan
	if ps.owner, err = s.asOwner(ctx, r); err != nil {
		why := "its owner can no longer run it: " + message(err)
		if err := s.stopSteps(ctx, r, s.systemAbort(ctx, r), why, model.StepAborted); err != nil {
			return err
		}
		return ps.finish(ctx, model.PipelineRunFailed, why)
	}
	if r.State == model.PipelineRunPending {
		if err := ps.setRun(ctx, model.PipelineRunRunning, "running"); err != nil {
			return err
		}
	}
	// Follow the steps' tasks. A failed task's retry waits until the stop
	// policy has been applied: a run that stops enqueues nothing more
	// (issue 21's property test found a retry enqueued in the pass that
	// then aborted it).
	type retry struct {
		st  *model.PipelineStep
		why string
	}
	var retries []retry
	for _, st := range r.Steps {
		if st.State == model.StepQueued || st.State == model.StepRunning {
			why, err := ps.follow(ctx, st)
			if err != nil {
				return err
			}
			if why != "" {
				retries = append(retries, retry{st, why})
			}
		}
	}
	// A step that failed for good under the stop policy ends the run.
	for _, st := range r.Steps {
		if ps.stops(st) {
			return ps.stop(ctx, st)
		}
	}
	for _, rt := range retries {
		if err := ps.enqueue(ctx, rt.st, rt.why); err != nil {
			return err
		}
		if ps.stops(rt.st) {
			return ps.stop(ctx, rt.st)
		}
	}
	// Start the steps whose dependencies succeeded; skip those of a
	// failed one.
	for _, i := range plan.Order {
		st := r.Steps[i]
		if st.State != model.StepPending {
			continue
		}
		ready, failed := true, ""
		for _, d := range plan.Deps[st.Name] {
			ds := r.Step(d)
			switch {
			case ds.State.Succeeded():
			case ds.State.Final():
				ready, failed = false, d
			default:
				ready = false
			}
		}
		switch {
		case failed != "":
			if _, err := ps.move(ctx, st, func(n *model.PipelineStep) {
				n.State, n.Reason = model.StepSkipped, "skipped: step "+failed+" did not succeed"
				n.FinishedAt = ptr(s.k.Now())
			}); err != nil {
				return err
			}
		case ready:
			if err := ps.start(ctx, st); err != nil {
				return err
			}
			// A step that failed as it started (its enqueue refused, a
			// template not filled) under the stop policy ends the run
			// now: the steps after it in this pass would only be
			// enqueued for the next pass to abort (issue 21's property
			// test found it).
			if ps.stops(st) {
				return ps.stop(ctx, st)
			}
		}
	}
	// The run ends once every step has.
	var bad []string
	for _, st := range r.Steps {
		if !st.State.Final() {
			return nil
		}
		if !st.State.Succeeded() && st.State != model.StepSkipped {
			bad = append(bad, fmt.Sprintf("%s %s (%s)", st.Name, st.State, st.Reason))
		}
	}
	if len(bad) > 0 {
		return ps.finish(ctx, model.PipelineRunFailed, "step "+strings.Join(bad, "; step "))
	}
	return ps.finish(ctx, model.PipelineRunCompleted, "every step completed")
}

// stops reports whether a step failed for good under the stop policy.
func (ps *pass) stops(st *model.PipelineStep) bool {
	return (st.State == model.StepFailed || st.State == model.StepAborted) && ps.defs[st.Name].OnFailure != model.FailureContinue
}

// stop ends the run after st failed under the stop policy: its queued and
// running steps' tasks are aborted as the owner, its pending steps skipped.
func (ps *pass) stop(ctx context.Context, st *model.PipelineStep) error {
	why := fmt.Sprintf("step %s %s: %s", st.Name, st.State, st.Reason)
	if err := ps.s.stopSteps(ctx, ps.r, ps.s.callerAbort(ps.owner), why, model.StepAborted); err != nil {
		return err
	}
	return ps.finish(ctx, model.PipelineRunFailed, why)
}

// follow moves a queued or running step after its task. For a failed task
// with a retry left it moves nothing and returns the retry's reason: the
// caller enqueues it.
func (ps *pass) follow(ctx context.Context, st *model.PipelineStep) (string, error) {
	s, r := ps.s, ps.r
	task, err := s.k.Store.GetTask(ctx, r.TenantID, st.TaskID)
	if err != nil {
		return "", fmt.Errorf("read the task of step %s: %w", st.Name, err)
	}
	def := ps.defs[st.Name]
	var change func(*model.PipelineStep)
	switch task.Status {
	case model.TaskQueued, model.TaskPlaced:
		if st.State != model.StepQueued {
			change = func(n *model.PipelineStep) { n.State, n.Reason = model.StepQueued, task.Reason }
		}
	case model.TaskRunning:
		if st.State != model.StepRunning {
			change = func(n *model.PipelineStep) {
				n.State, n.Reason = model.StepRunning, fmt.Sprintf("task running (attempt %d)", n.Attempts)
			}
		}
	case model.TaskCompleted:
		change = func(n *model.PipelineStep) {
			n.State, n.Reason, n.FinishedAt = model.StepCompleted, "task completed", task.FinishedAt
		}
	case model.TaskFailed:
		if st.Attempts <= def.Retry {
			return fmt.Sprintf("attempt %d failed (%s); retrying, %d of %d retries", st.Attempts, task.Reason, st.Attempts, def.Retry), nil
		}
		change = func(n *model.PipelineStep) {
			n.State, n.FinishedAt = model.StepFailed, task.FinishedAt
			n.Reason = "task failed: " + task.Reason
			if def.Retry > 0 {
				n.Reason = fmt.Sprintf("task failed after %d attempts: %s", n.Attempts, task.Reason)
			}
		}
	case model.TaskAborted:
		change = func(n *model.PipelineStep) {
			n.State, n.Reason, n.FinishedAt = model.StepAborted, "task aborted: "+task.Reason, task.FinishedAt
		}
	}
	if change == nil {
		return "", nil
	}
	_, err = ps.move(ctx, st, change)
	return "", err
}

// start starts a pending step whose dependencies succeeded: from the
// cache when an earlier run's step matches, else by enqueueing its task.
func (ps *pass) start(ctx context.Context, st *model.PipelineStep) error {
	def := ps.defs[st.Name]
	if !def.CacheOn() {
		return ps.enqueue(ctx, st, "")
	}
	spec, key, err := ps.spec(ctx, st)
	if err != nil || spec == nil {
		return err
	}
	prev, err := ps.s.k.Store.FindCachedPipelineStep(ctx, ps.r.TenantID, ps.r.ProjectID, ps.r.Name, st.Name, key, ps.r.ID)
	if errors.Is(err, store.ErrNotFound) {
		return ps.enqueue(ctx, st, "")
	}
	if err != nil {
		return err
	}
	now := ps.s.k.Now()
	_, err = ps.move(ctx, st, func(n *model.PipelineStep) {
		n.State, n.TaskID, n.TaskIDs, n.CacheKey, n.CachedFromRunID = model.StepCached, prev.TaskID, []string{prev.TaskID}, key, prev.RunID
		n.Reason = fmt.Sprintf("cached: reuses task %s of run %s (same code, parameters and inputs)", prev.TaskID, prev.RunID)
		n.StartedAt, n.FinishedAt = &now, &now
	})
	return err
}

// spec fills a step's templates and digests it. A template that cannot be
// filled (a metric not reported) fails the step, and spec returns nil.
func (ps *pass) spec(ctx context.Context, st *model.PipelineStep) (*model.TaskSpec, string, error) {
	r := ps.r
	ids := map[string]string{}
	for _, o := range r.Steps {
		if o.State.Succeeded() {
			ids[o.Name] = o.TaskID
		}
	}
	spec, err := FillStep(*ps.defs[st.Name], Outputs{Params: r.Params, TaskIDs: ids,
		Metrics: func(step, name string) (float64, bool, error) {
			id := ids[step]
			if id == "" {
				return 0, false, nil
			}
			last, err := ps.s.k.Store.LastMetrics(ctx, r.TenantID, id)
			if err != nil {
				return 0, false, fmt.Errorf("read the metrics of step %s: %w", step, err)
			}
			for _, m := range last {
				if m.Name == name {
					return m.Value, true, nil
				}
			}
			return 0, false, nil
		}})
	if err != nil {
		_, merr := ps.move(ctx, st, func(n *model.PipelineStep) {
			n.State, n.Reason, n.FinishedAt = model.StepFailed, "its templates could not be filled: "+err.Error(), ptr(ps.s.k.Now())
		})
		return nil, "", merr
	}
	key, err := ps.s.cacheKey(ctx, r.TenantID, spec)
	if err != nil {
		return nil, "", err
	}
	return &spec, key, nil
}

// enqueue enqueues the step's next attempt as the run's owner. A refusal
// (the owner lost access to the compute resource, a budget) fails the
// step with the refusal's message.
func (ps *pass) enqueue(ctx context.Context, st *model.PipelineStep, why string) error {
	s, r := ps.s, ps.r
	spec, key, err := ps.spec(ctx, st)
	if err != nil || spec == nil {
		return err
	}
	attempt := st.Attempts + 1
	task, err := s.tasks.Enqueue(ps.owner, StepTask{Name: taskName(r.Name, st.Name), Project: r.ProjectID,
		ComputeResource: st.ComputeResourceID, Spec: *spec,
		IdempotencyKey: fmt.Sprintf("pipeline-%s-%s-%d", r.ID, st.Name, attempt)})
	var ke *kernel.Error
	if errors.As(err, &ke) && ke.Code != kernel.CodeInternal {
		_, err = ps.move(ctx, st, func(n *model.PipelineStep) {
			n.State, n.Reason, n.FinishedAt = model.StepFailed, "the enqueue of its task was refused: "+ke.Message, ptr(s.k.Now())
		})
		return err
	}
	if err != nil {
		return fmt.Errorf("enqueue step %s: %w", st.Name, err)
	}
	now := s.k.Now()
	moved, err := ps.move(ctx, st, func(n *model.PipelineStep) {
		n.State, n.TaskID, n.Attempts, n.CacheKey = model.StepQueued, task.ID, attempt, key
		n.TaskIDs = append(slices.Clone(n.TaskIDs), task.ID)
		if n.StartedAt == nil {
			n.StartedAt = &now
		}
		n.FinishedAt = nil
		n.Reason = fmt.Sprintf("task %s enqueued (attempt %d)", task.ID, attempt)
		if why != "" {
			n.Reason = why
		}
	}, &model.PipelineTaskLink{TenantID: r.TenantID, TaskID: task.ID, RunID: r.ID, Step: st.Name, Attempt: attempt})
	if err != nil || moved {
		return err
	}
	// Another pass moved the step first. Its task is this one when it
	// enqueued the same attempt (the idempotency key); any other is an
	// orphan, aborted here.
	cur, err := s.k.Store.GetPipelineRun(ctx, r.TenantID, r.ID)
	if err != nil {
		return err
	}
	if c := cur.Step(st.Name); c != nil && !slices.Contains(c.TaskIDs, task.ID) {
		if _, err := s.tasks.Abort(ps.owner, task.ID, "its pipeline step had moved on"); err != nil && !isConflict(err) {
			return err
		}
	}
	return nil
}

// move applies change to a step with a conditional write (the step as this
// pass read it), recording links in the same transaction, and publishes
// the run's change. It reports false, changing nothing, when another pass
// moved the step first.
func (ps *pass) move(ctx context.Context, st *model.PipelineStep, change func(*model.PipelineStep), links ...*model.PipelineTaskLink) (bool, error) {
	return ps.s.moveStep(ctx, ps.r, st, change, links...)
}

func (s *Pipelines) moveStep(ctx context.Context, r *model.PipelineRun, st *model.PipelineStep, change func(*model.PipelineStep), links ...*model.PipelineTaskLink) (bool, error) {
	n := *st
	change(&n)
	moved, err := s.asController(ctx, r, "movePipelineStep", func(t *kernel.Txn) (bool, kernel.Audit, error) {
		n.UpdatedAt = t.Now
		moved, err := t.Q.UpdatePipelineStep(ctx, r.TenantID, &n, st.State, st.Attempts)
		if err != nil || !moved {
			return false, kernel.Audit{}, err
		}
		for _, l := range links {
			if err := t.Q.LinkPipelineTask(ctx, l); err != nil {
				return false, kernel.Audit{}, err
			}
		}
		t.Publish(s.event(r, t))
		return true, kernel.Audit{}, nil
	})
	if err != nil || !moved {
		return false, err
	}
	*st = n
	return true, nil
}

// asController runs a write of the controller's pass over run r, as the
// controller: a step of the run's progress, audited only when body
// returns an entry (the run's end), its events published after commit.
func (s *Pipelines) asController(ctx context.Context, r *model.PipelineRun, name string, body func(t *kernel.Txn) (bool, kernel.Audit, error)) (bool, error) {
	return kernel.RunAs(ctx, s.k, kernel.System(r.TenantID, actor), kernel.Op[bool]{Name: name, Unaudited: true, Body: body})
}

func (s *Pipelines) event(r *model.PipelineRun, t *kernel.Txn) events.Event {
	return events.Event{TenantID: r.TenantID, Kind: EventKind, ObjectKind: ObjectKind, ObjectID: r.ID, ObjectName: r.Name,
		GroupID: r.GroupID, At: t.Now}
}

// setRun moves a running or pending run to state.
func (ps *pass) setRun(ctx context.Context, state model.PipelineRunState, reason string) error {
	r := ps.r
	_, err := ps.s.asController(ctx, r, "setPipelineRunState", func(t *kernel.Txn) (bool, kernel.Audit, error) {
		moved, err := t.Q.SetPipelineRunState(ctx, r.TenantID, r.ID, []model.PipelineRunState{model.PipelineRunPending, model.PipelineRunRunning}, state, reason, t.Now)
		if err != nil || !moved {
			return false, kernel.Audit{}, err
		}
		r.State, r.Reason = state, reason
		t.Publish(ps.s.event(r, t))
		if !state.Final() {
			return true, kernel.Audit{}, nil
		}
		return true, kernel.Audit{Action: "pipeline_run." + string(state), Kind: ObjectKind, ID: r.ID, Name: r.Name, GroupID: r.GroupID,
			Detail: fmt.Sprintf("pipeline %s %s: %s", kernel.Quote(r.Name), state, reason)}, nil
	})
	return err
}

func (ps *pass) finish(ctx context.Context, state model.PipelineRunState, reason string) error {
	return ps.setRun(ctx, state, reason)
}

// abortFunc aborts a task through the platform's abort path.
type abortFunc func(id, why string) error

// callerAbort aborts as the caller of actx (a user aborting the run, or
// the controller acting as the run's owner).
func (s *Pipelines) callerAbort(actx context.Context) abortFunc {
	return func(id, why string) error {
		_, err := s.tasks.Abort(actx, id, why)
		return err
	}
}

// systemAbort aborts on the control plane's own authority.
func (s *Pipelines) systemAbort(ctx context.Context, r *model.PipelineRun) abortFunc {
	return func(id, why string) error {
		_, err := s.tasks.AbortAsSystem(ctx, r.TenantID, id, actor, why)
		return err
	}
}

// stopSteps ends a run's steps: queued and running ones have their task
// aborted (a step whose task completed meanwhile is completed), pending
// ones are skipped.
func (s *Pipelines) stopSteps(ctx context.Context, r *model.PipelineRun, abort abortFunc, why string, active model.PipelineStepState) error {
	for _, st := range r.Steps {
		switch st.State {
		case model.StepQueued, model.StepRunning:
			if err := abort(st.TaskID, why); err != nil && !isConflict(err) {
				return fmt.Errorf("abort the task of step %s: %w", st.Name, err)
			}
			task, err := s.k.Store.GetTask(ctx, r.TenantID, st.TaskID)
			if err != nil {
				return err
			}
			if _, err := s.moveStep(ctx, r, st, func(n *model.PipelineStep) {
				n.FinishedAt = task.FinishedAt
				if task.Status == model.TaskCompleted {
					n.State, n.Reason = model.StepCompleted, "task completed"
					return
				}
				n.State, n.Reason = active, why
			}); err != nil {
				return err
			}
		case model.StepPending:
			if _, err := s.moveStep(ctx, r, st, func(n *model.PipelineStep) {
				n.State, n.Reason, n.FinishedAt = model.StepSkipped, "skipped: "+why, ptr(s.k.Now())
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func isConflict(err error) bool {
	var ke *kernel.Error
	return errors.As(err, &ke) && ke.Code == kernel.CodeConflict
}

func ptr[T any](v T) *T { return &v }
