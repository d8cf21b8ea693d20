package harness

import (
	"context"
	"flag"
	"runtime"
	"testing"

	"github.com/klique-ai/klique/internal/store"
)

// rollbacker is a store that can run a subtest in a transaction it never
// commits (sqlstore.Store.BeginRollback).
type rollbacker interface {
	store.Store
	BeginRollback(ctx context.Context) (store.Store, error)
}

// storePool holds the stores that subtests run their transactions on: as
// many as subtests may run at once, each lent to one subtest at a time, so
// that test transactions never wait for each other (SQLite holds a
// database's write lock for the whole of a transaction, and two
// transactions on one PostgreSQL schema would wait on each other's
// uncommitted rows under the same unique keys, such as the tenant names
// every bundle creates). The stores stay empty: nothing is ever committed
// on them.
type storePool struct {
	idle chan rollbacker
}

// newStorePool opens the pool's stores now, on the test that runs the
// suite, so that they live as long as it does. It returns nil when the
// driver's stores cannot run a rolled back transaction.
func newStorePool(t *testing.T, newStore func(t *testing.T) store.Store) *storePool {
	t.Helper()
	n := parallelism()
	p := &storePool{idle: make(chan rollbacker, n)}
	for range n {
		s, ok := newStore(t).(rollbacker)
		if !ok {
			return nil
		}
		p.idle <- s
	}
	return p
}

// parallelism is how many subtests may run at once (go test -parallel,
// GOMAXPROCS by default), at most 8: past that subtests wait for a store,
// which costs less than opening more.
func parallelism() int {
	n := runtime.GOMAXPROCS(0)
	if f := flag.Lookup("test.parallel"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if v, ok := g.Get().(int); ok && v > 0 {
				n = v
			}
		}
	}
	return max(1, min(n, 8))
}

// begin lends t a store and begins a transaction on it. It returns the
// transaction as a store whose every call runs under a savepoint of its
// own (see perCall). When t ends the transaction is rolled back and the
// store goes back to the pool.
func (p *storePool) begin(t *testing.T) store.Store {
	t.Helper()
	var s rollbacker
	select {
	case s = <-p.idle:
	case <-t.Context().Done():
		t.Fatal("no store came free before the test ended")
	}
	t.Cleanup(func() { p.idle <- s })
	// Not t.Context(): it is done before cleanups run, and database/sql
	// would roll the transaction back on its own then, racing the next
	// subtest for the store.
	tx, err := s.BeginRollback(context.WithoutCancel(t.Context()))
	if err != nil {
		t.Fatalf("begin a test transaction: %v", err)
	}
	t.Cleanup(func() {
		if err := tx.Close(); err != nil {
			t.Errorf("roll back the test transaction: %v", err)
		}
	})
	return perCall{s: tx}
}
