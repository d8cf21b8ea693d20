package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// EnqueueInput is a task to send to a compute resource.
type EnqueueInput struct {
	Name string
	// Project is a project id or name; it may be left empty when the
	// caller's credential is scoped to a project.
	Project string
	// ComputeResource is a compute resource id or name. Names are shared
	// between groups ("1 GPU"); Group says which one when the caller is in
	// several groups that have it.
	ComputeResource string
	Group           string
	Spec            model.TaskSpec
	// Tags label the task (ValidateTags); a clone keeps its original's.
	Tags []string
	// IdempotencyKey, when set, makes a retry of this request return the
	// task the first one created (kernel.Idempotency). The request's
	// Idempotency-Key header is used when it is empty.
	IdempotencyKey string `json:"-"`
	// seenComputeResource is set when ComputeResource is the id of the
	// task being cloned, which the caller can see: a refusal may name it.
	seenComputeResource bool
	// id and prepare are an application's (EnqueueApplication).
	id      string
	prepare PrepareFunc
	// local is the local run being sent to the compute resource
	// (ExecuteRemotely): the task keeps its id and record instead of a
	// new one being created.
	local *model.Task
}

// PrepareFunc writes the spec of an application once its compute resource
// is resolved and open to the caller, inside the enqueue's transaction: it
// checks the apps domain's rules that depend on the group (quotas) and
// renders the app for the profile's size.
type PrepareFunc func(t *kernel.Txn, e *estate.Estate, cr *model.ComputeResource, size model.Size) (model.TaskSpec, error)

// EnqueueApplication enqueues an app instance: a task with the given id
// whose spec prepare writes. It goes through the same checks, compute
// resources, policies and audit as any task. request is the launch as the
// caller sent it, which the request's idempotency key is recorded with.
func (s *Tasks) EnqueueApplication(ctx context.Context, in EnqueueInput, id string, prepare PrepareFunc, request any) (*model.Task, error) {
	in.id, in.prepare = id, prepare
	return s.enqueue(ctx, in, nil, "launchApp", request)
}

// EnqueueTask puts a task at the back of a compute resource the caller may
// use. The task waits there, in queue order, for the engine to place it.
func (s *Tasks) EnqueueTask(ctx context.Context, in EnqueueInput) (*model.Task, error) {
	return s.enqueue(ctx, in, nil, "enqueueTask", in)
}

// enqueue writes a new task; clonedFrom, when set, is the task it was cloned
// from, recorded in the same transaction. operation and request are what
// the idempotency key of the request (if any) is recorded with.
func (s *Tasks) enqueue(ctx context.Context, in EnqueueInput, clonedFrom *model.Task, operation string, request any) (*model.Task, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*model.Task]{
		Name: operation, Right: kernel.RightWrite, What: "enqueue tasks",
		IdempotencyKey: in.IdempotencyKey, Request: request,
		ResultID: func(task *model.Task) string { return task.ID },
		Replay:   s.k.Task,
		// The input's own checks are skipped on a retry, which answers
		// the first task.
		Prepare: func(p *identity.Principal) (err error) {
			in, err = checkEnqueueInput(p, in)
			return err
		},
		Body: func(t *kernel.Txn) (*model.Task, kernel.Audit, error) {
			task, detail, err := s.writeTask(t, in, clonedFrom)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			return task, kernel.Audit{Action: "task.enqueued", Kind: "task", ID: task.ID, Name: task.Name, GroupID: task.GroupID, Detail: detail}, nil
		},
	})
}

// checkEnqueueInput checks what an enqueue can check of its input alone
// (a local run sent on is its owner's, still local), and returns it
// normalised.
func checkEnqueueInput(p *identity.Principal, in EnqueueInput) (EnqueueInput, error) {
	if in.local != nil {
		if err := mayReportLocally(p, in.local, "send"); err != nil {
			return in, err
		}
	}
	in.Spec = normalizeSpec(in.Spec)
	// An application's spec is written by prepare, and checked then.
	tags, err := ValidateTags(in.Tags)
	if err != nil {
		return in, kernel.Invalid("task %s: %v", kernel.Quote(in.Name), err)
	}
	in.Tags = tags
	if ps := ValidateTaskSpec(in.Name, &in.Spec); len(ps) > 0 && in.prepare == nil {
		return in, &kernel.Error{Code: kernel.CodeInvalid, Message: "task " + kernel.Quote(in.Name) + ": " + strings.Join(ps, "; "), Problems: ps}
	}
	return in, nil
}

// writeTask writes an enqueue's task in t, once it is resolved and
// checked against the estate under the tenant's shared lock, and returns
// it with the detail of its audit entry.
func (s *Tasks) writeTask(t *kernel.Txn, in EnqueueInput, clonedFrom *model.Task) (*model.Task, string, error) {
	// The shared lock keeps the allocation model from changing until
	// the task is written, while other enqueues go on together.
	if err := t.Q.LockTenantShared(t.Ctx, t.P.TenantID); err != nil {
		return nil, "", err
	}
	e, err := s.k.CurrentEstate(t.Ctx, t.Q, t.P.TenantID)
	if err != nil {
		return nil, "", err
	}
	task, err := s.newTask(t, e, in)
	if err != nil {
		return nil, "", err
	}
	if err := checkTaskSecrets(t.Ctx, t.Q, e, task); err != nil {
		return nil, "", err
	}
	if err := s.checkInputs(t, task); err != nil {
		return nil, "", err
	}
	detail := ""
	if clonedFrom != nil {
		task.ClonedFromID = clonedFrom.ID
		detail = fmt.Sprintf(", cloned from task %s (%s)", kernel.Quote(clonedFrom.Name), clonedFrom.ID)
	}
	if err := s.writeEnqueued(t, in.local, task); err != nil {
		return nil, "", err
	}
	if in.local != nil {
		detail += ", from its local run"
	}
	cr := e.ComputeResource(task.ComputeResourceID)
	return task, fmt.Sprintf("enqueued on compute resource %s of group %s, size %s, in project %s%s",
		kernel.Quote(cr.Name), e.GroupName(task.GroupID), task.Size, e.Project(task.ProjectID).Name, detail), nil
}

// writeEnqueued writes an enqueued task: a new one, or a local run
// moved onto its compute resource (which must still be local).
func (s *Tasks) writeEnqueued(t *kernel.Txn, local, task *model.Task) error {
	if local == nil {
		if err := t.Q.CreateTask(t.Ctx, task); err != nil {
			return fmt.Errorf("enqueue task %s: %w", task.Name, err)
		}
		return nil
	}
	task.ID, task.CreatedAt, task.ClonedFromID, task.Run = local.ID, local.CreatedAt, local.ClonedFromID, model.TaskRun{}
	err := t.Q.UpdateLocalRun(t.Ctx, task)
	if errors.Is(err, store.ErrConflict) {
		return kernel.Conflict("task %s is no longer running locally: it was ended or sent to a compute resource already", kernel.Quote(task.Name))
	}
	if err != nil {
		return fmt.Errorf("send local run %s to a compute resource: %w", task.Name, err)
	}
	return nil
}

func normalizeSpec(s model.TaskSpec) model.TaskSpec {
	s.Repository = strings.TrimSpace(s.Repository)
	s.Commit = strings.TrimSpace(s.Commit)
	s.EntryPoint = strings.TrimSpace(s.EntryPoint)
	s.WorkingDir = strings.TrimSpace(s.WorkingDir)
	s.Image = strings.TrimSpace(s.Image)
	return s
}

// newTask resolves the project and compute resource of an enqueue, checks
// that the caller may use them and that the task's size fits the group's
// limit and some pool of its profile, and returns the task to write.
func (s *Tasks) newTask(t *kernel.Txn, e *estate.Estate, in EnqueueInput) (*model.Task, error) {
	p := t.P
	project, err := resolveProject(p, e, in.Project)
	if err != nil {
		return nil, err
	}
	cr, err := resolveComputeResource(p, e, in.ComputeResource, in.Group, in.seenComputeResource)
	if err != nil {
		return nil, err
	}
	pol := e.Policy(cr.PolicyID)
	pr := e.Profile(cr.ProfileID)
	group := e.GroupName(pol.GroupID)
	if project.GroupID != "" && project.GroupID != pol.GroupID {
		return nil, kernel.Forbidden("project %s belongs to group %s, and compute resource %s is group %s's; use a compute resource of group %s",
			kernel.Quote(project.Name), e.GroupName(project.GroupID), kernel.Quote(cr.Name), group, e.GroupName(project.GroupID))
	}
	if in.prepare != nil {
		if in.Spec, err = in.prepare(t, e, cr, pr.Size); err != nil {
			return nil, err
		}
		if ps := ValidateTaskSpec(in.Name, &in.Spec); len(ps) > 0 {
			return nil, kernel.Invalid("app instance %s: %s", kernel.Quote(in.Name), strings.Join(ps, "; "))
		}
	}
	size, err := TaskSize(pr, &in.Spec)
	if err != nil {
		return nil, kernel.Invalid("task %s: %v", kernel.Quote(in.Name), err)
	}
	// A limit of 0 pauses the group: its work is accepted and waits until
	// the limit is raised, as the engine keeps it (docs/engine.md).
	if pol.LimitGPUs > 0 && size.Total() > model.GPUs(pol.LimitGPUs) {
		return nil, kernel.Invalid("task %s asks for %s GPUs, more than group %s's limit of %d GPUs; ask for fewer",
			kernel.Quote(in.Name), size.Total(), group, pol.LimitGPUs)
	}
	// A size read from the task's parameter is held to the pool-kind rule
	// estate validation holds a profile's own size to: multi-node work only
	// on pools whose scheduler places a gang.
	if why := noPoolCanRun(e, pr, size); why != "" {
		return nil, kernel.Invalid("task %s asks for %s GPUs, and %s; ask for one node, or ask an admin to add such a pool to the profile",
			kernel.Quote(in.Name), size, why)
	}
	// Work no pool of the profile can hold would wait for ever at the head
	// of its queue and hold everything behind it. (A profile whose pools
	// all declare 0 GPUs is closed, not small: its work waits, as the
	// engine's does.)
	if pool := largestPool(e, pr, size); pool != nil && size.Total() > model.GPUs(pool.CapacityGPUs) {
		return nil, kernel.Invalid("task %s asks for %s GPUs, more than any pool of profile %s declares: the largest, %s, declares %d GPUs; ask for at most %d",
			kernel.Quote(in.Name), size.Total(), pr.Name, pool.Name, pool.CapacityGPUs, pool.CapacityGPUs)
	}
	id := in.id
	if id == "" {
		id = model.NewID()
	}
	return &model.Task{
		ID: id, TenantID: p.TenantID, ProjectID: project.ID, OwnerID: p.UserID,
		ComputeResourceID: cr.ID, PolicyID: pol.ID, ProfileID: pr.ID, GroupID: pol.GroupID,
		Name: in.Name, Spec: in.Spec, Tags: in.Tags, Size: size, Status: model.TaskQueued, Reason: "waiting for the engine to place it",
		CreatedAt: t.Now, UpdatedAt: t.Now,
	}, nil
}

func resolveProject(p *identity.Principal, e *estate.Estate, ref string) (*model.Project, error) {
	if ref == "" {
		pr := kernel.DefaultProject(e, p)
		if pr == nil {
			// The project field is the input's on GraphQL and MCP; the CLI
			// names its own flag instead (the error's reason).
			return nil, kernel.ProjectRequired("the task belongs to")
		}
		ref = pr.ID
	}
	pr, err := kernel.FindProject(e, ref)
	if err != nil {
		return nil, err
	}
	if !p.IsAdmin() && pr.GroupID != "" && !p.InGroup(pr.GroupID) {
		// A project of a group the caller is not in is one they may not
		// know of: the refusal is the one for a project that does not
		// exist, and names neither the project (the caller may have given
		// its id) nor its group.
		return nil, kernel.NotFound("no project %s", kernel.Quote(ref))
	}
	if p.ProjectID != "" && pr.ID != p.ProjectID {
		return nil, kernel.Forbidden("this credential is scoped to another project and cannot put work in project %s", kernel.Quote(pr.Name))
	}
	if !kernel.UsesProject(p, pr) {
		return nil, kernel.NotFound("no project %s", kernel.Quote(ref))
	}
	return pr, nil
}

// resolveComputeResource finds the compute resource a caller means. By id it
// must be open to the caller; by name, it is the one of the caller's groups
// with that name (or of the group given).
func resolveComputeResource(p *identity.Principal, e *estate.Estate, ref, groupRef string, seen bool) (*model.ComputeResource, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, kernel.Invalid("say which compute resource to send the task to")
	}
	open := func(cr *model.ComputeResource) bool {
		pol := e.Policy(cr.PolicyID)
		return pol != nil && (p.IsAdmin() || p.InGroup(pol.GroupID))
	}
	if cr := e.ComputeResource(ref); cr != nil {
		if !open(cr) && seen {
			return nil, kernel.Forbidden("the compute resource %s is not open to %s", kernel.Quote(cr.Name), kernel.GroupNames(p))
		}
		if !open(cr) {
			// By id, another group's compute resource is one that does not
			// exist: its name and group are not the caller's to learn.
			return nil, kernel.NotFound("no compute resource %s is open to you; list yours with 'klique get computeresources'", kernel.Quote(ref))
		}
		return cr, nil
	}
	var group *model.Group
	if groupRef != "" {
		g, err := kernel.FindGroup(e, groupRef)
		if err != nil {
			return nil, err
		}
		group = g
	}
	var named, usable []*model.ComputeResource
	for _, cr := range e.ComputeResources {
		if cr.Name != ref {
			continue
		}
		pol := e.Policy(cr.PolicyID)
		if group != nil && (pol == nil || pol.GroupID != group.ID) {
			continue
		}
		named = append(named, cr)
		if open(cr) {
			usable = append(usable, cr)
		}
	}
	switch {
	case len(usable) == 1:
		return usable[0], nil
	case len(usable) > 1:
		return nil, kernel.Invalid("the compute resource %s exists for groups %s; say which group", kernel.Quote(ref),
			kernel.Names(usable, func(c *model.ComputeResource) string { return e.PolicyGroupName(c.PolicyID) }))
	case group != nil && !p.IsAdmin() && !p.InGroup(group.ID):
		return nil, kernel.Forbidden("you are not in group %s", group.Name)
	case group != nil:
		return nil, kernel.NotFound("group %s has no compute resource %s", group.Name, kernel.Quote(ref))
	case len(named) > 0:
		return nil, kernel.Forbidden("the compute resource %s is not open to %s", kernel.Quote(ref), kernel.GroupNames(p))
	}
	return nil, kernel.NotFound("no compute resource %s is open to you; list yours with 'klique get computeresources'", kernel.Quote(ref))
}

// TaskPosition returns a queued task's place in its compute resource's
// queue, counting from 1, or 0 for a task that is not waiting.
func (s *Tasks) TaskPosition(ctx context.Context, t *model.Task) (int, error) {
	if t.Status != model.TaskQueued {
		return 0, nil
	}
	n, err := s.k.Store.CountQueuedAhead(ctx, t.TenantID, t.ComputeResourceID, store.PlaceOf(t))
	if err != nil {
		return 0, s.k.Internal(ctx, err)
	}
	return n + 1, nil
}

// TaskListFilter narrows a task list. References are ids or names.
type TaskListFilter struct {
	Statuses        []model.TaskStatus
	ComputeResource string
	Project         string
	Group           string
	// Mine keeps only the caller's own tasks.
	Mine bool
}

// Tasks lists the tasks the caller may see, newest first, one page at a
// time. Page.After is the QueueSeq of the last task of the previous page.
func (s *Tasks) Tasks(ctx context.Context, f TaskListFilter, page model.Page) ([]*model.Task, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	sf := store.TaskFilter{Statuses: f.Statuses}
	placesOnly := false
	for _, st := range f.Statuses {
		if !st.Valid() {
			return nil, kernel.Invalid("status %q is not known", st)
		}
	}
	if f.Mine {
		sf.OwnerID = p.UserID
	}
	if !p.IsAdmin() {
		sf.RestrictToGroups = true
		sf.GroupIDs = p.GroupIDs()
		sf.VisibleToUserID = p.UserID
	}
	if p.ProjectID != "" {
		sf.ProjectID = p.ProjectID
	}
	if f.ComputeResource != "" || f.Project != "" || f.Group != "" {
		e, err := s.k.Estate(ctx)
		if err != nil {
			return nil, err
		}
		if f.ComputeResource != "" {
			cr, err := kernel.FindComputeResource(e, f.ComputeResource)
			if err != nil {
				return nil, err
			}
			sf.ComputeResourceID = cr.ID
		}
		if f.Project != "" {
			pr, err := kernel.FindProject(e, f.Project)
			if err != nil {
				return nil, err
			}
			if sf.ProjectID != "" && sf.ProjectID != pr.ID {
				return nil, nil
			}
			sf.ProjectID = pr.ID
		}
		if f.Group != "" {
			g, err := kernel.FindGroup(e, f.Group)
			if err != nil {
				return nil, err
			}
			sf.RestrictToGroups = true
			sf.GroupIDs = []string{g.ID}
			sf.VisibleToUserID = ""
			// A department head sees the group (kernel.OverseesGroup)
			// without being its member: the tasks' places, not their
			// contents.
			placesOnly = !kernel.SeesGroup(p, g.ID)
		}
	}
	if err := kernel.CheckSeqCursor(page); err != nil {
		return nil, err
	}
	ts, err := s.k.Store.ListTasks(ctx, p.TenantID, sf, page, true)
	if placesOnly {
		for i, t := range ts {
			if !kernel.SeesTask(p, t) {
				ts[i] = kernel.QueuePlace(t)
			}
		}
	}
	return ts, s.k.Internal(ctx, err)
}

// AbortTask stops a task that has not ended. A waiting task leaves its queue;
// a placed task gives its capacity back at once, its ledger interval closing
// in the same transaction. (A running task's worker is told to stop on its
// next heartbeat, once workers exist.)
func (s *Tasks) AbortTask(ctx context.Context, id, reason string) (*model.Task, error) {
	if len(reason) > 500 {
		return nil, kernel.Invalid("the reason is longer than 500 characters")
	}
	return s.abort(ctx, id, func(p *identity.Principal) string {
		why := "aborted by " + p.UserName
		if r := strings.TrimSpace(reason); r != "" {
			why += ": " + r
		}
		return why
	})
}

// StopApplication stops an app instance by the abort path, its reason
// "stopped by <user>".
func (s *Tasks) StopApplication(ctx context.Context, id string) (*model.Task, error) {
	return s.abort(ctx, id, func(p *identity.Principal) string { return "stopped by " + p.UserName })
}

// ExpireApplication stops a running app instance on the control plane's
// own authority (its idle limits), by the same abort path as a stop, with
// reason on its record. attempt fences it: an instance requeued and
// claimed again since the sweep read it is left running.
func (s *Tasks) ExpireApplication(ctx context.Context, tenantID, id string, attempt int, actor, reason string) (*model.Task, error) {
	return s.abortAs(ctx, kernel.System(tenantID, actor), id, func(t *model.Task) error {
		if t.Spec.Kind != model.TaskKindApplication || t.Status != model.TaskRunning || t.Run.Attempt != attempt {
			return kernel.Conflict("app instance %s is no longer the running attempt the idle limits read", kernel.Quote(t.Name))
		}
		return nil
	}, func(*identity.Principal) string { return reason })
}

func (s *Tasks) abort(ctx context.Context, id string, reason func(*identity.Principal) string) (*model.Task, error) {
	return kernel.Run(ctx, s.k, s.abortOp(false, id, func(p *identity.Principal, task *model.Task) error {
		if !kernel.MayAbort(p, task) {
			return kernel.Forbidden("only the task's owner, a lead of its group or an admin can abort task %s", kernel.Quote(task.Name))
		}
		return nil
	}, reason))
}

// abortAs aborts a task as the system actor p (the control plane on its
// own authority), which needs no right to see it, once may allows it.
func (s *Tasks) abortAs(ctx context.Context, p *identity.Principal, id string, may func(*model.Task) error, reason func(*identity.Principal) string) (*model.Task, error) {
	return kernel.RunAs(ctx, s.k, p, s.abortOp(true, id, func(_ *identity.Principal, task *model.Task) error { return may(task) }, reason))
}

// abortOp aborts task id once may allows it; a system actor sees every
// task.
func (s *Tasks) abortOp(system bool, id string, may func(*identity.Principal, *model.Task) error, reason func(*identity.Principal) string) kernel.Op[*model.Task] {
	return kernel.Op[*model.Task]{Name: "abortTask", Right: kernel.RightRead, What: "abort tasks",
		Body: func(t *kernel.Txn) (*model.Task, kernel.Audit, error) {
			p := t.P
			task, err := t.Q.GetTask(t.Ctx, p.TenantID, id)
			if errors.Is(err, store.ErrNotFound) || (err == nil && !system && !kernel.SeesTask(p, task)) {
				return nil, kernel.Audit{}, kernel.NotFound("no task %s", kernel.Quote(id))
			}
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if err := may(p, task); err != nil {
				return nil, kernel.Audit{}, err
			}
			if task.Status.Final() {
				return nil, kernel.Audit{}, kernel.Conflict("task %s has already ended (%s)", kernel.Quote(task.Name), task.Status)
			}
			why := reason(p)
			held := task.Status == model.TaskPlaced || task.Status == model.TaskRunning
			task.Status, task.Reason, task.UpdatedAt = model.TaskAborted, why, t.Now
			now := t.Now
			task.FinishedAt = &now
			if err := t.Q.UpdateTask(t.Ctx, task); err != nil {
				return nil, kernel.Audit{}, err
			}
			if held {
				// The capacity is released with the abort: the ledger
				// interval closes in the same transaction.
				if err := t.Q.EndPlacement(t.Ctx, p.TenantID, task.ID, t.Now, why); err != nil {
					return nil, kernel.Audit{}, err
				}
			}
			return task, kernel.Audit{Action: "task.aborted", Kind: "task", ID: task.ID, Name: task.Name, GroupID: task.GroupID, Detail: why}, nil
		},
	}
}

// CloneInput changes a past task into a new one.
type CloneInput struct {
	// ParameterOverrides replace (or add) parameters of the original.
	ParameterOverrides map[string]string
	// Name, ComputeResource, Group and Project replace the original's when
	// set.
	Name            string
	ComputeResource string
	Group           string
	Project         string
	// IdempotencyKey: as EnqueueInput's.
	IdempotencyKey string `json:"-"`
}

// CloneTask makes a new task from a past one with changed parameters and
// enqueues it (clone & enqueue). The caller must be able to see the original
// and use the target compute resource; the new task is theirs.
func (s *Tasks) CloneTask(ctx context.Context, id string, in CloneInput) (*model.Task, error) {
	orig, err := s.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	spec := orig.Spec
	spec.Parameters = map[string]string{}
	for k, v := range orig.Spec.Parameters {
		spec.Parameters[k] = v
	}
	for k, v := range in.ParameterOverrides {
		spec.Parameters[k] = v
	}
	spec.Command = append([]string(nil), orig.Spec.Command...)
	spec.Packages = append([]string(nil), orig.Spec.Packages...)
	spec.Env = map[string]string{}
	for k, v := range orig.Spec.Env {
		spec.Env[k] = v
	}
	enq := EnqueueInput{Name: orig.Name, Project: orig.ProjectID, ComputeResource: orig.ComputeResourceID, Spec: spec,
		Tags: append([]string(nil), orig.Tags...), seenComputeResource: true}
	if in.Name != "" {
		enq.Name = in.Name
	}
	if in.Project != "" {
		enq.Project = in.Project
	}
	if in.ComputeResource != "" {
		enq.ComputeResource, enq.Group, enq.seenComputeResource = in.ComputeResource, in.Group, false
	}
	enq.IdempotencyKey = in.IdempotencyKey
	return s.enqueue(ctx, enq, orig, "cloneTask", struct {
		ID string
		In CloneInput
	}{id, in})
}

// QueuedTasks counts the tasks waiting in a compute resource the caller may
// see.
func (s *Tasks) QueuedTasks(ctx context.Context, computeResourceID string) (int, error) {
	cr, err := s.k.ComputeResource(ctx, computeResourceID)
	if err != nil {
		return 0, err
	}
	n, err := s.k.Store.CountTasks(ctx, cr.TenantID, store.TaskFilter{ComputeResourceID: cr.ID, Statuses: []model.TaskStatus{model.TaskQueued}})
	return n, s.k.Internal(ctx, err)
}

// TaskProject returns the project of a task the caller sees. Seeing a task
// lets one see its project's name even when the project is restricted.
func (s *Tasks) TaskProject(ctx context.Context, t *model.Task) (*model.Project, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !kernel.SeesTask(p, t) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(t.ID))
	}
	pr, err := s.k.Store.GetProject(ctx, p.TenantID, t.ProjectID)
	return pr, s.k.Internal(ctx, err)
}

// TaskOwner returns the owner of a task the caller sees.
func (s *Tasks) TaskOwner(ctx context.Context, t *model.Task) (*model.User, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !kernel.SeesTask(p, t) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(t.ID))
	}
	u, err := s.k.Store.GetUser(ctx, p.TenantID, t.OwnerID)
	return u, s.k.Internal(ctx, err)
}

// PruneIdempotencyKeys deletes the idempotency keys older than
// kernel.IdempotencyTTL, in every tenant; the server calls it every hour.
func (s *Tasks) PruneIdempotencyKeys(ctx context.Context) (int64, error) {
	return s.k.PruneIdempotencyKeys(ctx)
}
