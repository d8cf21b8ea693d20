package work

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// lockWait is how long a test watches a transaction that a lock should hold
// back, once nothing but the lock stands between it and the flag it sets.
// It is the suite's one fixed wait: nothing the store offers says that a
// transaction waits for a lock, so a test can only give one that a broken
// lock failed to stop the time to get through, and then look. A lock that
// holds passes however short the wait; a shorter wait only lets a broken
// lock slip through more often. What it covers is measured: with the lock
// broken, the flag is set 1-3 ms after the goroutine starts on SQLite and
// 1-15 ms after the transaction began on PostgreSQL (2 cores under load).
const lockWait = 50 * time.Millisecond

// watchLock waits while a transaction that a lock should hold back tries to
// get past it: starting is closed as its goroutine starts, began as its fn
// begins (before the lock is asked for).
//
// On PostgreSQL the transaction begins at once and its lock statement
// waits, so the watch starts when it began: beginning may mean opening a
// connection, which took up to 300 ms in a loaded run, far more than the
// lock statement. On SQLite the lock is the transaction itself (BEGIN
// IMMEDIATE, or the in-memory store's one connection), so began cannot come
// first, and the watch starts as the goroutine does.
func watchLock(b *harness.Bundle, starting, began <-chan struct{}) {
	<-starting
	if b.Store.Driver() == "postgres" {
		select {
		case <-began:
		case <-time.After(10 * time.Second):
			return // it cannot even begin: held back all the same
		}
	}
	time.Sleep(lockWait)
}

// Store checks the store as a whole: Ping, Driver, InTx's commit, rollback
// and error mapping, and LockTenant.
func Store(t *testing.T, setup harness.Setup) {
	storeCommitsAndLocks(t, setup)
	storeRollbacks(t, setup)
	storeTxErrors(t, setup)
}

// storeCommitsAndLocks checks the store answers and names its driver, that
// InTx commits, and that LockTenant holds a second transaction back.
func storeCommitsAndLocks(t *testing.T, setup harness.Setup) {
	t.Run("Ping answers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		harness.Must(t, b.Store.Ping(b.Ctx))
	})

	setup.Run(t, "Driver names sqlite or postgres", func(t *testing.T, b *harness.Bundle) {
		if d := b.Store.Driver(); d != "sqlite" && d != "postgres" {
			t.Fatalf("Driver() = %q", d)
		}
	})

	t.Run("InTx commits every write when fn returns nil", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		var g *model.Group
		var p *model.Pool
		harness.Must(t, b.Store.InTx(b.Ctx, func(q store.Queries) error {
			g = &model.Group{TenantID: b.Tenant.ID, Name: "in-tx"}
			if err := q.CreateGroup(b.Ctx, g); err != nil {
				return err
			}
			p = &model.Pool{TenantID: b.Tenant.ID, Name: "in-tx"}
			return q.CreatePool(b.Ctx, p)
		}))
		_, err := b.Store.GetGroup(b.Ctx, b.Tenant.ID, g.ID)
		harness.Must(t, err)
		_, err = b.Store.GetPool(b.Ctx, b.Tenant.ID, p.ID)
		harness.Must(t, err)
	})

	t.Run("LockTenant makes a second transaction on the tenant wait until the first ends", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		harness.Must(t, b.Store.LockTenant(b.Ctx, b.Tenant.ID)) // outside a transaction: returns at once
		held := make(chan struct{})
		release := make(chan struct{})
		firstDone := make(chan error, 1)
		go func() {
			firstDone <- b.Store.InTx(b.Ctx, func(q store.Queries) error {
				if err := q.LockTenant(b.Ctx, b.Tenant.ID); err != nil {
					return err
				}
				close(held)
				<-release
				return nil
			})
		}()
		<-held
		var second atomic.Bool
		secondDone := make(chan error, 1)
		starting, began := make(chan struct{}), make(chan struct{})
		go func() {
			close(starting)
			secondDone <- b.Store.InTx(b.Ctx, func(q store.Queries) error {
				close(began)
				err := q.LockTenant(b.Ctx, b.Tenant.ID)
				second.Store(true)
				return err
			})
		}()
		watchLock(b, starting, began)
		if second.Load() {
			t.Fatal("a second transaction took the tenant lock while the first held it")
		}
		close(release)
		harness.Must(t, <-firstDone)
		harness.Must(t, <-secondDone)
		if !second.Load() {
			t.Fatal("the second transaction never took the lock")
		}
	})
}

// storeRollbacks checks that InTx undoes everything on an error or a panic,
// links and sequence numbers included.
func storeRollbacks(t *testing.T, setup harness.Setup) {
	t.Run("InTx rolls back when fn returns an error, and returns that error", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		sentinel := errors.New("changed my mind")
		var seen bool
		err := b.Store.InTx(b.Ctx, func(q store.Queries) error {
			g := &model.Group{TenantID: b.Tenant.ID, Name: "rolled-back"}
			if err := q.CreateGroup(b.Ctx, g); err != nil {
				return err
			}
			// The transaction sees its own writes.
			if _, err := q.GetGroupByName(b.Ctx, b.Tenant.ID, "rolled-back"); err != nil {
				return err
			}
			seen = true
			if err := q.PutSetting(b.Ctx, "k", "v"); err != nil {
				return err
			}
			return sentinel
		})
		if !errors.Is(err, sentinel) {
			t.Fatalf("InTx returned %v, want the error fn returned", err)
		}
		if !seen {
			t.Fatal("the transaction did not see its own write")
		}
		_, err = b.Store.GetGroupByName(b.Ctx, b.Tenant.ID, "rolled-back")
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.GetSetting(b.Ctx, "k")
		harness.WantErr(t, err, store.ErrNotFound)
	})

	t.Run("InTx rolls back when fn panics and lets the panic through", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		type boom struct{}
		func() {
			defer func() {
				if r := recover(); r != (boom{}) {
					t.Fatalf("recovered %v, want the panic fn raised", r)
				}
			}()
			_ = b.Store.InTx(b.Ctx, func(q store.Queries) error {
				if err := q.CreateGroup(b.Ctx, &model.Group{TenantID: b.Tenant.ID, Name: "panicked"}); err != nil {
					return err
				}
				panic(boom{})
			})
			t.Fatal("InTx returned instead of panicking")
		}()
		_, err := b.Store.GetGroupByName(b.Ctx, b.Tenant.ID, "panicked")
		harness.WantErr(t, err, store.ErrNotFound)
		// The store still works: the connection went back to the pool.
		b.Group(t)
	})

	t.Run("InTx rolls back a profile with its links and a task, and later tasks still sort last", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		q, owner := b.Queue(t), b.User(t)
		before := b.Task(t, q, owner)
		pool := b.Pool(t)
		var inTx *model.Task
		err := b.Store.InTx(b.Ctx, func(tx store.Queries) error {
			if err := tx.CreateProfile(b.Ctx, &model.Profile{TenantID: b.Tenant.ID, Name: "tx-profile", Pools: []string{pool.ID}}); err != nil {
				return err
			}
			inTx = &model.Task{TenantID: b.Tenant.ID, OwnerID: owner.ID, ComputeResourceID: q.CR.ID, Name: "tx", Status: model.TaskQueued}
			if err := tx.CreateTask(b.Ctx, inTx); err != nil {
				return err
			}
			return errors.New("roll back")
		})
		if err == nil {
			t.Fatal("InTx returned nil")
		}
		list, err := b.Store.ListProfiles(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		for _, p := range list {
			if p.Name == "tx-profile" {
				t.Fatal("profile created in a rolled back transaction exists")
			}
		}
		// Its pool link went with it.
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, pool.ID))
		_, err = b.Store.GetTask(b.Ctx, b.Tenant.ID, inTx.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		after := b.Task(t, q, owner)
		if after.QueueSeq <= before.QueueSeq {
			t.Fatalf("QueueSeq after a rollback %d, want more than %d", after.QueueSeq, before.QueueSeq)
		}
	})
}

// storeTxErrors checks that errors in a transaction mean what they mean
// outside one.
func storeTxErrors(t *testing.T, setup harness.Setup) {
	t.Run("Queries in InTx map errors like the store does", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		g := b.Group(t)
		err := b.Store.InTx(b.Ctx, func(q store.Queries) error {
			_, err := q.GetGroup(b.Ctx, b.Other.ID, g.ID)
			return err
		})
		harness.WantErr(t, err, store.ErrNotFound)
		err = b.Store.InTx(b.Ctx, func(q store.Queries) error {
			return q.CreateGroup(b.Ctx, &model.Group{TenantID: b.Tenant.ID, Name: g.Name})
		})
		harness.WantErr(t, err, store.ErrConflict)
	})
}
