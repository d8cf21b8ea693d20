package tasks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Local runs (docs/experiments.md, "The run record"). The SDK's
// klique.init on someone's laptop records a task that no worker runs, in
// status local: it belongs to its owner and a project, shows in task
// lists, compare and reports like any run, and gets its parameters, logs
// and metrics from the SDK instead of a worker. It has no compute
// resource (its compute resource, policy and profile ids are empty and
// its size is zero), so the engine, which reads only queued, placed and
// running tasks of known compute resources, never places, counts or
// charges it, and no ledger interval ever opens for it. executeRemotely
// sends it to a compute resource through the enqueue path, after which it
// is an ordinary task.

const (
	// LocalRunStaleAfter is how long a local run may go without a report
	// before the sweep ends it as failed: the SDK reports at least every
	// minute while its process lives, so half an hour of silence means
	// the process (or its machine) is gone.
	LocalRunStaleAfter = 30 * time.Minute
	// LocalRunStaleReason is the reason the sweep gives.
	LocalRunStaleReason = "the local process stopped reporting"
	// localAttempt is the attempt number a local run's logs and metrics
	// are stored under; a worker's attempts, once it is sent to a
	// compute resource, count from 1.
	localAttempt = 0
	// Bounds on one report, as a worker's batches.
	maxReportPoints   = 5000
	maxReportLines    = 5000
	maxReportLineSize = 16 << 10
	maxMetricName     = 128
	// localRunsSweeper is the actor the audit trail shows for the sweep.
	localRunsSweeper = "local run sweep"
)

// LocalRunInput starts a local run.
type LocalRunInput struct {
	Name string
	// Project is a project id or name; the caller's default project when
	// empty.
	Project string
	// Group is whose run it is when the project belongs to no group
	// (else the project's group): the caller's only group when empty.
	Group string
	// Spec is the run's code state (command, repository, commit, diff,
	// working directory, packages) and parameters, as klique run records
	// them; executeRemotely runs it as it is.
	Spec model.TaskSpec
}

// LocalRunReport is what a local run's SDK sends: metric points, console
// lines and parameters (added or changed; none is removed).
type LocalRunReport struct {
	Metrics    []model.MetricPoint
	Logs       []model.LogLine
	Parameters map[string]string
}

// LocalRunEnd ends a local run.
type LocalRunEnd struct {
	// Status is completed, failed or aborted.
	Status   model.TaskStatus
	ExitCode *int
	// Reason replaces the default ("the local process ended", …).
	Reason string
}

// ExecuteRemotelyInput sends a local run to a compute resource.
type ExecuteRemotelyInput struct {
	ComputeResource string
	Group           string
	IdempotencyKey  string `json:"-"`
}

// StartLocalRun records a run on the caller's machine: a task in status
// local, owned by the caller, in the project given (or their default).
func (s *Tasks) StartLocalRun(ctx context.Context, in LocalRunInput) (*model.Task, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*model.Task]{Name: "startLocalRun", Right: kernel.RightWrite, What: "start runs",
		Check: func(*identity.Principal) error {
			in.Spec = normalizeSpec(in.Spec)
			in.Spec.Kind, in.Spec.App = "", nil
			if ps := ValidateTaskSpec(in.Name, &in.Spec); len(ps) > 0 {
				return &kernel.Error{Code: kernel.CodeInvalid, Message: "run " + kernel.Quote(in.Name) + ": " + strings.Join(ps, "; "), Problems: ps}
			}
			return nil
		},
		Body: func(t *kernel.Txn) (*model.Task, kernel.Audit, error) {
			p := t.P
			e, err := s.k.CurrentEstate(t.Ctx, t.Q, p.TenantID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			project, err := resolveProject(p, e, in.Project)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			groupID, err := localRunGroup(p, e, project, in.Group)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			task := &model.Task{
				ID: model.NewID(), TenantID: p.TenantID, ProjectID: project.ID, OwnerID: p.UserID, GroupID: groupID,
				Name: in.Name, Spec: in.Spec, Status: model.TaskLocal,
				Reason:    "running locally on its owner's machine, reported by the SDK",
				CreatedAt: t.Now, UpdatedAt: t.Now,
			}
			if err := t.Q.CreateTask(t.Ctx, task); err != nil {
				return nil, kernel.Audit{}, fmt.Errorf("start local run %s: %w", task.Name, err)
			}
			return task, kernel.Audit{Action: "task.started", Kind: "task", ID: task.ID, Name: task.Name, GroupID: task.GroupID,
				Detail: fmt.Sprintf("started running locally in project %s", project.Name)}, nil
		},
	})
}

// localRunGroup is the group a local run belongs to, which decides who
// besides its owner sees it: the project's group; for a project of no
// group, the group given (one of the caller's) or the caller's only
// group; else none (its owner and admins see it).
func localRunGroup(p *identity.Principal, e *estate.Estate, project *model.Project, ref string) (string, error) {
	if project.GroupID != "" {
		if ref != "" {
			if g, err := kernel.FindGroup(e, ref); err != nil || g.ID != project.GroupID {
				return "", kernel.Invalid("project %s belongs to group %s: leave the group out, or give that one", kernel.Quote(project.Name), e.GroupName(project.GroupID))
			}
		}
		return project.GroupID, nil
	}
	if ref != "" {
		g, err := kernel.FindGroup(e, ref)
		if err != nil {
			return "", err
		}
		if !p.IsAdmin() && !p.InGroup(g.ID) {
			return "", kernel.Forbidden("you are not in group %s", g.Name)
		}
		return g.ID, nil
	}
	if len(p.Groups) == 1 {
		return p.Groups[0].GroupID, nil
	}
	return "", nil
}

// ReportLocalRun stores what a local run's SDK sends; only its owner
// reports, and only while it runs locally. Every report, an empty one
// too, counts as a sign of life for the stale sweep.
func (s *Tasks) ReportLocalRun(ctx context.Context, id string, r LocalRunReport) (*model.Task, error) {
	points, lines, err := s.checkReport(r)
	if err != nil {
		return nil, err
	}
	return s.localRunWrite(ctx, "reportLocalRun", id, "report on", func(t *kernel.Txn, task *model.Task) (kernel.Audit, error) {
		audit, err := s.reportParameters(t, task, r.Parameters)
		if err != nil {
			return audit, err
		}
		if len(points) > 0 {
			if err := t.Q.AppendMetrics(t.Ctx, task.TenantID, task.ID, localAttempt, points); err != nil {
				return audit, err
			}
			t.Publish(events.Event{TenantID: task.TenantID, Kind: "task.metrics", ObjectKind: "task", ObjectID: task.ID, GroupID: task.GroupID, At: t.Now})
		}
		if len(lines) > 0 {
			n, _, err := t.Q.AppendLogs(t.Ctx, task.TenantID, task.ID, localAttempt, lines, s.logLimitBytes())
			var far *store.LogNumberError
			if errors.As(err, &far) {
				return audit, kernel.Invalid("log line number %d is more than %d ahead of the highest this run has stored (%d): number lines from 1 in the order they are printed; the report was not stored",
					far.N, store.MaxLogNumberGap, far.Highest)
			}
			if err != nil {
				return audit, err
			}
			if n > 0 {
				t.Publish(events.Event{TenantID: task.TenantID, Kind: "task.logs", ObjectKind: "task", ObjectID: task.ID, GroupID: task.GroupID, At: t.Now})
			}
		}
		if _, err := t.Q.TouchLocalRun(t.Ctx, task.TenantID, task.ID, t.Now); err != nil {
			return audit, err
		}
		task.UpdatedAt = t.Now
		return audit, nil
	})
}

// reportParameters writes the parameters a report adds or changes: the
// report's audit entry when it changes any, else none.
func (s *Tasks) reportParameters(t *kernel.Txn, task *model.Task, params map[string]string) (kernel.Audit, error) {
	spec := task.Spec
	spec.Parameters = maps.Clone(spec.Parameters)
	if spec.Parameters == nil {
		spec.Parameters = map[string]string{}
	}
	var changed []string
	for k, v := range params {
		if old, ok := spec.Parameters[k]; !ok || old != v {
			changed = append(changed, k)
		}
		spec.Parameters[k] = v
	}
	if len(changed) == 0 {
		return kernel.Audit{}, nil
	}
	if ps := ValidateTaskSpec(task.Name, &spec); len(ps) > 0 {
		return kernel.Audit{}, &kernel.Error{Code: kernel.CodeInvalid, Message: "run " + kernel.Quote(task.Name) + ": " + strings.Join(ps, "; "), Problems: ps}
	}
	task.Spec, task.UpdatedAt = spec, t.Now
	if err := t.Q.UpdateLocalRun(t.Ctx, task); err != nil {
		return kernel.Audit{}, err
	}
	return kernel.Audit{Action: "task.parameters", Kind: "task", ID: task.ID, Name: task.Name, GroupID: task.GroupID,
		Detail: fmt.Sprintf("recorded %d parameters of its local run", len(changed))}, nil
}

// checkReport checks a report's bounds and returns its points and lines
// to store.
func (s *Tasks) checkReport(r LocalRunReport) ([]model.MetricPoint, []model.LogLine, error) {
	if len(r.Metrics) > maxReportPoints {
		return nil, nil, kernel.Invalid("a report holds at most %d metric points: send them in several", maxReportPoints)
	}
	if len(r.Logs) > maxReportLines {
		return nil, nil, kernel.Invalid("a report holds at most %d log lines: send them in several", maxReportLines)
	}
	now := s.k.Now()
	points := make([]model.MetricPoint, 0, len(r.Metrics))
	for _, m := range r.Metrics {
		name := strings.TrimSpace(m.Name)
		if name == "" || len(name) > maxMetricName {
			return nil, nil, kernel.Invalid("a metric needs a name of 1 to %d characters", maxMetricName)
		}
		if m.Value != m.Value {
			return nil, nil, kernel.Invalid("metric %s is not a number: report a finite value", name)
		}
		at := m.At
		if at.IsZero() || at.After(now) {
			at = now
		}
		points = append(points, model.MetricPoint{At: at, Name: name, Value: m.Value, Step: m.Step})
	}
	lines := make([]model.LogLine, 0, len(r.Logs))
	var last int64
	for i, l := range r.Logs {
		if l.N < 0 || (l.N > 0 && l.N <= last) {
			return nil, nil, kernel.Invalid("log line %d of the report has number %d: number lines from 1, increasing (0 for a line without one)", i+1, l.N)
		}
		if l.N > 0 {
			last = l.N
		}
		line := l.Line
		if len(line) > maxReportLineSize {
			line = line[:maxReportLineSize] + " [cut]"
		}
		stream := l.Stream
		if stream != "stdout" && stream != "stderr" {
			stream = "stdout"
		}
		at := l.At
		if at.IsZero() || at.After(now) {
			at = now
		}
		lines = append(lines, model.LogLine{At: at, Stream: stream, Line: line, N: l.N})
	}
	if len(r.Parameters) > MaxParameters {
		return nil, nil, kernel.Invalid("a report holds at most %d parameters", MaxParameters)
	}
	return points, lines, nil
}

func (s *Tasks) logLimitBytes() int64 {
	if s.logLimit > 0 {
		return s.logLimit
	}
	return 16 << 20
}

// EndLocalRun ends a local run as completed, failed or aborted, at its
// owner's word.
func (s *Tasks) EndLocalRun(ctx context.Context, id string, end LocalRunEnd) (*model.Task, error) {
	if len(end.Reason) > 500 {
		return nil, kernel.Invalid("the reason is longer than 500 characters")
	}
	why := strings.TrimSpace(end.Reason)
	switch end.Status {
	case model.TaskCompleted:
		if end.ExitCode != nil && *end.ExitCode != 0 {
			return nil, kernel.Invalid("a completed run exits with code 0: end it as failed with exit code %d", *end.ExitCode)
		}
		if why == "" {
			why = "the local process ended"
		}
	case model.TaskFailed:
		if why == "" && end.ExitCode != nil {
			why = fmt.Sprintf("the local process failed with exit code %d", *end.ExitCode)
		} else if why == "" {
			why = "the local process failed"
		}
	case model.TaskAborted:
		if why == "" {
			why = "the local process was stopped"
		}
	default:
		return nil, kernel.Invalid("a local run ends as completed, failed or aborted, not %s", kernel.Quote(string(end.Status)))
	}
	return s.localRunWrite(ctx, "endLocalRun", id, "end", func(t *kernel.Txn, task *model.Task) (kernel.Audit, error) {
		return endLocalRun(t, task, end.Status, end.ExitCode, why)
	})
}

// endLocalRun writes a local run's end and returns its audit entry.
func endLocalRun(t *kernel.Txn, task *model.Task, status model.TaskStatus, exitCode *int, why string) (kernel.Audit, error) {
	if status == model.TaskCompleted && exitCode == nil {
		zero := 0
		exitCode = &zero
	}
	now := t.Now
	task.Status, task.Reason, task.UpdatedAt, task.FinishedAt, task.Run.ExitCode = status, why, now, &now, exitCode
	if err := t.Q.UpdateLocalRun(t.Ctx, task); err != nil {
		return kernel.Audit{}, err
	}
	return kernel.Audit{Action: "task." + string(status), Kind: "task", ID: task.ID, Name: task.Name, GroupID: task.GroupID,
		Detail: "its local run ended: " + why}, nil
}

// localRunWrite runs the operation name on the caller's local run id,
// once it is found, theirs and still local: body makes the change and
// says its audit entry. what names the operation for refusals.
func (s *Tasks) localRunWrite(ctx context.Context, name, id, what string, body func(t *kernel.Txn, task *model.Task) (kernel.Audit, error)) (*model.Task, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*model.Task]{Name: name, Right: kernel.RightWrite, What: what + " runs",
		// A report of metrics and logs alone is not in the audit trail.
		Unaudited: true,
		Body: func(t *kernel.Txn) (*model.Task, kernel.Audit, error) {
			p := t.P
			task, err := t.Q.GetTask(t.Ctx, p.TenantID, id)
			if errors.Is(err, store.ErrNotFound) || (err == nil && !kernel.SeesTask(p, task)) {
				return nil, kernel.Audit{}, kernel.NotFound("no task %s", kernel.Quote(id))
			}
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if err := mayReportLocally(p, task, what); err != nil {
				return nil, kernel.Audit{}, err
			}
			a, err := body(t, task)
			if errors.Is(err, store.ErrConflict) {
				return nil, kernel.Audit{}, kernel.Conflict("task %s is no longer running locally", kernel.Quote(task.Name))
			}
			return task, a, err
		},
	})
}

// mayReportLocally refuses a local run's operations to all but its owner,
// and to a task that is not running locally.
func mayReportLocally(p *identity.Principal, task *model.Task, what string) error {
	if task.OwnerID != p.UserID {
		return kernel.Forbidden("only the owner of run %s can %s it", kernel.Quote(task.Name), what)
	}
	if task.Status != model.TaskLocal {
		return kernel.Conflict("task %s is not running locally (it is %s): only a local run can be reported on, ended or sent to a compute resource",
			kernel.Quote(task.Name), task.Status)
	}
	return nil
}

// ExecuteRemotely sends the caller's local run to a compute resource with
// the code state and parameters it recorded: the enqueue path's checks,
// authorization and audit, after which it is an ordinary queued task
// (the same id, its logs and metrics so far kept).
func (s *Tasks) ExecuteRemotely(ctx context.Context, id string, in ExecuteRemotelyInput) (*model.Task, error) {
	local, err := s.k.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	request := struct {
		ID string
		In ExecuteRemotelyInput
	}{id, in}
	// A retry of a send that was done answers as the send did (the
	// enqueue's idempotency key) before the run is held to being local.
	enq := EnqueueInput{Name: local.Name, Project: local.ProjectID, ComputeResource: in.ComputeResource, Group: in.Group,
		Spec: local.Spec, IdempotencyKey: in.IdempotencyKey, local: local}
	return s.enqueue(ctx, enq, nil, "executeRemotely", request)
}

// SweepStaleLocalRuns ends, as failed, the local runs of every tenant
// that have not reported for LocalRunStaleAfter. The server runs it on
// the replicas that run the engine; an end or report racing with it
// leaves one winner (store.UpdateLocalRun changes only a local run).
func (s *Tasks) SweepStaleLocalRuns(ctx context.Context) (int, error) {
	tenants, err := s.k.Store.ListTenants(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep stale local runs: list tenants: %w", err)
	}
	ended := 0
	for _, tn := range tenants {
		cutoff := s.k.Now().Add(-LocalRunStaleAfter)
		page := model.Page{Limit: 500}
		for {
			ts, err := s.k.Store.ListTasks(ctx, tn.ID, store.TaskFilter{Statuses: []model.TaskStatus{model.TaskLocal}}, page, false)
			if err != nil {
				return ended, fmt.Errorf("sweep stale local runs of tenant %s: %w", tn.Name, err)
			}
			for _, task := range ts {
				if !task.UpdatedAt.Before(cutoff) {
					continue
				}
				ok, err := s.endStale(ctx, tn.ID, task.ID, cutoff)
				if err != nil {
					return ended, err
				}
				if ok {
					ended++
				}
			}
			if len(ts) < page.Limit {
				break
			}
			page.After = fmt.Sprint(ts[len(ts)-1].QueueSeq)
		}
	}
	return ended, nil
}

// endStale ends one local run as failed when it is still local and has
// still not reported since cutoff.
func (s *Tasks) endStale(ctx context.Context, tenantID, id string, cutoff time.Time) (bool, error) {
	ended, err := kernel.RunAs(ctx, s.k, kernel.System(tenantID, localRunsSweeper), kernel.Op[bool]{
		Name: "endStaleLocalRun", Right: kernel.RightRead, What: "end local runs",
		Body: func(t *kernel.Txn) (bool, kernel.Audit, error) {
			task, err := t.Q.GetTask(t.Ctx, tenantID, id)
			if errors.Is(err, store.ErrNotFound) {
				return false, kernel.Audit{}, kernel.ErrRollback
			}
			if err != nil {
				return false, kernel.Audit{}, err
			}
			if task.Status != model.TaskLocal || !task.UpdatedAt.Before(cutoff) {
				return false, kernel.Audit{}, kernel.ErrRollback
			}
			a, err := endLocalRun(t, task, model.TaskFailed, nil, LocalRunStaleReason)
			if errors.Is(err, store.ErrConflict) {
				return false, kernel.Audit{}, kernel.ErrRollback // ended or sent since it was read
			}
			return err == nil, a, err
		},
	})
	if errors.Is(err, kernel.ErrRollback) {
		// Gone, ended, sent or reported on since it was listed: not stale.
		return false, nil
	}
	return ended, err
}
