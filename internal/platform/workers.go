package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// AgentOptions tune the worker protocol.
type AgentOptions struct {
	// Lease is how long a claimed task stays a worker's without a
	// heartbeat; Heartbeat how often workers send one.
	Lease     time.Duration
	Heartbeat time.Duration
	// LogLimit bounds the log one task may store.
	LogLimit int64
}

// Defaults of the worker protocol.
const (
	DefaultLease     = 60 * time.Second
	DefaultHeartbeat = 15 * time.Second
	DefaultLogLimit  = 16 << 20
)

func (o AgentOptions) withDefaults() AgentOptions {
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.LogLimit <= 0 {
		o.LogLimit = DefaultLogLimit
	}
	return o
}

// CreateWorkerCredential makes a credential the worker daemons of a pool
// connect with. The secret is returned this once; only its hash is kept.
func (s *Service) CreateWorkerCredential(ctx context.Context, poolRef, name string) (*model.WorkerCredential, string, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, "", err
	}
	if err := requireAdmin(p, "create worker credentials"); err != nil {
		return nil, "", err
	}
	if name == "" {
		name = "workers"
	}
	if err := estate.CheckName(name); err != nil {
		return nil, "", invalid("worker credential %v", err)
	}
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, "", err
	}
	pool, err := findPool(e, poolRef)
	if err != nil {
		return nil, "", err
	}
	secret, prefix, hash, err := identity.NewWorkerCredential()
	if err != nil {
		return nil, "", err
	}
	c := &model.WorkerCredential{TenantID: p.TenantID, PoolID: pool.ID, Name: name, Prefix: prefix, Hash: hash, CreatedBy: p.UserName}
	err = s.write(ctx, p, func(t *txn) error {
		c.CreatedAt = t.now
		if err := t.q.CreateWorkerCredential(ctx, c); err != nil {
			return err
		}
		return t.record("worker_credential.created", "worker_credential", c.ID, c.Name, "",
			fmt.Sprintf("credential %s… for the workers of pool %s", c.Prefix, pool.Name))
	})
	if err != nil {
		return nil, "", err
	}
	return c, secret, nil
}

// WorkerCredentials lists the tenant's worker credentials (admins).
func (s *Service) WorkerCredentials(ctx context.Context) ([]*model.WorkerCredential, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "list worker credentials"); err != nil {
		return nil, err
	}
	cs, err := s.store.ListWorkerCredentials(ctx, p.TenantID)
	return cs, s.internal(ctx, err)
}

// RevokeWorkerCredential revokes a worker credential: its daemons are
// refused from their next call.
func (s *Service) RevokeWorkerCredential(ctx context.Context, id string) (*model.WorkerCredential, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "revoke worker credentials"); err != nil {
		return nil, err
	}
	var out *model.WorkerCredential
	err = s.write(ctx, p, func(t *txn) error {
		if err := t.q.RevokeWorkerCredential(ctx, p.TenantID, id, t.now); errors.Is(err, store.ErrNotFound) {
			return notFound("no worker credential %s", quote(id))
		} else if err != nil {
			return err
		}
		list, err := t.q.ListWorkerCredentials(ctx, p.TenantID)
		if err != nil {
			return err
		}
		for _, c := range list {
			if c.ID == id {
				out = c
			}
		}
		return t.record("worker_credential.revoked", "worker_credential", id, out.Name, "", "revoked "+out.Prefix+"…")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WorkerView is a registered worker as the orchestration view shows it.
type WorkerView struct {
	*model.Worker
	PoolName string
	// Online is false when the worker has missed its heartbeats for longer
	// than a lease.
	Online bool
}

// Workers lists the tenant's registered workers: everyone in the tenant may
// see what capacity serves it.
func (s *Service) Workers(ctx context.Context) ([]*WorkerView, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := s.store.ListWorkers(ctx, p.TenantID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	out := make([]*WorkerView, 0, len(ws))
	for _, w := range ws {
		v := &WorkerView{Worker: w, Online: now.Sub(w.LastHeartbeatAt) <= s.agent.Lease}
		if pool := e.Pool(w.PoolID); pool != nil {
			v.PoolName = pool.Name
		}
		out = append(out, v)
	}
	return out, nil
}

// WorkerTasks lists the tasks a worker runs now that the caller may see.
func (s *Service) WorkerTasks(ctx context.Context, workerID string) ([]*model.Task, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	f := store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning}}
	if !p.IsAdmin() {
		f.RestrictToGroups, f.GroupIDs, f.VisibleToUserID = true, p.GroupIDs(), p.UserID
	}
	ts, err := s.store.ListTasks(ctx, p.TenantID, f, store.Page{}, false)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	var out []*model.Task
	for _, t := range ts {
		if t.Run.WorkerID == workerID && seesTask(p, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// AuthenticateWorker turns a worker credential into a worker identity.
func (s *Service) AuthenticateWorker(ctx context.Context, secret string) (*identity.Worker, error) {
	if len(secret) < len(identity.WorkerCredentialPrefix)+10 || secret[:len(identity.WorkerCredentialPrefix)] != identity.WorkerCredentialPrefix {
		return nil, unauthenticated("the worker credential must be a kqw_… credential made with createWorkerCredential")
	}
	c, err := s.store.GetWorkerCredentialByHash(ctx, identity.HashAPIKey(secret))
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthenticated("unknown worker credential")
	}
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	if c.RevokedAt != nil {
		return nil, unauthenticated("worker credential revoked")
	}
	pool, err := s.store.GetPool(ctx, c.TenantID, c.PoolID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthenticated("the pool of this worker credential no longer exists")
	}
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	return &identity.Worker{TenantID: c.TenantID, PoolID: c.PoolID, PoolName: pool.Name, CredentialID: c.ID}, nil
}

// LogPage is a page of a task's log.
type LogPage struct {
	Lines     []model.LogLine
	LastSeq   int64
	Truncated bool
}

// TaskLogs reads a task's log the caller may see: lines after after, or the
// last tail lines.
func (s *Service) TaskLogs(ctx context.Context, t *model.Task, after int64, first, tail int) (*LogPage, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !seesTask(p, t) {
		return nil, notFound("no task %s", quote(t.ID))
	}
	if first <= 0 || first > 5000 {
		first = 500
	}
	limit, isTail := first, false
	if tail > 0 {
		limit, isTail = min(tail, 5000), true
	}
	lines, err := s.store.ListLogs(ctx, p.TenantID, t.ID, after, limit, isTail)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	page := &LogPage{Lines: lines, LastSeq: after}
	if n := len(lines); n > 0 {
		page.LastSeq = lines[n-1].Seq
		page.Truncated = strings.HasPrefix(lines[n-1].Line, "[klique: the log of this task reached its limit")
	}
	return page, nil
}

// TaskMetrics reads a task's metric points the caller may see.
func (s *Service) TaskMetrics(ctx context.Context, t *model.Task, name string, after int64, first int, last bool) ([]model.MetricPoint, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !seesTask(p, t) {
		return nil, notFound("no task %s", quote(t.ID))
	}
	var points []model.MetricPoint
	if last {
		points, err = s.store.LastMetrics(ctx, p.TenantID, t.ID)
	} else {
		if first <= 0 || first > 10000 {
			first = 1000
		}
		points, err = s.store.ListMetrics(ctx, p.TenantID, t.ID, name, after, first)
	}
	return points, s.internal(ctx, err)
}

// Worker returns a registered worker of the caller's tenant.
func (s *Service) Worker(ctx context.Context, id string) (*WorkerView, error) {
	ws, err := s.Workers(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.ID == id {
			return w, nil
		}
	}
	return nil, notFound("no worker %s", quote(id))
}
