// Package harness is what every part of the store conformance suite
// (package storetest) stands on: the bundle a subtest starts from, the
// setup that lends it a rolled back transaction on a shared store or gives
// it a store of its own, the per-call savepoint wrapper that makes a test
// transaction behave like a store, the fixture builders and the checks.
//
// It is a package of its own so that the suites can be split by concern
// into packages of reasonable size while they share one harness; it holds
// no tests itself.
package harness

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Setup gives a subtest the bundle it starts from. Its store is a
// transaction rolled back when the subtest ends; with OwnStore it is a
// store of the subtest's own.
type Setup func(t *testing.T, opts ...Option) *Bundle

// Option changes what Setup gives a subtest.
type Option int

// OwnStore gives a subtest a fresh store of its own rather than a test
// transaction, for what one transaction cannot show: InTx itself, a lock
// that makes another transaction wait, concurrent callers on several
// connections.
const OwnStore Option = 1

// NewSetup opens the shared stores now, on the test that runs the suite (so
// that they live as long as it does), and returns the setup its subtests
// call. newStore must return a new, empty store each time it is called and
// close it when its test ends. When the driver's stores cannot
// run a rolled back transaction, every subtest gets a store of its own.
func NewSetup(t *testing.T, newStore func(t *testing.T) store.Store) Setup {
	t.Helper()
	pool := newStorePool(t, newStore)
	return func(t *testing.T, opts ...Option) *Bundle {
		t.Helper()
		if pool == nil || slices.Contains(opts, OwnStore) {
			return newBundle(t, newStore(t))
		}
		return newBundle(t, pool.begin(t))
	}
}

// Bundle is what every subtest starts from: an empty store (or a
// transaction on one) holding two tenants, so that each test can check that
// the other tenant's objects stay out of reach.
type Bundle struct {
	Ctx   context.Context
	Store store.Store
	// Tenant is where fixtures go; Other is a second tenant for isolation
	// checks.
	Tenant *model.Tenant
	Other  *model.Tenant
	// Now has nanoseconds and a zone other than UTC, so that round trips
	// check the store's truncation to microseconds and conversion to UTC.
	Now time.Time
	// seq numbers fixtures, to give them unique names; Swapped shares it.
	seq *int
}

func newBundle(t *testing.T, s store.Store) *Bundle {
	t.Helper()
	b := &Bundle{
		Ctx:   t.Context(),
		Store: s,
		Now:   time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600)),
		seq:   new(int),
	}
	b.Tenant = b.CreateTenant(t, "acme")
	b.Other = b.CreateTenant(t, "globex")
	return b
}

// CreateTenant creates a tenant named name.
func (b *Bundle) CreateTenant(t *testing.T, name string) *model.Tenant {
	t.Helper()
	tn := &model.Tenant{ID: model.NewID(), Name: name, DisplayName: name + " Inc.", CreatedAt: b.Now}
	Must(t, b.Store.CreateTenant(b.Ctx, tn))
	return tn
}

// At returns b.Now plus i minutes.
func (b *Bundle) At(i int) time.Time { return b.Now.Add(time.Duration(i) * time.Minute) }

// Seq returns the next number of the bundle's count, the one that makes
// fixture names unique, for a builder that needs a number of its own.
func (b *Bundle) Seq() int {
	*b.seq++
	return *b.seq
}

// Swapped returns the bundle seen from the other tenant: its fixtures go to
// b.Other, and its Other is b.Tenant. It shares b's store and count.
func (b *Bundle) Swapped() *Bundle {
	s := *b
	s.Tenant, s.Other = b.Other, b.Tenant
	return &s
}

// Name returns a fresh name with the given prefix.
func (b *Bundle) Name(prefix string) string {
	return fmt.Sprintf("%s-%03d", prefix, b.Seq())
}

// Run runs test as a parallel subtest of t named name, on a bundle of its
// own, as nearly every subtest of the suite runs.
func (setup Setup) Run(t *testing.T, name string, test func(t *testing.T, b *Bundle)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		test(t, setup(t))
	})
}
