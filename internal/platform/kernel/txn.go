package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Txn is one write: the queries of its transaction, who is acting, and the
// audit entries and events of the change. The entries are written in one
// batch when the write's function returns, inside the transaction; the
// events are published once it has committed.
type Txn struct {
	Ctx context.Context
	Q   store.Queries
	// P is who acts: a user, or a system actor such as the engine
	// (System).
	P   *identity.Principal
	Now time.Time

	audit  []*model.AuditEntry
	events []events.Event
}

// System is the principal of work the control plane does on its own, in a
// tenant: the engine's passes, the worker protocol, start-up. Its name is
// what the audit trail shows as the actor.
func System(tenantID, name string) *identity.Principal {
	return &identity.Principal{TenantID: tenantID, UserName: name}
}

// Write runs fn in one transaction as p, writes the audit entries fn
// recorded, and publishes fn's events after commit. Unexpected errors are
// logged (Internal); ErrRollback undoes the transaction and is returned
// as it is.
func (k *Kernel) Write(ctx context.Context, p *identity.Principal, fn func(t *Txn) error) error {
	var t *Txn
	err := k.Store.InTx(ctx, func(q store.Queries) error {
		t = &Txn{Ctx: ctx, Q: q, P: p, Now: k.Now()}
		if err := fn(t); err != nil {
			return err
		}
		if err := q.InsertAudits(ctx, t.audit); err != nil {
			return fmt.Errorf("write the audit trail: %w", err)
		}
		return nil
	})
	cacheFrom(ctx).clear()
	if err != nil {
		if errors.Is(err, ErrRollback) {
			return err
		}
		return k.Internal(ctx, err)
	}
	for _, e := range t.events {
		if IdentityKind(e.Kind) {
			k.IdentityChanged()
			break
		}
	}
	for _, e := range t.events {
		k.Events.Publish(e)
	}
	return nil
}

// EventOption adds to the event a Record publishes.
type EventOption func(*events.Event)

// OnPool marks the event as about work on a pool, so that the pool's
// waiting workers wake.
func OnPool(poolID string) EventOption { return func(e *events.Event) { e.PoolID = poolID } }

// Record is the one audit writer: it records a change made in the
// transaction (action "task.enqueued", on an object of a kind, id and name,
// belonging to a group or none) with a one-line detail, and queues the
// event of the same kind.
func (t *Txn) Record(action, kind, id, name, groupID, detail string, opts ...EventOption) {
	actorID, actorName, tenantID := "", "system", ""
	if t.P != nil {
		actorID, actorName, tenantID = t.P.UserID, t.P.UserName, t.P.TenantID
	}
	t.audit = append(t.audit, &model.AuditEntry{
		TenantID: tenantID, At: t.Now, ActorID: actorID, ActorName: actorName,
		Channel: string(identity.ChannelFrom(t.Ctx)), Action: action,
		ObjectKind: kind, ObjectID: id, ObjectName: name, Detail: detail,
	})
	e := events.Event{TenantID: tenantID, Kind: action, ObjectKind: kind, ObjectID: id, ObjectName: name,
		GroupID: groupID, ActorID: actorID, At: t.Now}
	for _, o := range opts {
		o(&e)
	}
	t.events = append(t.events, e)
}

// Publish queues an event that no audit entry goes with (a queue's state
// changed), to publish after commit.
func (t *Txn) Publish(e events.Event) { t.events = append(t.events, e) }
