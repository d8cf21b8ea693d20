package pipelines

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// RunInput starts a run: a definition (YAML or JSON text, or already
// read), the run's parameter values, and optionally the project, which
// overrides the definition's.
type RunInput struct {
	Definition string
	Def        *model.PipelineDefinition
	Params     map[string]string
	Project    string
	// IdempotencyKey, when set, makes a second start with it return the
	// run the first one started (kernel.Idempotency): a schedule's
	// firing, tried again by another replica or after a crash, starts one
	// run.
	IdempotencyKey string `json:"-"`
}

// StartRun checks a pipeline whole and starts a run of it as the caller:
// every problem (an unknown step or parameter reference, a cycle, a bad
// template, a compute resource the caller may not use, a step spec the
// enqueue path would refuse) is reported before anything is written. The
// controller then enqueues the steps whose dependencies are done.
func (s *Pipelines) StartRun(ctx context.Context, in RunInput) (*model.PipelineRun, error) {
	var def *model.PipelineDefinition
	var plan *Plan
	var checked []*model.Task
	return kernel.Run(ctx, s.k, kernel.Op[*model.PipelineRun]{
		Name: "runPipeline", Right: kernel.RightWrite, What: "run pipelines",
		// The definition is held to its budget first, before anything reads
		// it whole (the idempotency key's hash of the input included).
		Check: func(*identity.Principal) (err error) {
			def, err = budgeted(in)
			return err
		},
		IdempotencyKey: in.IdempotencyKey, Request: in,
		ResultID: func(run *model.PipelineRun) string { return run.ID },
		Replay:   s.PipelineRun,
		Prepare: func(*identity.Principal) (err error) {
			plan, checked, err = s.check(ctx, in, def)
			return err
		},
		Body: func(t *kernel.Txn) (*model.PipelineRun, kernel.Audit, error) {
			run := newRun(t, def, plan, checked)
			if err := t.Q.CreatePipelineRun(ctx, run); err != nil {
				return nil, kernel.Audit{}, fmt.Errorf("start pipeline run %s: %w", def.Name, err)
			}
			return run, kernel.Audit{Action: "pipeline_run.started", Kind: ObjectKind, ID: run.ID, Name: run.Name, GroupID: run.GroupID,
				Detail: fmt.Sprintf("started pipeline %s with %d steps", kernel.Quote(run.Name), len(run.Steps))}, nil
		},
	})
}

// budgeted is the run's definition, parsed and held to its budget.
func budgeted(in RunInput) (*model.PipelineDefinition, error) {
	if in.Def == nil {
		def, err := ParseDefinition(in.Definition)
		if err != nil {
			return nil, kernel.Invalid("%v", err)
		}
		return def, nil
	}
	if err := Budget.Check(DefinitionUsage(in.Def)); err != nil {
		return nil, kernel.Invalid("%v", err)
	}
	return in.Def, nil
}

// check checks the definition whole, each step as the enqueue path would
// check its task, and reports every problem at once.
func (s *Pipelines) check(ctx context.Context, in RunInput, def *model.PipelineDefinition) (*Plan, []*model.Task, error) {
	if in.Project != "" {
		def.Project = in.Project
	}
	plan, ps := Check(def, in.Params)
	if len(ps) > 0 {
		return plan, nil, invalid(def.Name, ps)
	}
	checked := make([]*model.Task, len(def.Steps))
	for i, st := range def.Steps {
		t, err := s.tasks.Check(ctx, StepTask{Name: taskName(def.Name, st.Name), Project: def.Project,
			ComputeResource: st.ComputeResource, Group: st.Group, Spec: placeholderSpec(def, st, plan.Params)})
		if err != nil {
			ps = append(ps, fmt.Sprintf("step %q: %s", st.Name, message(err)))
			continue
		}
		checked[i] = t
	}
	if len(ps) > 0 {
		return plan, nil, invalid(def.Name, ps)
	}
	return plan, checked, nil
}

// newRun is the run of def as the caller of t starts it: pending, each
// step waiting for the steps it depends on.
func newRun(t *kernel.Txn, def *model.PipelineDefinition, plan *Plan, checked []*model.Task) *model.PipelineRun {
	p := t.P
	run := &model.PipelineRun{ID: model.NewID(), TenantID: p.TenantID, ProjectID: checked[0].ProjectID, GroupID: checked[0].GroupID,
		OwnerID: p.UserID, Name: def.Name, Definition: *def, Params: plan.Params, State: model.PipelineRunPending,
		Reason: "waiting for the controller to enqueue its first steps", CreatedAt: t.Now, UpdatedAt: t.Now}
	run.Steps = make([]*model.PipelineStep, len(def.Steps))
	for i, st := range def.Steps {
		run.Steps[i] = &model.PipelineStep{Name: st.Name, Position: i, State: model.StepPending,
			ComputeResourceID: checked[i].ComputeResourceID, TaskIDs: []string{}, UpdatedAt: t.Now,
			Reason: waitingFor(plan.Deps[st.Name])}
	}
	return run
}

// RerunPipeline starts a new run with the definition of an earlier run the
// caller sees, its parameters overridden by params. It is what a schedule
// starts.
func (s *Pipelines) RerunPipeline(ctx context.Context, runID string, params map[string]string, key string) (*model.PipelineRun, error) {
	old, err := s.PipelineRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	def := old.Definition
	def.Project = old.ProjectID
	vals := map[string]string{}
	for k, v := range old.Params {
		vals[k] = v
	}
	for k, v := range params {
		vals[k] = v
	}
	return s.StartRun(ctx, RunInput{Def: &def, Params: vals, IdempotencyKey: key})
}

func invalid(name string, ps []string) error {
	return &kernel.Error{Code: kernel.CodeInvalid, Message: "pipeline " + kernel.Quote(name) + ": " + strings.Join(ps, "; "), Problems: ps}
}

// message is an error's text for people.
func message(err error) string {
	var ke *kernel.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func waitingFor(deps []string) string {
	if len(deps) == 0 {
		return "waiting for the controller"
	}
	return "waiting for " + strings.Join(deps, ", ")
}

// taskName is the name of a step's task: the pipeline's and the step's.
func taskName(pipeline, step string) string { return pipeline + "/" + step }

// placeholderSpec is a step's spec with its templates filled by stand-ins
// (parameters by their values, metrics by 0, artifacts by their names),
// so the enqueue path can check it before the run starts.
func placeholderSpec(def *model.PipelineDefinition, st model.PipelineStepDef, params map[string]string) model.TaskSpec {
	ids := map[string]string{}
	for _, o := range def.Steps {
		ids[o.Name] = "00000000-0000-0000-0000-000000000000"
	}
	spec, err := FillStep(st, Outputs{Params: params, TaskIDs: ids,
		Metrics: func(string, string) (float64, bool, error) { return 0, true, nil }})
	if err != nil {
		return st.Spec
	}
	return spec
}

// PipelineRun returns a run the caller may see, with its steps.
func (s *Pipelines) PipelineRun(ctx context.Context, id string) (*model.PipelineRun, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.k.Store.GetPipelineRun(ctx, p.TenantID, strings.TrimSpace(id))
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sees(p, r)) {
		return nil, kernel.NotFound("no pipeline run %s", kernel.Quote(id))
	}
	return r, s.k.Internal(ctx, err)
}

// RunFilter narrows a list of runs; Project is an id or name.
type RunFilter struct {
	Project string
	Name    string
	States  []model.PipelineRunState
}

// PipelineRuns lists the runs the caller may see, newest first.
func (s *Pipelines) PipelineRuns(ctx context.Context, f RunFilter, page model.Page) ([]*model.PipelineRun, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	sf := store.PipelineRunFilter{Name: f.Name, States: f.States}
	for _, st := range f.States {
		if !st.Valid() {
			return nil, kernel.Invalid("pipeline run state %q is not known: use pending, running, completed, failed or aborted", st)
		}
	}
	if !p.IsAdmin() {
		sf.RestrictToGroups, sf.GroupIDs, sf.VisibleToUserID = true, p.GroupIDs(), p.UserID
	}
	sf.ProjectID = p.ProjectID
	if f.Project != "" {
		e, err := s.k.Estate(ctx)
		if err != nil {
			return nil, err
		}
		pr, err := kernel.FindProject(e, f.Project)
		if err != nil {
			return nil, err
		}
		if sf.ProjectID != "" && sf.ProjectID != pr.ID {
			return []*model.PipelineRun{}, nil
		}
		sf.ProjectID = pr.ID
	}
	if page.Limit <= 0 || page.Limit > 500 {
		page.Limit = 100
	}
	rs, err := s.k.Store.ListPipelineRuns(ctx, p.TenantID, sf, page)
	return rs, s.k.Internal(ctx, err)
}

// AbortPipelineRun aborts a run: its queued and running steps' tasks are
// aborted through the platform's abort path (as the caller), its pending
// steps are skipped, and the run ends aborted.
func (s *Pipelines) AbortPipelineRun(ctx context.Context, id, reason string) (*model.PipelineRun, error) {
	var r *model.PipelineRun
	var why string
	_, err := kernel.Run(ctx, s.k, kernel.Op[struct{}]{
		Name: "abortPipelineRun", Right: kernel.RightRead, What: "abort pipeline runs",
		Check: func(*identity.Principal) error {
			if len(reason) > 500 {
				return kernel.Invalid("the reason is longer than 500 characters")
			}
			return nil
		},
		Prepare: func(p *identity.Principal) (err error) {
			if r, err = s.PipelineRun(ctx, id); err != nil {
				return err
			}
			if !mayAbort(p, r) {
				return kernel.Forbidden("only the run's owner, a lead of its group or an admin can abort pipeline run %s", kernel.Quote(r.Name))
			}
			if r.State.Final() {
				return kernel.Conflict("pipeline run %s has already ended (%s)", kernel.Quote(r.Name), r.State)
			}
			why = "aborted by " + p.UserName
			if rs := strings.TrimSpace(reason); rs != "" {
				why += ": " + rs
			}
			return nil
		},
		Body: func(t *kernel.Txn) (struct{}, kernel.Audit, error) {
			moved, err := t.Q.SetPipelineRunState(ctx, r.TenantID, r.ID, []model.PipelineRunState{model.PipelineRunPending, model.PipelineRunRunning},
				model.PipelineRunAborted, why, t.Now)
			if err == nil && !moved {
				err = kernel.Conflict("pipeline run %s has already ended", kernel.Quote(r.Name))
			}
			return struct{}{}, kernel.Audit{Action: "pipeline_run.aborted", Kind: ObjectKind, ID: r.ID, Name: r.Name, GroupID: r.GroupID, Detail: why}, err
		},
	})
	if err != nil {
		return nil, err
	}
	if err := s.stopSteps(ctx, r, s.callerAbort(ctx), "pipeline run "+why, model.StepAborted); err != nil {
		return nil, err
	}
	return s.PipelineRun(ctx, r.ID)
}

// PipelineStepOfTask says which run's step made a task the caller sees
// (nil when none did).
func (s *Pipelines) PipelineStepOfTask(ctx context.Context, t *model.Task) (*model.PipelineTaskLink, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !kernel.SeesTask(p, t) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(t.ID))
	}
	l, err := s.k.Store.GetPipelineTaskLink(ctx, p.TenantID, t.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return l, s.k.Internal(ctx, err)
}

// asOwner returns a context acting as the run's owner, as their own
// credential would (their groups as they are now).
func (s *Pipelines) asOwner(ctx context.Context, r *model.PipelineRun) (context.Context, error) {
	p, err := identity.LoadPrincipal(ctx, s.k.Store, r.TenantID, r.OwnerID)
	if err != nil {
		return nil, fmt.Errorf("act as the owner of pipeline run %s: %w", r.Name, err)
	}
	return identity.WithPrincipal(ctx, p), nil
}
