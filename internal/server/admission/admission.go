// Package admission puts the GraphQL API's writes ahead of its reads: a
// bounded number of queries execute at once, mutations never wait.
package admission

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Reads puts writes ahead of reads. Without it, fifty dashboards
// listing tasks back to back hold every CPU and every database connection,
// and an enqueue waits behind them (issue 34: 39 enqueues/s and a 234 ms
// p99 under 50 readers, against 679/s alone). So at most slots queries
// execute at once; the others wait their turn here, before they cost
// anything. Mutations are never counted nor held: a write finds the CPU
// and a connection free of all but slots reads. Subscriptions are not
// held either: their updates are rendered once and shared (SharedRenders),
// and a subscriber waiting behind list reads would fall behind its feed.
//
// Waiting is fair enough: Go's channel send wakes waiters in order. A
// query whose client hangs up while it waits leaves without running.
type Reads struct {
	slots   chan struct{}
	waiting atomic.Int64
}

// defaultReadSlots is the number of queries executing at once when the
// configuration does not say: enough to keep the CPUs busy while some wait
// on the database, few enough that a write is never far behind. Two per
// CPU gave the lowest enqueue tail at the least cost to lists among 1, 2,
// 4 and 8 per CPU (docs/performance.md, issue 34 part 3).
func defaultReadSlots() int { return 2 * runtime.GOMAXPROCS(0) }

// New admits slots queries at once (0 or less: the default, two per CPU).
func New(slots int) *Reads {
	if slots <= 0 {
		slots = defaultReadSlots()
	}
	return &Reads{slots: make(chan struct{}, slots)}
}

// Register exports how many queries wait for a slot, and how many run.
func (a *Reads) Register(r prometheus.Registerer) {
	r.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "klique_graphql_reads_waiting",
			Help: "GraphQL queries waiting for one of the read slots (mutations never wait for one).",
		}, func() float64 { return float64(a.waiting.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "klique_graphql_reads_running",
			Help: "GraphQL queries holding a read slot.",
		}, func() float64 { return float64(len(a.slots)) }),
	)
}

// Middleware is the operation middleware that holds a query until a slot
// is free, and frees it once the query's response is rendered.
func (a *Reads) Middleware(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	if oc == nil || oc.Operation == nil || oc.Operation.Operation != ast.Query {
		return next(ctx)
	}
	a.waiting.Add(1)
	select {
	case a.slots <- struct{}{}:
		a.waiting.Add(-1)
	case <-ctx.Done():
		a.waiting.Add(-1)
		err := gqlerror.Errorf("request cancelled")
		errcode.Set(err, "CANCELLED") // as every operation whose request ended
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{err}})
	}
	var release sync.Once
	free := func() { release.Do(func() { <-a.slots }) }
	h := next(ctx)
	// A query's handler renders its one response when called, and gqlgen
	// calls it once; the slot is held until then. A transport that never
	// calls it would keep the slot, so the request's end frees it too.
	stop := context.AfterFunc(ctx, free)
	return func(ctx context.Context) *graphql.Response {
		defer func() {
			stop()
			free()
		}()
		return h(ctx)
	}
}
