package fleet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Task credentials (agentapi.TaskCredentialPrefix): a worker hands one to
// work that runs out of its reach (an HPC batch job on a compute node), so
// that the task's own process reports its logs, metrics and end. The
// credential is the vault's sealed record of who issued it for which task
// and attempt: nothing is stored, every replica with the vault key can
// check it, and it is refused once its attempt is no longer current (the
// same fence every report passes), once it expires, or once the worker
// credential that issued it is revoked.

// TaskCredentialTTL bounds how long a task credential is accepted: long
// enough for a job that waits in a busy HPC queue and then runs for days.
const TaskCredentialTTL = 30 * 24 * time.Hour

// taskCredentialContext binds sealed task credentials to their use.
const taskCredentialContext = "klique task credential v1"

type taskCredential struct {
	Tenant     string `json:"tn"`
	Pool       string `json:"pl"`
	Credential string `json:"cr"`
	Task       string `json:"tk"`
	Attempt    int    `json:"at"`
	Expires    int64  `json:"ex"`
}

// TaskScope is what a task credential allows: the reports of one task's
// one attempt.
type TaskScope struct {
	TaskID  string
	Attempt int
}

type taskScopeKey struct{}

// WithTaskScope marks a worker identity as coming from a task credential.
func WithTaskScope(ctx context.Context, s *TaskScope) context.Context {
	return context.WithValue(ctx, taskScopeKey{}, s)
}

func taskScopeFrom(ctx context.Context) *TaskScope {
	s, _ := ctx.Value(taskScopeKey{}).(*TaskScope)
	return s
}

// notTaskScoped refuses calls a task credential may not make: registering,
// claiming, heartbeating, issuing credentials, acting as the autoscaler.
func notTaskScoped(ctx context.Context, what string) error {
	if s := taskScopeFrom(ctx); s != nil {
		return kernel.Forbidden("a task credential may only report the logs, metrics, app readiness and end of task %s; %s needs the worker credential", s.TaskID, what)
	}
	return nil
}

// checkTaskScope refuses a report about another task or attempt than the
// task credential's.
func checkTaskScope(ctx context.Context, taskID string, attempt int) error {
	s := taskScopeFrom(ctx)
	if s == nil || (s.TaskID == taskID && s.Attempt == attempt) {
		return nil
	}
	return kernel.Forbidden("this task credential is for attempt %d of task %s only", s.Attempt, s.TaskID)
}

// IssueTaskCredential gives the worker a credential for one attempt of a
// task it holds and that is running.
func (s *Fleet) IssueTaskCredential(ctx context.Context, taskID string, attempt int) (*agentapi.TaskCredentialResponse, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if err := notTaskScoped(ctx, "issuing a task credential"); err != nil {
		return nil, err
	}
	if s.k.Vault == nil {
		return nil, kernel.Unavailable("task credentials need the vault key (KLIQUE_VAULT_KEY) and none is configured")
	}
	if _, err := s.myTask(ctx, s.k.Store, w, taskID, attempt, true); err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	exp := s.k.Now().Add(TaskCredentialTTL)
	raw, err := json.Marshal(taskCredential{Tenant: w.TenantID, Pool: w.PoolID, Credential: w.CredentialID,
		Task: taskID, Attempt: attempt, Expires: exp.Unix()})
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("encode task credential: %w", err))
	}
	sealed, err := s.k.Vault.Seal(raw, taskCredentialContext)
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("seal task credential: %w", err))
	}
	return &agentapi.TaskCredentialResponse{Token: agentapi.TaskCredentialPrefix + base64.RawURLEncoding.EncodeToString(sealed),
		ExpiresAt: exp}, nil
}

// AuthenticateTaskCredential checks a task credential and returns the
// worker identity it acts as (the issuing worker credential's pool) and
// the one attempt it may report on. Attach both to the context
// (identity.WithWorker, WithTaskScope).
func (s *Fleet) AuthenticateTaskCredential(ctx context.Context, secret string) (*identity.Worker, *TaskScope, error) {
	bad := kernel.Unauthenticated("the task credential is not valid: it is issued by the submitter for one task attempt (kqt_…)")
	if s.k.Vault == nil || !strings.HasPrefix(secret, agentapi.TaskCredentialPrefix) {
		return nil, nil, bad
	}
	sealed, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(secret, agentapi.TaskCredentialPrefix))
	if err != nil {
		return nil, nil, bad
	}
	raw, err := s.k.Vault.Open(sealed, taskCredentialContext)
	if err != nil {
		return nil, nil, bad
	}
	var c taskCredential
	if err := json.Unmarshal(raw, &c); err != nil || c.Task == "" {
		return nil, nil, bad
	}
	if s.k.Now().Unix() > c.Expires {
		return nil, nil, kernel.Unauthenticated("the task credential of task %s expired", c.Task)
	}
	creds, err := s.k.Store.ListWorkerCredentials(ctx, c.Tenant)
	if err != nil {
		return nil, nil, s.k.Internal(ctx, err)
	}
	live := false
	for _, wc := range creds {
		if wc.ID == c.Credential && wc.PoolID == c.Pool && wc.RevokedAt == nil {
			live = true
		}
	}
	if !live {
		return nil, nil, kernel.Unauthenticated("the worker credential that issued this task credential was revoked")
	}
	pool, err := s.k.Store.GetPool(ctx, c.Tenant, c.Pool)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, kernel.Unauthenticated("the pool of this task credential no longer exists")
	}
	if err != nil {
		return nil, nil, s.k.Internal(ctx, err)
	}
	return &identity.Worker{TenantID: c.Tenant, PoolID: c.Pool, PoolName: pool.Name, CredentialID: c.Credential},
		&TaskScope{TaskID: c.Task, Attempt: c.Attempt}, nil
}
