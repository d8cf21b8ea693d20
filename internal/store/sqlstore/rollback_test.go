package sqlstore_test

import (
	"errors"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/postgres"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/store/sqlstore"
)

func TestBeginRollback(t *testing.T) {
	t.Parallel()
	for _, d := range []struct {
		name string
		open func(t *testing.T) (store.Store, error)
	}{
		{"sqlite", func(t *testing.T) (store.Store, error) { return sqlite.Open(t.Context(), sqlite.Memory) }},
		{"postgres", func(t *testing.T) (store.Store, error) {
			return postgres.Open(t.Context(), pgtest.RequirePostgresURL(t))
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			s, err := d.open(t)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			exerciseRollback(t, s.(*sqlstore.Store))
		})
	}
}

func exerciseRollback(t *testing.T, s *sqlstore.Store) {
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	present := func(q store.Queries, name string) bool {
		t.Helper()
		_, err := q.GetTenantByName(ctx, name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	rb, err := s.BeginRollback(ctx)
	must(err)
	must(rb.Ping(ctx))
	if rb.Driver() != s.Driver() {
		t.Fatalf("Driver() = %q, want %q", rb.Driver(), s.Driver())
	}
	must(rb.CreateTenant(ctx, &model.Tenant{Name: "acme"}))

	// A failed statement undoes what fn wrote and leaves the transaction
	// usable (PostgreSQL would otherwise refuse every later statement).
	err = rb.InTx(ctx, func(q store.Queries) error {
		if err := q.CreateTenant(ctx, &model.Tenant{Name: "initech"}); err != nil {
			return err
		}
		return q.CreateTenant(ctx, &model.Tenant{Name: "acme"})
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("InTx = %v, want the conflict fn returned", err)
	}
	if present(rb, "initech") || !present(rb, "acme") {
		t.Fatal("a failed InTx did not undo exactly its own writes")
	}

	// A panic undoes fn's writes and carries on.
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("InTx swallowed the panic")
			}
		}()
		_ = rb.InTx(ctx, func(q store.Queries) error {
			must(q.CreateTenant(ctx, &model.Tenant{Name: "panicked"}))
			panic("boom")
		})
	}()
	if present(rb, "panicked") {
		t.Fatal("a panicking InTx left its write behind")
	}

	// fn returning nil keeps its writes, in the transaction.
	must(rb.InTx(ctx, func(q store.Queries) error { return q.CreateTenant(ctx, &model.Tenant{Name: "globex"}) }))
	if !present(rb, "globex") {
		t.Fatal("a released savepoint lost its write")
	}

	// Close throws everything away; closing again is harmless.
	must(rb.Close())
	must(rb.Close())
	for _, name := range []string{"acme", "globex"} {
		if present(s, name) {
			t.Fatalf("tenant %s outlived the rolled back transaction", name)
		}
	}
}
