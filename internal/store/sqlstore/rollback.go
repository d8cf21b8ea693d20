package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/klique-ai/klique/internal/store"
)

// BeginRollback begins a transaction and returns a store.Store that runs
// every query in it and never commits: Close rolls everything back. It is
// for tests that want a migrated store and throw their writes away, as
// River's riverdrivertest does with test transactions: the conformance
// suite (package storetest) runs most of its subtests in one, so they share
// a few stores instead of each opening and migrating its own.
//
// Its InTx runs fn under a savepoint: released when fn returns nil, rolled
// back to when fn returns an error or panics. A failed statement inside fn
// therefore undoes only fn's writes and leaves the transaction usable, on
// PostgreSQL too (where it would otherwise abort the whole transaction).
//
// Everything runs on the transaction's one connection, so the store is for
// one goroutine at a time, and it cannot show what needs a second
// connection: locks that make another transaction wait, or concurrent
// writers. Ping runs a query on the transaction rather than on the pool,
// whose only connection may be the one the transaction holds.
func (s *Store) BeginRollback(ctx context.Context) (store.Store, error) {
	tx, err := s.base.SQL().BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return &rollbackStore{queries: *newQueries(s.base.OnTx(tx)), tx: tx, driver: s.Driver()}, nil
}

// rollbackStore is the store BeginRollback returns.
type rollbackStore struct {
	queries
	tx     *sql.Tx
	driver string
	// savepoints numbers the savepoints InTx takes.
	savepoints int
}

var _ store.Store = (*rollbackStore)(nil)

// InTx runs fn under a savepoint of the transaction. It returns fn's error
// unchanged (joined with the error of undoing fn's writes, if that fails),
// and lets a panic carry on after the rollback to the savepoint.
func (r *rollbackStore) InTx(ctx context.Context, fn func(q store.Queries) error) error {
	r.savepoints++
	name := "klique_sp_" + strconv.Itoa(r.savepoints)
	if _, err := r.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	done := false
	defer func() {
		if !done {
			// Reached on panic only: the error path undoes fn's writes
			// itself, to report a failure to do so.
			_ = r.undo(ctx, name)
		}
	}()
	if err := fn(&r.queries); err != nil {
		done = true
		if uerr := r.undo(ctx, name); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	done = true
	if _, err := r.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// undo rolls back to the savepoint name and releases it. It runs even when
// ctx is done, so that the transaction stays usable for the next call.
func (r *rollbackStore) undo(ctx context.Context, name string) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := r.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); err != nil {
		return fmt.Errorf("roll back to savepoint: %w", err)
	}
	if _, err := r.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// Ping checks that the database answers on the transaction's connection.
func (r *rollbackStore) Ping(ctx context.Context) error {
	var one int
	if err := r.tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("ping %s: %w", r.driver, err)
	}
	return nil
}

// Driver names the driver.
func (r *rollbackStore) Driver() string { return r.driver }

// Close rolls the transaction back. Closing twice is not an error.
func (r *rollbackStore) Close() error {
	if err := r.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("roll back: %w", err)
	}
	return nil
}
