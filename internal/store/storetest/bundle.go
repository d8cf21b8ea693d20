package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// setupFunc gives a subtest the bundle it starts from. Its store is a
// transaction rolled back when the subtest ends; with ownStore it is a
// store of the subtest's own.
type setupFunc func(t *testing.T, opts ...setupOption) *testBundle

type setupOption int

// ownStore gives a subtest a fresh store of its own rather than a test
// transaction, for what one transaction cannot show: InTx itself, a lock
// that makes another transaction wait, concurrent callers on several
// connections.
const ownStore setupOption = 1

// newSetup opens the shared stores now, on the test that runs the suite,
// and returns the setup its subtests call. When the driver's stores cannot
// run a rolled back transaction, every subtest gets a store of its own.
func newSetup(t *testing.T, newStore func(t *testing.T) store.Store) setupFunc {
	t.Helper()
	pool := newStorePool(t, newStore)
	return func(t *testing.T, opts ...setupOption) *testBundle {
		t.Helper()
		if pool == nil || slices.Contains(opts, ownStore) {
			return newBundle(t, newStore(t))
		}
		return newBundle(t, pool.begin(t))
	}
}

// testBundle is what every subtest starts from: an empty store (or a
// transaction on one) holding two tenants, so that each test can check that
// the other tenant's objects stay out of reach.
type testBundle struct {
	ctx   context.Context
	store store.Store
	// tenant is where fixtures go; other is a second tenant for isolation
	// checks.
	tenant *model.Tenant
	other  *model.Tenant
	// now has nanoseconds and a zone other than UTC, so that round trips
	// check the store's truncation to microseconds and conversion to UTC.
	now time.Time
	// n numbers fixtures, to give them unique names.
	n int
}

func newBundle(t *testing.T, s store.Store) *testBundle {
	t.Helper()
	b := &testBundle{
		ctx:   t.Context(),
		store: s,
		now:   time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600)),
	}
	b.tenant = b.createTenant(t, "acme")
	b.other = b.createTenant(t, "globex")
	return b
}

func (b *testBundle) createTenant(t *testing.T, name string) *model.Tenant {
	t.Helper()
	tn := &model.Tenant{ID: model.NewID(), Name: name, DisplayName: name + " Inc.", CreatedAt: b.now}
	must(t, b.store.CreateTenant(b.ctx, tn))
	return tn
}

// at returns b.now plus i minutes.
func (b *testBundle) at(i int) time.Time { return b.now.Add(time.Duration(i) * time.Minute) }

// seq returns the next number of the bundle's count, which makes fixture
// names unique.
func (b *testBundle) seq() int {
	b.n++
	return b.n
}

// name returns a fresh name with the given prefix.
func (b *testBundle) name(prefix string) string {
	return fmt.Sprintf("%s-%03d", prefix, b.seq())
}
