package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
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
	// Own are the control plane's own listeners, which an app instance's
	// reported address may never be (nil: none known).
	Own *appnet.Own
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
func (s *Fleet) CreateWorkerCredential(ctx context.Context, poolRef, name string) (*model.WorkerCredential, string, error) {
	if name == "" {
		name = "workers"
	}
	var pool *model.Pool
	var secret, prefix string
	var hash []byte
	c, err := kernel.Run(ctx, s.k, kernel.Op[*model.WorkerCredential]{
		Name: "createWorkerCredential", Right: kernel.RightAdmin, What: "create worker credentials",
		Check: func(*identity.Principal) error {
			if err := basis.CheckName(name); err != nil {
				return kernel.Invalid("worker credential %v", err)
			}
			return nil
		},
		Prepare: func(*identity.Principal) error {
			e, err := s.k.Estate(ctx)
			if err != nil {
				return err
			}
			if pool, err = kernel.FindPool(e, poolRef); err != nil {
				return err
			}
			secret, prefix, hash, err = identity.NewWorkerCredential()
			return err
		},
		Body: func(t *kernel.Txn) (*model.WorkerCredential, kernel.Audit, error) {
			c := &model.WorkerCredential{TenantID: t.P.TenantID, PoolID: pool.ID, Name: name, Prefix: prefix, Hash: hash,
				CreatedBy: t.P.UserName, CreatedAt: t.Now}
			if err := t.Q.CreateWorkerCredential(ctx, c); err != nil {
				return nil, kernel.Audit{}, err
			}
			return c, kernel.Audit{Action: "worker_credential.created", Kind: "worker_credential", ID: c.ID, Name: c.Name,
				Detail: fmt.Sprintf("credential %s… for the workers of pool %s", c.Prefix, pool.Name)}, nil
		},
	})
	if err != nil {
		return nil, "", err
	}
	return c, secret, nil
}

// WorkerCredentials lists the tenant's worker credentials (admins).
func (s *Fleet) WorkerCredentials(ctx context.Context) ([]*model.WorkerCredential, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "list worker credentials"); err != nil {
		return nil, err
	}
	cs, err := s.k.Store.ListWorkerCredentials(ctx, p.TenantID)
	return cs, s.k.Internal(ctx, err)
}

// RevokeWorkerCredential revokes a worker credential: its daemons are
// refused from their next call.
func (s *Fleet) RevokeWorkerCredential(ctx context.Context, id string) (*model.WorkerCredential, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*model.WorkerCredential]{
		Name: "revokeWorkerCredential", Right: kernel.RightAdmin, What: "revoke worker credentials",
		Body: func(t *kernel.Txn) (*model.WorkerCredential, kernel.Audit, error) {
			tenantID := t.P.TenantID
			if err := t.Q.RevokeWorkerCredential(ctx, tenantID, id, t.Now); errors.Is(err, store.ErrNotFound) {
				return nil, kernel.Audit{}, kernel.NotFound("no worker credential %s", kernel.Quote(id))
			} else if err != nil {
				return nil, kernel.Audit{}, err
			}
			list, err := t.Q.ListWorkerCredentials(ctx, tenantID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			var out *model.WorkerCredential
			for _, c := range list {
				if c.ID == id {
					out = c
				}
			}
			return out, kernel.Audit{Action: "worker_credential.revoked", Kind: "worker_credential", ID: id, Name: out.Name,
				Detail: "revoked " + out.Prefix + "…"}, nil
		},
	})
}

// Workers lists the tenant's registered workers: everyone in the tenant may
// see what capacity serves it.
func (s *Fleet) Workers(ctx context.Context) ([]*view.WorkerView, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := s.k.Store.ListWorkers(ctx, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return view.Workers(ws, e, s.k.Now(), s.agent.Lease), nil
}

// TenantWorkers lists a tenant's workers for the live views, which check
// what each subscriber may see themselves.
func (s *Fleet) TenantWorkers(ctx context.Context, tenantID string) ([]*view.WorkerView, error) {
	ws, err := s.k.Store.ListWorkers(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	return view.Workers(ws, e, s.k.Now(), s.agent.Lease), nil
}

// WorkerTasks lists the tasks a worker runs now that the caller may see.
func (s *Fleet) WorkerTasks(ctx context.Context, workerID string) ([]*model.Task, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	f := store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning}}
	if !p.IsAdmin() {
		f.RestrictToGroups, f.GroupIDs, f.VisibleToUserID = true, p.GroupIDs(), p.UserID
	}
	ts, err := s.k.Store.ListTasks(ctx, p.TenantID, f, model.Page{}, false)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	var out []*model.Task
	for _, t := range ts {
		if t.Run.WorkerID == workerID && kernel.SeesTask(p, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// AuthenticateWorker turns a worker credential into a worker identity.
func (s *Fleet) AuthenticateWorker(ctx context.Context, secret string) (*identity.Worker, error) {
	if len(secret) < len(identity.WorkerCredentialPrefix)+10 || secret[:len(identity.WorkerCredentialPrefix)] != identity.WorkerCredentialPrefix {
		return nil, kernel.Unauthenticated("the worker credential must be a kqw_… credential made with createWorkerCredential")
	}
	c, err := s.k.Store.GetWorkerCredentialByHash(ctx, identity.HashAPIKey(secret))
	if errors.Is(err, store.ErrNotFound) {
		return nil, kernel.Unauthenticated("unknown worker credential")
	}
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	if c.RevokedAt != nil {
		return nil, kernel.Unauthenticated("worker credential revoked")
	}
	pool, err := s.k.Store.GetPool(ctx, c.TenantID, c.PoolID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, kernel.Unauthenticated("the pool of this worker credential no longer exists")
	}
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return &identity.Worker{TenantID: c.TenantID, PoolID: c.PoolID, PoolName: pool.Name, CredentialID: c.ID}, nil
}

// Worker returns a registered worker of the caller's tenant.
func (s *Fleet) Worker(ctx context.Context, id string) (*view.WorkerView, error) {
	ws, err := s.Workers(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.ID == id {
			return w, nil
		}
	}
	return nil, kernel.NotFound("no worker %s", kernel.Quote(id))
}
