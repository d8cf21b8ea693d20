package kernel_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/kernel/kerneltest"
	"github.com/klique-ai/klique/internal/store"
)

// seen is a broker that records each event with whether the object it
// names could be read, outside the transaction, when it was published.
type seen struct {
	st        store.Store
	mu        sync.Mutex
	published []events.Event
	committed []bool
}

func (b *seen) Publish(e events.Event) {
	_, err := b.st.GetTenant(context.Background(), e.ObjectID)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published = append(b.published, e)
	b.committed = append(b.committed, err == nil)
}

func (b *seen) Subscribe(int, func(events.Event) bool) *events.Subscription { return nil }

type world struct {
	k      *kernel.Kernel
	st     store.Store
	events *seen
	ctx    context.Context
	// bodies counts the runs of createTenant's body.
	bodies int
}

func newWorld(t *testing.T, role model.Role) *world {
	t.Helper()
	ctx := context.Background()
	st := kerneltest.Store(t)
	b := &seen{st: st}
	w := &world{k: kernel.New(kernel.Options{Store: st, Events: b}), st: st, events: b}
	w.ctx = identity.WithPrincipal(ctx, &identity.Principal{TenantID: "t1", UserID: "u1", UserName: "alice", Role: role})
	return w
}

// createTenant is an operation that creates a tenant of the given name
// and records it; fail makes its body fail after the write.
func (w *world) createTenant(name, key string, fail error) kernel.Op[*model.Tenant] {
	return kernel.Op[*model.Tenant]{
		Name: "createTestTenant", Right: kernel.RightWrite, What: "create test tenants",
		IdempotencyKey: key, Request: name,
		ResultID: func(t *model.Tenant) string { return t.ID },
		Replay:   func(ctx context.Context, id string) (*model.Tenant, error) { return w.st.GetTenant(ctx, id) },
		Body: func(t *kernel.Txn) (*model.Tenant, kernel.Audit, error) {
			w.bodies++
			tn := &model.Tenant{ID: model.NewID(), Name: name, CreatedAt: t.Now}
			if err := t.Q.CreateTenant(t.Ctx, tn); err != nil {
				return nil, kernel.Audit{}, err
			}
			return tn, kernel.Audit{Action: "tenant.created", Kind: "tenant", ID: tn.ID, Name: name, Detail: "created " + name}, fail
		},
	}
}

func (w *world) audits(t *testing.T) []*model.AuditEntry {
	t.Helper()
	es, err := w.st.ListAudit(context.Background(), "t1", store.AuditFilter{ObjectKind: "tenant"}, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestRunRefusesACallerWithoutTheRight(t *testing.T) {
	w := newWorld(t, model.RoleViewer)
	_, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "", nil))
	if kernel.ErrorCode(err) != kernel.CodeForbidden {
		t.Fatalf("a viewer ran a write: %v", err)
	}
	if err.Error() != "a viewer cannot create test tenants" {
		t.Errorf("refusal = %q", err)
	}
	if w.bodies != 0 || len(w.audits(t)) != 0 || len(w.events.published) != 0 {
		t.Errorf("a refused operation ran its body %d times, wrote %d audit entries, published %d events", w.bodies, len(w.audits(t)), len(w.events.published))
	}
	if _, err := kernel.Run(context.Background(), w.k, w.createTenant("beta", "", nil)); kernel.ErrorCode(err) != kernel.CodeUnauthenticated {
		t.Errorf("no caller: %v", err)
	}
}

func TestRunAnswersAnIdempotentRetryWithTheFirstResult(t *testing.T) {
	w := newWorld(t, model.RoleMember)
	first, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "key-1", nil))
	if err != nil {
		t.Fatal(err)
	}
	again, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "key-1", nil))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || w.bodies != 1 {
		t.Errorf("a retry with the same key made %s after %s (bodies run: %d); it must answer the first", again.ID, first.ID, w.bodies)
	}
	_, err = kernel.Run(w.ctx, w.k, w.createTenant("gamma", "key-1", nil))
	if kernel.ErrorCode(err) != kernel.CodeConflict {
		t.Errorf("the key reused for another request: %v, want a CONFLICT", err)
	}
	if _, err := kernel.Run(w.ctx, w.k, w.createTenant("epsilon", "", nil)); err != nil || w.bodies != 2 {
		t.Errorf("without a key every call runs: %v, bodies %d", err, w.bodies)
	}
}

func TestRunWritesExactlyOneAuditEntry(t *testing.T) {
	w := newWorld(t, model.RoleMember)
	tn, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "key-1", nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "key-1", nil)); err != nil {
		t.Fatal(err)
	}
	es := w.audits(t)
	if len(es) != 1 {
		t.Fatalf("%d audit entries after an operation and its retry; want 1", len(es))
	}
	if e := es[0]; e.Action != "tenant.created" || e.ObjectID != tn.ID || e.ActorName != "alice" || e.Detail != "created beta" {
		t.Errorf("audit entry %+v", e)
	}
	// A body that says nothing of what it did is refused and undone.
	op := w.createTenant("delta", "", nil)
	body := op.Body
	op.Body = func(t *kernel.Txn) (*model.Tenant, kernel.Audit, error) {
		out, _, err := body(t)
		return out, kernel.Audit{}, err
	}
	if _, err := kernel.Run(w.ctx, w.k, op); err == nil {
		t.Error("an operation without an audit entry committed")
	}
	if _, err := w.st.GetTenantByName(context.Background(), "delta"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the change of an operation without an audit entry was kept: %v", err)
	}
}

func TestRunPublishesEventsOnlyAfterCommit(t *testing.T) {
	w := newWorld(t, model.RoleMember)
	tn, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.events.published) != 1 {
		t.Fatalf("%d events published; want 1", len(w.events.published))
	}
	if e := w.events.published[0]; e.Kind != "tenant.created" || e.ObjectID != tn.ID {
		t.Errorf("event %+v", e)
	}
	if !w.events.committed[0] {
		t.Error("the event was published before its change committed: a subscriber could not read it")
	}
}

func TestAnErrorInTheBodyRollsEverythingBack(t *testing.T) {
	w := newWorld(t, model.RoleMember)
	boom := kernel.Invalid("no tenant named beta today")
	if _, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "key-1", boom)); !errors.Is(err, boom) {
		t.Fatalf("the body's error: %v", err)
	}
	if _, err := w.st.GetTenantByName(context.Background(), "beta"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the failed body's change was kept: %v", err)
	}
	if n := len(w.audits(t)); n != 0 {
		t.Errorf("%d audit entries of a failed operation", n)
	}
	if n := len(w.events.published); n != 0 {
		t.Errorf("%d events of a failed operation", n)
	}
	// Its key was not kept either: the retry runs.
	if _, err := kernel.Run(w.ctx, w.k, w.createTenant("beta", "key-1", nil)); err != nil || w.bodies != 2 {
		t.Errorf("the retry of a failed operation: %v (bodies run %d)", err, w.bodies)
	}
}

func TestAnUnauditedBodyCommitsWithoutAnAuditEntry(t *testing.T) {
	w := newWorld(t, model.RoleMember)
	op := w.createTenant("beta", "", nil)
	op.Unaudited = true
	body := op.Body
	op.Body = func(t *kernel.Txn) (*model.Tenant, kernel.Audit, error) {
		out, _, err := body(t)
		t.Publish(events.Event{TenantID: "t1", Kind: "tenant.touched", ObjectID: out.ID})
		return out, kernel.Audit{}, err
	}
	tn, err := kernel.Run(w.ctx, w.k, op)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.GetTenant(context.Background(), tn.ID); err != nil {
		t.Errorf("an unaudited operation's change was not kept: %v", err)
	}
	if n := len(w.audits(t)); n != 0 {
		t.Errorf("an unaudited operation wrote %d audit entries", n)
	}
	if len(w.events.published) != 1 || w.events.published[0].Kind != "tenant.touched" || !w.events.committed[0] {
		t.Errorf("an unaudited operation's own event, after commit: %+v", w.events.published)
	}
}
