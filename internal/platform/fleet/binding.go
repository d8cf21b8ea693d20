package fleet

import (
	"context"
	"errors"
	"slices"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Which worker may act on what. A worker credential is the unit of trust
// in a pool: a worker record belongs to the credential it registered
// with, and a task to the worker that claimed its current attempt. Every
// call about a worker (claim, heartbeat) or a task (logs, metrics,
// secrets, end, task credentials) is checked here against the caller's
// credential, so a second credential of the same pool can neither read a
// running task's secrets nor write to it, nor learn anything of it.

// myWorker reads the worker a request names and checks it is the caller's:
// registered in the caller's pool with the caller's credential.
func (s *Fleet) myWorker(ctx context.Context, w *identity.Worker, workerID string) (*model.Worker, error) {
	worker, err := s.k.Store.GetWorker(ctx, w.TenantID, workerID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !holds(worker, w)) {
		return nil, kernel.NotFound("no worker %s of pool %s registered with this credential: register first", kernel.Quote(workerID), w.PoolName)
	}
	return worker, s.k.Internal(ctx, err)
}

// holds says whether a worker record is the calling credential's: the
// only one whose tasks the caller may act on.
func holds(worker *model.Worker, w *identity.Worker) bool {
	return worker.PoolID == w.PoolID && worker.CredentialID == w.CredentialID
}

// myTask reads a task a report is about and checks that the caller holds
// it: the task's current (or last) attempt was claimed by a worker of the
// caller's pool registered with the caller's credential. Any other caller,
// of this pool or another, gets NOT_FOUND, as for a task that does not
// exist, and learns nothing of the task. The holder's report with a stale
// attempt is a CONFLICT (HTTP 409): the worker must drop the task.
func (s *Fleet) myTask(ctx context.Context, q store.Queries, w *identity.Worker, taskID string, attempt int, running bool) (*model.Task, error) {
	if err := checkTaskScope(ctx, taskID, attempt); err != nil {
		return nil, err
	}
	notHeld := kernel.NotFound("no task %s held by this worker credential in pool %s", kernel.Quote(taskID), w.PoolName)
	t, err := q.GetTask(ctx, w.TenantID, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notHeld
	}
	if err != nil {
		return nil, err
	}
	if t.Run.WorkerID == "" {
		return nil, notHeld
	}
	holder, err := q.GetWorker(ctx, w.TenantID, t.Run.WorkerID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !holds(holder, w)) {
		return nil, notHeld
	}
	if err != nil {
		return nil, err
	}
	if t.Run.Attempt != attempt {
		return nil, kernel.Conflict("attempt %d of task %s is no longer current (it is at attempt %d): drop it", attempt, taskID, t.Run.Attempt)
	}
	if running && t.Status != model.TaskRunning {
		return nil, kernel.Conflict("task %s is %s now (%s): drop attempt %d", taskID, t.Status, t.Reason, attempt)
	}
	return t, nil
}

// checkLineNumbers refuses a batch whose line numbers (n) are negative or
// do not increase: the worker numbers lines from 1 in the order it takes
// them, and the store skips a number it already holds, so a number out of
// order would drop the lines after it. Lines without a number (0) are not
// checked.
func checkLineNumbers(lines []agentapi.LogLine) error {
	var last int64
	for i, l := range lines {
		switch {
		case l.N < 0:
			return kernel.Invalid("log line %d of the batch has number %d: numbers start at 1 (0 for a line without one)", i+1, l.N)
		case l.N == 0:
		case l.N <= last:
			return kernel.Invalid("log line %d of the batch has number %d after %d: numbers must increase within a batch", i+1, l.N, last)
		default:
			last = l.N
		}
	}
	return nil
}

// refuseTakeover refuses to register a host whose worker record belongs to
// another live credential while that worker runs tasks: registering again
// moves the record to the new credential, and with it the tasks, their
// secrets and their reports. Rotating credentials still works: the new one
// takes the host over once the old one is revoked or the host's tasks have
// ended.
func refuseTakeover(ctx context.Context, q store.Queries, w *identity.Worker, host string) error {
	workers, err := q.ListWorkers(ctx, w.TenantID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(workers, func(x *model.Worker) bool { return x.PoolID == w.PoolID && x.Hostname == host })
	if i < 0 || workers[i].CredentialID == w.CredentialID {
		return nil
	}
	old := workers[i]
	creds, err := q.ListWorkerCredentials(ctx, w.TenantID)
	if err != nil {
		return err
	}
	if j := slices.IndexFunc(creds, func(c *model.WorkerCredential) bool { return c.ID == old.CredentialID }); j < 0 || creds[j].RevokedAt != nil {
		return nil
	}
	running, err := q.ListTasks(ctx, w.TenantID, store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning}, PoolID: w.PoolID},
		store.Page{}, false)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(running, func(t *model.Task) bool { return t.Run.WorkerID == old.ID }) {
		return kernel.Conflict("host %s of pool %s is registered with another worker credential and runs tasks: "+
			"register with that credential, or revoke it (or let its tasks end) before registering the host with this one", host, w.PoolName)
	}
	return nil
}

// HeldTask returns a task the calling worker (or task credential) holds at
// attempt, as every report checks it: for the domains that take reports
// of their own (artifacts).
func (s *Fleet) HeldTask(ctx context.Context, taskID string, attempt int) (*model.Task, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.myTask(ctx, s.k.Store, w, taskID, attempt, false)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return t, nil
}
