package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/runenv"
	"github.com/klique-ai/klique/internal/store"
)

// The worker protocol (docs/agent-protocol.md): worker daemons register,
// claim placed work with a lease, heartbeat, stream logs and metrics, fetch
// the secrets their tasks name, and report the end. Every operation here
// acts for the worker identity in the context (a worker credential of one
// pool) and touches only tasks placed on that pool and claimed by a worker
// registered with that credential; a report with an old attempt number is
// refused. Another credential, even of the same pool, finds neither the
// worker nor its tasks.

func workerFrom(ctx context.Context) (*identity.Worker, error) {
	w, ok := identity.WorkerFrom(ctx)
	if !ok {
		return nil, kernel.Unauthenticated("send the worker credential as 'Authorization: Bearer kqw_…'")
	}
	return w, nil
}

// runAsWorker runs op for a worker daemon of w's credential, as actor
// ("worker <host>", "autoscaler <name>") on the worker channel.
func runAsWorker[Out any](ctx context.Context, k *kernel.Kernel, w *identity.Worker, actor string, op kernel.Op[Out]) (Out, error) {
	p := &identity.Principal{TenantID: w.TenantID, UserName: actor}
	return kernel.RunAs(identity.WithChannel(ctx, identity.ChannelWorker), k, p, op)
}

// recordAsWorker writes one audit entry of what a daemon did that changed
// nothing here (it reported a problem, read its credentials).
func (s *Fleet) recordAsWorker(ctx context.Context, w *identity.Worker, actor string, a kernel.Audit) error {
	_, err := runAsWorker(ctx, s.k, w, actor, kernel.Op[struct{}]{
		Name: a.Action,
		Body: func(*kernel.Txn) (struct{}, kernel.Audit, error) { return struct{}{}, a, nil },
	})
	return err
}

// RegisterWorker records a worker daemon of the credential's pool.
func (s *Fleet) RegisterWorker(ctx context.Context, req agentapi.RegisterRequest) (*agentapi.RegisterResponse, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if err := notTaskScoped(ctx, "registering"); err != nil {
		return nil, err
	}
	host := strings.TrimSpace(req.Hostname)
	if host == "" || len(host) > 253 || strings.ContainsAny(host, " \t\n/") {
		return nil, kernel.Invalid("hostname %q must be 1 to 253 characters without spaces or '/'", req.Hostname)
	}
	mode := req.Mode
	if mode == "" {
		mode = agentapi.ModeProcess
	}
	if mode != agentapi.ModeProcess && mode != agentapi.ModeDocker && mode != agentapi.ModePod && mode != agentapi.ModeBatch {
		return nil, kernel.Invalid("mode %q is not known: use process, docker, pod or batch", req.Mode)
	}
	kind := req.Kind
	if kind == "" {
		kind = string(model.PoolBareMetal)
	}
	if !model.PoolKind(kind).Valid() {
		return nil, kernel.Invalid("kind %q is not a known environment", req.Kind)
	}
	if len(req.GPUs) > 1024 {
		return nil, kernel.Invalid("a worker declares at most 1024 GPUs")
	}
	seen := map[int]bool{}
	gpus := make([]model.WorkerGPU, 0, len(req.GPUs))
	for _, g := range req.GPUs {
		if g.Index < 0 || seen[g.Index] {
			return nil, kernel.Invalid("GPU index %d is negative or listed twice", g.Index)
		}
		seen[g.Index] = true
		gpus = append(gpus, model.WorkerGPU{Index: g.Index, UUID: g.UUID, MemoryMB: g.MemoryMB})
	}
	if len(req.Labels) > MaxWorkerLabels {
		return nil, kernel.Invalid("a worker declares at most %d labels", MaxWorkerLabels)
	}
	for _, k := range kernel.SortedKeys(req.Labels) {
		if !labelKeyRE.MatchString(k) || len(req.Labels[k]) > 256 || !utf8.ValidString(req.Labels[k]) {
			return nil, kernel.Invalid("label %q: keys are 1 to 63 letters, digits, '-', '_', '.' or '/', values at most 256 bytes of text", k)
		}
	}
	worker := &model.Worker{TenantID: w.TenantID, PoolID: w.PoolID, CredentialID: w.CredentialID, Hostname: host,
		Version: req.Version, Mode: mode, Kind: kind, GPUs: gpus, Labels: req.Labels}
	_, err = runAsWorker(ctx, s.k, w, "worker "+host, kernel.Op[struct{}]{
		Name: "registerWorker",
		Body: func(t *kernel.Txn) (struct{}, kernel.Audit, error) {
			if err := refuseTakeover(ctx, t.Q, w, host); err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			worker.RegisteredAt, worker.LastHeartbeatAt = t.Now, t.Now
			if err := t.Q.RegisterWorker(ctx, worker); err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			return struct{}{}, kernel.Audit{Action: "worker.registered", Kind: "worker", ID: worker.ID, Name: host,
				Detail: fmt.Sprintf("worker %s (%s mode, %d GPUs, version %s) joined pool %s", host, mode, len(gpus), req.Version, w.PoolName)}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	profiles, err := s.k.Store.ListProfiles(ctx, w.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("list the profiles of pool %s: %w", w.PoolName, err))
	}
	resp := &agentapi.RegisterResponse{WorkerID: worker.ID, Pool: w.PoolName, LeaseSeconds: int(s.agent.Lease / time.Second),
		HeartbeatSeconds: int(s.agent.Heartbeat / time.Second), LogLimitBytes: s.agent.LogLimit}
	if pool, err := s.k.Store.GetPool(ctx, w.TenantID, w.PoolID); err == nil {
		resp.SingleTenant = pool.SingleTenant
	}
	for _, p := range profiles {
		if slices.Contains(p.Pools, w.PoolID) {
			resp.Profiles = append(resp.Profiles, agentapi.ProfileSize{Name: p.Name, MilliGPUsPerNode: int64(p.Size.PerNode),
				Nodes: p.Size.Nodes, SizeParameter: p.SizeParameter})
		}
	}
	return resp, nil
}

// MaxWorkerLabels bounds the labels one worker declares.
const MaxWorkerLabels = 64

var labelKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./-]{0,62}$`)

// ClaimTask waits up to the request's wait for a task placed on the
// worker's pool that fits it, and claims it: placed to running, for this
// worker, with a lease and the next attempt number, in one statement. It
// returns nil when nothing came in time.
func (s *Fleet) ClaimTask(ctx context.Context, req agentapi.ClaimRequest) (*agentapi.Assignment, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if err := notTaskScoped(ctx, "claiming"); err != nil {
		return nil, err
	}
	worker, err := s.myWorker(ctx, w, req.WorkerID)
	if err != nil {
		return nil, err
	}
	fit := store.ClaimFit{MaxPerNode: model.GPUs(req.FreeGPUs), Fractions: req.Fractions}
	if req.FreeMilliGPUs > 0 {
		fit.MaxPerNode = model.MilliGPU(req.FreeMilliGPUs)
	}
	if fit.MaxPerNode <= 0 {
		return nil, kernel.Invalid("a claim needs free capacity: freeGpus or freeMilliGpus above 0")
	}
	if fit.ProjectID, err = s.claimProject(ctx, w, req.Project); err != nil {
		return nil, err
	}
	var claimed *agentapi.Assignment
	if fit.ProjectID != "" {
		// Nothing of its project came: the tasks of others waiting on
		// the pool say why this worker does not take them.
		defer func() {
			if claimed == nil {
				s.noteOneProject(context.WithoutCancel(ctx), w, worker, fit.ProjectID)
			}
		}()
	}
	wait := min(time.Duration(req.WaitSeconds)*time.Second, agentapi.MaxClaimWait)
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(0)
	defer timer.Stop()
	s.claims.listen(s.k.Events)
	woken, hops := false, 0
	for {
		// In line before looking, so that a placement made between the
		// look and the wait is not missed.
		waiter := s.claims.add(w.TenantID, w.PoolID)
		a, err := s.claimOnce(ctx, w, worker, fit)
		claimed = a
		if err != nil || a != nil {
			s.claims.remove(waiter, false)
			return a, err
		}
		if woken {
			// Woken for work this worker cannot run: the next in line
			// may. When the work was taken by a claim that did not wait,
			// there is nothing to pass on.
			if placed, err := s.k.Store.Claimable(ctx, w.TenantID, w.PoolID, anyFit); err == nil && placed {
				s.claims.wakeOne(waitKey(w.TenantID, w.PoolID), hops)
			}
			woken = false
		}
		left := time.Until(deadline)
		if left <= 0 {
			s.claims.remove(waiter, false)
			return nil, nil
		}
		// Placements made by this replica's engine arrive as wakes; the
		// slow tick finds those made by an engine in another replica.
		timer.Reset(min(left, claimTick))
		select {
		case <-ctx.Done():
			s.claims.remove(waiter, false)
			return nil, nil
		case hops = <-waiter.wake:
			woken = true
		case <-timer.C:
			s.claims.remove(waiter, false)
		}
	}
}

// anyFit is a claim any single-node task fits.
var anyFit = store.ClaimFit{MaxPerNode: model.MilliGPU(math.MaxInt64), Fractions: true}

// claimTick is how often a waiting claim looks for work without being
// woken: for placements made by another replica's engine.
const claimTick = 2 * time.Second

func (s *Fleet) claimOnce(ctx context.Context, w *identity.Worker, worker *model.Worker, fit store.ClaimFit) (*agentapi.Assignment, error) {
	// A read first: most looks find nothing, and a read takes no write
	// lock.
	if ok, err := s.k.Store.Claimable(ctx, w.TenantID, w.PoolID, fit); err != nil || !ok {
		return nil, err
	}
	var cr *model.ComputeResource
	task, err := runAsWorker(ctx, s.k, w, "worker "+worker.Hostname, kernel.Op[*model.Task]{
		Name: "claimTask",
		Body: func(t *kernel.Txn) (*model.Task, kernel.Audit, error) {
			task, err := t.Q.ClaimTask(ctx, w.TenantID, w.PoolID, worker.ID, "running on "+worker.Hostname+" in pool "+w.PoolName,
				fit, t.Now, t.Now.Add(s.agent.Lease))
			if errors.Is(err, store.ErrNotFound) {
				return nil, kernel.Audit{}, kernel.ErrRollback // nothing to claim
			}
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			// The compute resource's run settings, from the task's own
			// tenant, read with the claim: when they cannot be read the
			// claim is undone rather than handing out a task without them.
			e, err := s.k.CurrentEstate(ctx, t.Q, task.TenantID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			cr = e.ComputeResource(task.ComputeResourceID)
			return task, kernel.Audit{Action: "task.started", Kind: "task", ID: task.ID, Name: task.Name, GroupID: task.GroupID,
				Detail: fmt.Sprintf("claimed by worker %s of pool %s (attempt %d)", worker.Hostname, w.PoolName, task.Run.Attempt)}, nil
		},
	})
	if err != nil || task == nil {
		return nil, err
	}
	return s.assignment(ctx, task, cr)
}

// assignment is what a worker needs to run a claimed task: the task's spec
// with the run settings of its compute resource (cr; nil when it is gone)
// merged in. The task's image wins over the compute resource's, and its
// variables over those of the same name.
func (s *Fleet) assignment(ctx context.Context, t *model.Task, cr *model.ComputeResource) (*agentapi.Assignment, error) {
	a := &agentapi.Assignment{TaskID: t.ID, ProjectID: t.ProjectID, Attempt: t.Run.Attempt, Name: t.Name,
		MilliGPUsPerNode: int64(t.Size.PerNode), Nodes: t.Size.Nodes,
		Command: t.Spec.Command, Repository: t.Spec.Repository, Commit: t.Spec.Commit, Diff: t.Spec.Diff,
		EntryPoint: t.Spec.EntryPoint, WorkingDir: t.Spec.WorkingDir, Packages: t.Spec.Packages, Image: t.Spec.Image,
		Parameters: t.Spec.Parameters, Env: t.Spec.Env, Secrets: t.Spec.Secrets, LeaseSeconds: int(s.agent.Lease / time.Second)}
	if cr != nil && cr.TenantID == t.TenantID && cr.ID == t.ComputeResourceID {
		a.ComputeResource = cr.Name
		if a.Image == "" {
			a.Image = cr.Image
		}
		if len(cr.Env) > 0 {
			env := make(map[string]string, len(cr.Env)+len(t.Spec.Env))
			maps.Copy(env, cr.Env)
			maps.Copy(env, t.Spec.Env)
			a.Env = env
		}
		if len(cr.Mounts) > 0 {
			a.Mounts = slices.Clone(cr.Mounts)
		}
	}
	if t.Spec.Kind == model.TaskKindApplication && t.Spec.App != nil {
		run := t.Spec.App.Run
		a.App = &agentapi.AppAssignment{Port: t.Spec.App.Port, HealthPath: t.Spec.App.Health,
			Args: slices.Clone(run.Args), Pod: run.Pod, Batch: run.Batch}
	} else {
		// The recorded command keeps its {name} templates, so that a clone
		// with another value runs with it; every runner gets them filled.
		a.Command = runenv.ExpandArgs(a.Command, t.Spec.Parameters)
	}
	if pr, err := s.k.Store.GetProject(ctx, t.TenantID, t.ProjectID); err == nil {
		a.Project, a.OutputDestination = pr.Name, pr.OutputDestination
	}
	// The pool's destination comes first: where its nodes can write.
	if pool, err := s.k.Store.GetPool(ctx, t.TenantID, t.PoolID); err == nil && pool.OutputDestination != "" {
		a.OutputDestination = pool.OutputDestination
	}
	for _, in := range t.Spec.Inputs {
		a.Inputs = append(a.Inputs, agentapi.Input{Name: in.Name, TaskID: in.TaskID, Artifact: in.Artifact})
	}
	if u, err := s.k.Store.GetUser(ctx, t.TenantID, t.OwnerID); err == nil {
		a.Owner = u.Name
	}
	return a, nil
}

// Heartbeat extends the leases of the worker's tasks and tells it which to
// stop: tasks aborted, preempted, requeued after a lost lease, or claimed
// again by another attempt.
func (s *Fleet) Heartbeat(ctx context.Context, req agentapi.HeartbeatRequest) (*agentapi.HeartbeatResponse, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if err := notTaskScoped(ctx, "a heartbeat"); err != nil {
		return nil, err
	}
	if len(req.Tasks) > agentapi.MaxHeartbeatTasks {
		return nil, kernel.Invalid("a heartbeat lists at most %d tasks (this one lists %d): send the rest in another heartbeat",
			agentapi.MaxHeartbeatTasks, len(req.Tasks))
	}
	worker, err := s.myWorker(ctx, w, req.WorkerID)
	if err != nil {
		return nil, err
	}
	attempts := make(map[string]int, len(req.Tasks))
	apps := map[string]*agentapi.AppStatus{}
	for _, t := range req.Tasks {
		attempts[t.TaskID] = t.Attempt
		if t.App != nil {
			apps[t.TaskID] = t.App
		}
	}
	now := s.k.Now()
	if err := s.k.Store.TouchWorker(ctx, w.TenantID, worker.ID, now); err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	tasks, err := s.k.Store.ExtendLeases(ctx, w.TenantID, worker.ID, attempts, now.Add(s.agent.Lease))
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	resp := &agentapi.HeartbeatResponse{LeaseSeconds: int(s.agent.Lease / time.Second)}
	found := map[string]bool{}
	for _, t := range tasks {
		if t.Run.WorkerID != worker.ID {
			// Not this worker's (never, or no longer: another holds the
			// task now): answered like a task that does not exist, so a
			// heartbeat tells nothing of other workers' tasks.
			continue
		}
		found[t.ID] = true
		attempt := attempts[t.ID]
		if t.Status == model.TaskRunning && t.Run.WorkerID == worker.ID && t.Run.Attempt == attempt {
			if err := s.appReadiness(ctx, w.TenantID, w.PoolID, worker.ID, t, apps[t.ID]); err != nil {
				return nil, err
			}
			continue
		}
		cmd := agentapi.Command{TaskID: t.ID, Attempt: attempt, Action: agentapi.ActionStop, State: agentapi.StatePreempted, Reason: t.Reason}
		switch {
		case t.Status == model.TaskAborted:
			cmd.State = agentapi.StateAborted
		case t.Status == model.TaskRunning || t.Status == model.TaskPlaced:
			cmd.Reason = "this attempt lost its lease and the task was given to another"
		case t.Status.Final():
			cmd.Reason = "the task has already ended (" + string(t.Status) + ")"
		}
		resp.Commands = append(resp.Commands, cmd)
	}
	for _, id := range slices.Sorted(maps.Keys(attempts)) {
		if !found[id] {
			resp.Commands = append(resp.Commands, agentapi.Command{TaskID: id, Attempt: attempts[id], Action: agentapi.ActionStop,
				State: agentapi.StateAborted, Reason: "this worker holds no such task: it does not exist, or another worker holds it now"})
		}
	}
	return resp, nil
}

// AppendLogs stores a batch of a task's log lines, after cutting out the
// values of the secrets the task uses.
func (s *Fleet) AppendLogs(ctx context.Context, taskID string, req agentapi.LogsRequest) (*agentapi.LogsResponse, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.Lines) > agentapi.MaxLogLinesPerBatch {
		return nil, kernel.Invalid("a batch holds at most %d lines", agentapi.MaxLogLinesPerBatch)
	}
	if err := checkLineNumbers(req.Lines); err != nil {
		return nil, err
	}
	t, err := s.myTask(ctx, s.k.Store, w, taskID, req.Attempt, false)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	red, err := s.redaction(ctx, t)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	lines := make([]model.LogLine, 0, len(req.Lines))
	for _, l := range req.Lines {
		line := l.Line
		if len(line) > agentapi.MaxLogLineBytes {
			line = line[:agentapi.MaxLogLineBytes] + " [cut]"
		}
		stream := l.Stream
		if stream != agentapi.StreamStdout && stream != agentapi.StreamStderr && stream != agentapi.StreamWorker {
			stream = agentapi.StreamStdout
		}
		at := l.At
		if at.IsZero() {
			at = s.k.Now()
		}
		lines = append(lines, model.LogLine{At: at, Stream: stream, Line: line, N: l.N})
	}
	red.redactLines(lines)
	n, truncated, err := s.k.Store.AppendLogs(ctx, w.TenantID, taskID, req.Attempt, lines, s.agent.LogLimit)
	var far *store.LogNumberError
	if errors.As(err, &far) {
		return nil, kernel.Invalid("log line number %d is more than %d ahead of the highest this attempt has stored (%d): number lines from 1 in the order they are taken; the batch was not stored",
			far.N, store.MaxLogNumberGap, far.Highest)
	}
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	if n > 0 {
		s.k.Events.Publish(events.Event{TenantID: w.TenantID, Kind: "task.logs", ObjectKind: "task", ObjectID: taskID, GroupID: t.GroupID, At: s.k.Now()})
	}
	return &agentapi.LogsResponse{Accepted: n, Truncated: truncated}, nil
}

// AppendMetrics stores a batch of a task's metric points.
func (s *Fleet) AppendMetrics(ctx context.Context, taskID string, req agentapi.MetricsRequest) error {
	w, err := workerFrom(ctx)
	if err != nil {
		return err
	}
	if len(req.Points) > agentapi.MaxMetricsPerBatch {
		return kernel.Invalid("a batch holds at most %d points", agentapi.MaxMetricsPerBatch)
	}
	t, err := s.myTask(ctx, s.k.Store, w, taskID, req.Attempt, false)
	if err != nil {
		return s.k.Internal(ctx, err)
	}
	red, err := s.redaction(ctx, t)
	if err != nil {
		return s.k.Internal(ctx, err)
	}
	points := make([]model.MetricPoint, 0, len(req.Points))
	for _, p := range req.Points {
		name := red.r.String(strings.TrimSpace(p.Name))
		if name == "" || len(name) > 128 {
			return kernel.Invalid("a metric needs a name of 1 to 128 characters")
		}
		if p.Value != p.Value {
			return kernel.Invalid("metric %s is not a number", name)
		}
		at := p.At
		if at.IsZero() {
			at = s.k.Now()
		}
		points = append(points, model.MetricPoint{At: at, Name: name, Value: p.Value, Step: p.Step})
	}
	if err := s.k.Store.AppendMetrics(ctx, w.TenantID, taskID, req.Attempt, points); err != nil {
		return s.k.Internal(ctx, err)
	}
	if t.Spec.Kind == model.TaskKindApplication {
		if at, ok := busyAt(points); ok {
			if now := s.k.Now(); at.After(now) {
				at = now // a worker's clock ahead of ours
			}
			if _, err := s.k.Store.TouchAppActivity(ctx, taskID, at); err != nil {
				return s.k.Internal(ctx, err)
			}
		}
	}
	s.k.Events.Publish(events.Event{TenantID: w.TenantID, Kind: "task.metrics", ObjectKind: "task", ObjectID: taskID, GroupID: t.GroupID, At: s.k.Now()})
	return nil
}

// TaskSecrets returns the values of the secrets a running task names, for
// its worker to inject. It is the only way a secret's value leaves the
// platform.
func (s *Fleet) TaskSecrets(ctx context.Context, taskID string, attempt int) (*agentapi.SecretsResponse, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.myTask(ctx, s.k.Store, w, taskID, attempt, true)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	values, err := s.openSecrets(ctx, t)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return &agentapi.SecretsResponse{Secrets: values}, nil
}

func (s *Fleet) openSecrets(ctx context.Context, t *model.Task) (map[string]string, error) {
	out := map[string]string{}
	if len(t.Spec.Secrets) == 0 {
		return out, nil
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, t.TenantID)
	if err != nil {
		return nil, err
	}
	held, err := kernel.HeldTenantSecrets(ctx, s.k.Store, e, t)
	if err != nil {
		return nil, err
	}
	for _, name := range t.Spec.Secrets {
		sec, whose, err := kernel.FindTaskSecret(ctx, s.k.Store, held, t, name)
		if err != nil {
			return nil, err
		}
		if whose != "" {
			return nil, kernel.Conflict("secret %s of task %s is %s, which is never given to a task; the task cannot start", name, t.Name, whose)
		}
		if sec == nil {
			return nil, kernel.Conflict("secret %s of task %s is no longer in any vault; the task cannot start", name, t.Name)
		}
		if s.k.Vault == nil {
			return nil, errors.New("no vault key configured")
		}
		v, err := s.k.Vault.Open(sec.Ciphertext, kernel.SecretContext(sec.TenantID, sec.Scope, sec.ScopeID, sec.Name))
		if err != nil {
			return nil, fmt.Errorf("open secret %s: %w", name, err)
		}
		out[name] = string(v)
	}
	return out, nil
}

// FinishTask records the end of a task's current attempt: its state, exit
// code and output pointers, and releases its capacity (the ledger interval
// closes in the same transaction). A worker that reports preempted (its
// environment took the capacity back) sends the task back to the front of
// its queue.
func (s *Fleet) FinishTask(ctx context.Context, taskID string, req agentapi.FinishRequest) error {
	w, err := workerFrom(ctx)
	if err != nil {
		return err
	}
	var status model.TaskStatus
	switch req.State {
	case agentapi.StateCompleted:
		status = model.TaskCompleted
	case agentapi.StateFailed:
		status = model.TaskFailed
	case agentapi.StateAborted:
		status = model.TaskAborted
	case agentapi.StatePreempted:
		status = model.TaskQueued
	default:
		return kernel.Invalid("state %q is not an end state: use completed, failed, aborted or preempted", req.State)
	}
	if len(req.Outputs) > 100 || len(req.Message) > 4096 {
		return kernel.Invalid("at most 100 outputs and a message of at most 4096 bytes")
	}
	for _, o := range req.Outputs {
		if o == "" || len(o) > 2048 || strings.ContainsAny(o, " \n\t") {
			return kernel.Invalid("output %q must be a path or URL without spaces, at most 2048 bytes", o)
		}
	}
	if err := s.redactFinish(ctx, w, taskID, &req); err != nil {
		return err
	}
	// The actor is named by the task's worker, which finish reads in the
	// transaction; "worker" stands until then.
	task, err := runAsWorker(ctx, s.k, w, "worker", kernel.Op[*model.Task]{
		Name: "finishTask",
		Body: func(t *kernel.Txn) (*model.Task, kernel.Audit, error) { return s.finish(t, w, taskID, status, &req) },
	})
	if err != nil {
		return err
	}
	s.forgetRedaction(taskID, req.Attempt)
	s.k.Events.Publish(events.Event{TenantID: w.TenantID, Kind: "task.finished", ObjectKind: "task", ObjectID: taskID, GroupID: task.GroupID, At: s.k.Now()})
	return nil
}

// finish is FinishTask's change, in t: the attempt's end on the task
// and its ledger interval closed, with the task's audit entry (the worker,
// by its host name, as actor).
func (s *Fleet) finish(t *kernel.Txn, w *identity.Worker, taskID string, status model.TaskStatus, req *agentapi.FinishRequest) (*model.Task, kernel.Audit, error) {
	ctx := t.Ctx
	task, err := s.myTask(ctx, t.Q, w, taskID, req.Attempt, true)
	if err != nil {
		return nil, kernel.Audit{}, err
	}
	worker, err := t.Q.GetWorker(ctx, w.TenantID, task.Run.WorkerID)
	if err != nil {
		return nil, kernel.Audit{}, err
	}
	t.P.UserName = "worker " + worker.Hostname
	now := t.Now
	code := req.ExitCode
	if status == model.TaskCompleted && task.Spec.Kind == model.TaskKindApplication {
		// An app never completes on its own (a worker of an earlier
		// version may say it did): its process exited, a failure.
		status = model.TaskFailed
		if req.Message == "" {
			req.Message = "the app's process exited; an app never completes on its own"
		}
	}
	task.Run.ExitCode, task.Run.Outputs, task.Run.LeaseExpiresAt = &code, req.Outputs, nil
	task.Run.AppAddress = ""
	task.Status, task.UpdatedAt = status, now
	switch status {
	case model.TaskCompleted:
		task.Reason = fmt.Sprintf("completed on %s (exit code %d)", worker.Hostname, code)
	case model.TaskFailed:
		task.Reason = fmt.Sprintf("failed on %s (exit code %d)", worker.Hostname, code)
	case model.TaskAborted:
		task.Reason = "stopped on " + worker.Hostname
	case model.TaskQueued:
		task.Reason = "preempted: its environment took the capacity back on " + worker.Hostname
		task.PoolID, task.PlacedAt = "", nil
	}
	if req.Message != "" && status != model.TaskCompleted {
		task.Reason += ": " + req.Message
	}
	if status.Final() {
		task.FinishedAt = &now
	}
	if err := t.Q.UpdateTask(ctx, task); err != nil {
		return nil, kernel.Audit{}, err
	}
	if err := t.Q.EndPlacement(ctx, w.TenantID, task.ID, now, task.Reason); err != nil {
		return nil, kernel.Audit{}, err
	}
	return task, kernel.Audit{Action: "task." + string(status), Kind: "task", ID: task.ID, Name: task.Name, GroupID: task.GroupID,
		Detail: task.Reason}, nil
}
