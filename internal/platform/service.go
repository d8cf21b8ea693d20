// Package platform is the one governed path. Every operation of every
// channel (GraphQL, the CLI, MCP tools, the worker API, the gateway) calls
// this service, which checks identity and role with tenant isolation first,
// validates input, writes the change and its audit entry in one transaction,
// and publishes events once the change has committed. Resolvers and handlers
// stay thin: a rule written here holds everywhere.
//
// The caller's identity comes from the context (identity.PrincipalFrom), put
// there by the HTTP layer; nothing here reads headers.
package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/vault"
)

// Options configure a Service.
type Options struct {
	Store  store.Store
	Auth   *identity.Authenticator
	Events events.Broker
	Logger *slog.Logger
	// Now is the clock; time.Now when nil. Tests inject their own.
	Now func() time.Time
	// Vault seals secrets; without one, secrets cannot be set.
	Vault *vault.Vault
	// Agent tunes the worker protocol.
	Agent AgentOptions
}

// Service is the platform service.
type Service struct {
	store  store.Store
	auth   *identity.Authenticator
	events events.Broker
	log    *slog.Logger
	now    func() time.Time

	// estateMu serialises changes to one tenant's allocation model within a
	// replica; the store's tenant lock does it across replicas.
	estateMu sync.Map // tenant id -> *sync.Mutex
	// estates keeps each tenant's allocation model with its version.
	estates estateCache
	vault   *vault.Vault
	claims  claimWaiters
	keys    providerKeys
	guards  guardCache
	windows windowCache
	agent   AgentOptions
	// redact holds, per running task attempt, the secret values to cut
	// out of its log lines.
	redact sync.Map
	// subs holds the live subscriptions (subscription_ops.go).
	subs subscriptions
}

// New returns a service.
func New(o Options) *Service {
	s := &Service{store: o.Store, auth: o.Auth, events: o.Events, log: o.Logger, now: o.Now, vault: o.Vault, agent: o.Agent.withDefaults()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.events == nil {
		s.events = events.NewBus()
	}
	return s
}

// Store returns the service's store, for the parts of the server that need
// it directly (readiness checks).
func (s *Service) Store() store.Store { return s.store }

// Now returns the service's current time, in UTC and to the microsecond the
// stores keep.
func (s *Service) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// caller returns the principal of the request, or UNAUTHENTICATED.
func caller(ctx context.Context) (*identity.Principal, error) {
	p, ok := identity.PrincipalFrom(ctx)
	if !ok || p == nil {
		return nil, unauthenticated("sign in first: send an API key or access token as 'Authorization: Bearer <credential>'")
	}
	return p, nil
}

// txn is one write: the queries of its transaction, who is acting, and the
// events to publish once it commits.
type txn struct {
	ctx    context.Context
	q      store.Queries
	p      *identity.Principal
	now    time.Time
	events []events.Event
}

// write runs fn in one transaction and publishes its events after commit.
func (s *Service) write(ctx context.Context, p *identity.Principal, fn func(t *txn) error) error {
	var t *txn
	err := s.store.InTx(ctx, func(q store.Queries) error {
		t = &txn{ctx: ctx, q: q, p: p, now: s.Now()}
		return fn(t)
	})
	cacheFrom(ctx).clear()
	if err != nil {
		return s.internal(ctx, err)
	}
	for _, e := range t.events {
		if identityKind(e.Kind) {
			s.identityChanged()
			break
		}
	}
	for _, e := range t.events {
		s.events.Publish(e)
	}
	return nil
}

// record writes an audit entry for a change and queues its event.
func (t *txn) record(action, kind, id, name, groupID, detail string) error {
	actorID, actorName, tenantID := "", "system", ""
	if t.p != nil {
		actorID, actorName, tenantID = t.p.UserID, t.p.UserName, t.p.TenantID
	}
	e := &model.AuditEntry{
		TenantID: tenantID, At: t.now, ActorID: actorID, ActorName: actorName,
		Channel: string(identity.ChannelFrom(t.ctx)), Action: action,
		ObjectKind: kind, ObjectID: id, ObjectName: name, Detail: detail,
	}
	if err := t.q.InsertAudit(t.ctx, e); err != nil {
		return fmt.Errorf("audit %s %s: %w", action, name, err)
	}
	t.events = append(t.events, events.Event{
		TenantID: tenantID, Kind: action, ObjectKind: kind, ObjectID: id, ObjectName: name,
		GroupID: groupID, ActorID: actorID, At: t.now,
	})
	return nil
}

// internal logs an unexpected error with the request id and returns it
// unchanged; errors meant for people pass through untouched.
func (s *Service) internal(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) || errors.Is(err, identity.ErrUnauthenticated) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, errDryRun) {
		return err
	}
	s.log.ErrorContext(ctx, "platform operation failed", "err", err, "request_id", identity.RequestIDFrom(ctx))
	return err
}

// lockEstate serialises allocation-model changes of one tenant in this
// replica.
func (s *Service) lockEstate(tenantID string) func() {
	m, _ := s.estateMu.LoadOrStore(tenantID, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}
