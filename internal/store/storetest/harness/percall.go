package harness

import (
	"context"

	"github.com/klique-ai/klique/internal/store"
)

//go:generate go run gen_percall.go

// perCall is a store.Store that runs each call of store.Queries in an InTx
// of its own on s. Over a store from sqlstore's BeginRollback, whose InTx is
// a savepoint, it gives a subtest in a test transaction what a store of its
// own gives it: a call that fails leaves nothing behind (a profile whose
// pool links fail is not half written), and on PostgreSQL a failed statement
// does not abort the transaction the rest of the subtest runs in.
//
// Its methods for store.Queries are generated (percall_gen.go).
type perCall struct{ s store.Store }

var _ store.Store = perCall{}

// InTx, Ping, Driver and Close are s's own.
func (pc perCall) InTx(ctx context.Context, fn func(q store.Queries) error) error {
	return pc.s.InTx(ctx, fn)
}

func (pc perCall) Ping(ctx context.Context) error { return pc.s.Ping(ctx) }

func (pc perCall) Driver() string { return pc.s.Driver() }

func (pc perCall) Close() error { return pc.s.Close() }

// call runs fn in an InTx of s and returns what it returned.
func call[T any](ctx context.Context, s store.Store, fn func(tx store.Queries) (T, error)) (T, error) {
	var v T
	err := s.InTx(ctx, func(tx store.Queries) error {
		var err error
		v, err = fn(tx)
		return err
	})
	return v, err
}
