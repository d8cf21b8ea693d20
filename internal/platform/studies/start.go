package studies

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

// StartInput is a study to start.
type StartInput struct {
	Name string
	// BaseTask is the id of the run every trial clones; the caller must
	// see it.
	BaseTask string
	// Project, ComputeResource and Group say where the trials go; the
	// base task's project and compute resource when empty.
	Project         string
	ComputeResource string
	Group           string
	Spec            model.StudySpec
	// IdempotencyKey, when set, makes a second start with it return the
	// study the first one started (kernel.Idempotency), recorded in the
	// study's own transaction: a schedule's firing, tried again by
	// another replica or after a crash, starts one study.
	IdempotencyKey string `json:"-"`
}

// StartStudy checks a study and starts it: its first trials are enqueued at
// once, as the caller, and the controller runs the rest. Every refusal
// (an empty space, lo >= hi, a missing budget, a compute resource not
// open to the caller) comes before anything is written. A retry with the
// first start's idempotency key answers its study and runs no pass.
func (s *Studies) StartStudy(ctx context.Context, in StartInput) (*model.Study, error) {
	var plan *startPlan
	replayed := false
	st, err := kernel.Run(ctx, s.k, kernel.Op[*model.Study]{
		Name: "startStudy", Right: kernel.RightWrite, What: "start studies",
		IdempotencyKey: in.IdempotencyKey, Request: in,
		ResultID: func(st *model.Study) string { return st.ID },
		Replay: func(ctx context.Context, id string) (*model.Study, error) {
			replayed = true
			return s.Study(ctx, id)
		},
		Prepare: func(p *identity.Principal) (err error) {
			plan, err = s.plan(ctx, p, in)
			return err
		},
		Body: func(t *kernel.Txn) (*model.Study, kernel.Audit, error) {
			st := plan.study(t)
			if err := t.Q.CreateStudy(ctx, st); err != nil {
				return nil, kernel.Audit{}, fmt.Errorf("start study %s: %w", st.Name, err)
			}
			return st, kernel.Audit{Action: "study.started", Kind: "study", ID: st.ID, Name: st.Name, GroupID: st.GroupID,
				Detail: fmt.Sprintf("%s search of %s over %s from task %s on compute resource %s",
					st.Spec.Strategy, st.Spec.Objective, paramNames(st.Spec.Space), kernel.Quote(plan.base.Name), kernel.Quote(plan.res.Name))}, nil
		},
	})
	if err != nil || replayed {
		return st, err
	}
	// The first trials go now, so a refusal of the owner's work shows at
	// once; the controller's passes run the rest.
	if err := s.reconcile(ctx, st.TenantID, st.ID); err != nil {
		s.k.Log.Warn("study: first pass", "study", st.ID, "err", err)
	}
	return s.Study(ctx, st.ID)
}

// startPlan is a checked start: the input, the base task it clones and
// where its trials go.
type startPlan struct {
	in    StartInput
	base  *model.Task
	pr    *model.Project
	res   *model.ComputeResource
	group string
}

// study is the study the plan starts, as the caller of t starts it.
func (pl *startPlan) study(t *kernel.Txn) *model.Study {
	return &model.Study{ID: model.NewID(), TenantID: t.P.TenantID, ProjectID: pl.pr.ID, OwnerID: t.P.UserID, GroupID: pl.group,
		ComputeResourceID: pl.res.ID, Name: pl.in.Name, BaseTaskID: pl.base.ID, Spec: pl.in.Spec, State: model.StudyRunning,
		CreatedAt: t.Now, UpdatedAt: t.Now}
}

// plan checks a start whole before anything is written: the name, the
// base task (a run the caller sees), the search and where the trials go.
func (s *Studies) plan(ctx context.Context, p *identity.Principal, in StartInput) (*startPlan, error) {
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len(in.Name) > 100 {
		return nil, kernel.Invalid("give the study a name of 1 to 100 characters")
	}
	if strings.TrimSpace(in.BaseTask) == "" {
		return nil, kernel.Invalid("say which run the trials clone (the base task's id)")
	}
	base, err := s.k.Task(ctx, strings.TrimSpace(in.BaseTask))
	if err != nil {
		return nil, err
	}
	if base.Spec.Kind == model.TaskKindApplication {
		return nil, kernel.Invalid("task %s is an app instance: a study clones a run", kernel.Quote(base.Name))
	}
	ps := Normalize(&in.Spec, s.d.Direction)
	ps = append(ps, fixedProblems(in.Spec)...)
	if len(ps) > 0 {
		return nil, &kernel.Error{Code: kernel.CodeInvalid, Message: "study " + kernel.Quote(in.Name) + ": " + strings.Join(ps, "; "), Problems: ps}
	}
	project, cr, group := in.Project, in.ComputeResource, in.Group
	if project == "" {
		project = base.ProjectID
	}
	if cr == "" {
		cr = base.ComputeResourceID
	}
	pr, res, err := s.d.Target(ctx, project, cr, group)
	if err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	pol := e.Policy(res.PolicyID)
	if pol == nil {
		return nil, kernel.NotFound("no compute resource %s is open to you", kernel.Quote(cr))
	}
	return &startPlan{in: in, base: base, pr: pr, res: res, group: pol.GroupID}, nil
}

func paramNames(space []model.SearchParam) string {
	names := make([]string, len(space))
	for i, p := range space {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// sees reports whether p may see a study: as a task of its owner, group
// and project would be seen.
func sees(p *identity.Principal, st *model.Study) bool {
	return p.TenantID == st.TenantID && kernel.SeesTask(p, &model.Task{OwnerID: st.OwnerID, GroupID: st.GroupID, ProjectID: st.ProjectID})
}

// Study returns a study the caller may see; another tenant's, or one the
// caller may not see, is not found.
func (s *Studies) Study(ctx context.Context, id string) (*model.Study, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.k.Store.GetStudy(ctx, p.TenantID, strings.TrimSpace(id))
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sees(p, st)) {
		return nil, kernel.NotFound("no study %s", kernel.Quote(id))
	}
	return st, s.k.Internal(ctx, err)
}

// Studies lists the studies the caller may see, of a project (an id or
// name) when one is given, newest first.
func (s *Studies) Studies(ctx context.Context, project string) ([]*model.Study, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	projectID := ""
	if project = strings.TrimSpace(project); project != "" {
		e, err := s.k.TenantEstate(ctx, p)
		if err != nil {
			return nil, err
		}
		pr, err := kernel.FindProject(e, project)
		if err != nil {
			return nil, err
		}
		projectID = pr.ID
	}
	all, err := s.k.Store.ListStudies(ctx, p.TenantID, projectID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	out := []*model.Study{}
	for _, st := range all {
		if sees(p, st) {
			out = append(out, st)
		}
	}
	return out, nil
}

// StopStudy stops a running study: no more trials start, and its running
// trials are aborted with the reason. Its owner, a lead of its group or an
// admin may stop it, as they may abort its tasks.
func (s *Studies) StopStudy(ctx context.Context, id, reason string) (*model.Study, error) {
	e := &ending{state: model.StudyStopped}
	op := s.endOp("stopStudy", e)
	op.Check = func(*identity.Principal) error {
		if len(reason) > 500 {
			return kernel.Invalid("the reason is longer than 500 characters")
		}
		return nil
	}
	op.Prepare = func(p *identity.Principal) error {
		st, err := s.Study(ctx, id)
		if err != nil {
			return err
		}
		if !kernel.MayAbort(p, &model.Task{OwnerID: st.OwnerID, GroupID: st.GroupID, ProjectID: st.ProjectID}) {
			return kernel.Forbidden("only the study's owner, a lead of its group or an admin can stop study %s", kernel.Quote(st.Name))
		}
		e.st, e.why = st, "stopped by "+p.UserName
		if r := strings.TrimSpace(reason); r != "" {
			e.why += ": " + r
		}
		return nil
	}
	st, err := kernel.Run(ctx, s.k, op)
	if err != nil {
		return nil, err
	}
	s.stopTasks(ctx, st, e.running)
	return st, nil
}

// end ends a study as p (the controller's system actor) and aborts its
// trials' tasks.
func (s *Studies) end(ctx context.Context, p *identity.Principal, st *model.Study, state model.StudyState, why string) (*model.Study, error) {
	e := &ending{st: st, state: state, why: why}
	st, err := kernel.RunAs(ctx, s.k, p, s.endOp("endStudy", e))
	if err != nil {
		return nil, err
	}
	s.stopTasks(ctx, st, e.running)
	return st, nil
}

// ending is the end of a study: which (the version read), in what state
// and why; running is filled with the trials' tasks to abort once it has
// committed.
type ending struct {
	st      *model.Study
	state   model.StudyState
	why     string
	running []stopOrder
}

// endOp ends e's study and aborts its trials that have not ended, each
// with the study's reason.
func (s *Studies) endOp(name string, e *ending) kernel.Op[*model.Study] {
	return kernel.Op[*model.Study]{Name: name, Right: kernel.RightRead, What: "stop studies",
		Body: func(t *kernel.Txn) (*model.Study, kernel.Audit, error) {
			st := e.st
			cur, err := t.Q.GetStudy(t.Ctx, st.TenantID, st.ID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if cur.State.Final() {
				return nil, kernel.Audit{}, kernel.Conflict("study %s has already ended (%s)", kernel.Quote(cur.Name), cur.State)
			}
			trials, err := t.Q.ListStudyTrials(t.Ctx, st.TenantID, st.ID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			now := t.Now
			for _, tr := range trials {
				if tr.State.Final() {
					continue
				}
				tr.State, tr.Reason, tr.EndedAt = model.TrialAborted, e.why, &now
				if err := t.Q.UpdateStudyTrial(t.Ctx, tr); err != nil {
					return nil, kernel.Audit{}, err
				}
				if tr.TaskID != "" {
					e.running = append(e.running, stopOrder{tr, e.why})
				}
			}
			cur.State, cur.Reason, cur.UpdatedAt, cur.FinishedAt = e.state, e.why, now, &now
			if err := t.Q.UpdateStudy(t.Ctx, cur); err != nil {
				if errors.Is(err, store.ErrConflict) {
					return nil, kernel.Audit{}, kernel.Conflict("study %s changed meanwhile: try again", kernel.Quote(cur.Name))
				}
				return nil, kernel.Audit{}, err
			}
			return cur, kernel.Audit{Action: "study." + string(e.state), Kind: "study", ID: cur.ID, Name: cur.Name, GroupID: cur.GroupID, Detail: e.why}, nil
		}}
}

// stopTasks aborts trials' tasks on the study's authority; one that ended
// meanwhile is left as it ended.
func (s *Studies) stopTasks(ctx context.Context, st *model.Study, orders []stopOrder) {
	for _, o := range orders {
		if o.Trial.TaskID == "" {
			continue
		}
		if _, err := s.d.Stop(ctx, st.TenantID, o.Trial.TaskID, actor(st), o.Reason); err != nil && kernel.ErrorCode(err) != kernel.CodeConflict {
			s.k.Log.Warn("study: stop a trial's task", "study", st.ID, "trial", o.Trial.Number, "task", o.Trial.TaskID, "err", err)
		}
	}
}

// actor is the study as the audit trail names it when it acts.
func actor(st *model.Study) string { return "study " + st.Name }
