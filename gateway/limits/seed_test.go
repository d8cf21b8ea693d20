package limits_test

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/redistest"
)

// A budget counter is seeded from a ledger read made before the seed is
// written, and calls settle in between: a call that answered after the
// read (its row not in it) and whose reservation left the lapse set
// before the seed (or was never in it: made on the fallback while Redis
// was out of reach) is in neither. Its spend must still be in the
// counter, or the budget is overspent by it from then on. Each case runs
// the steps of a gateway's seed in order, with the settles between the
// ledger read (a number given to Seed) and the seed: a counter behind the
// ledger (a partition, or a Redis restored from an older snapshot), a
// counter that is gone (a Redis that restarted empty), and a seed made at
// an older epoch than the one the settles came in.
func TestASettleBetweenTheLedgerReadAndTheSeedIsCounted(t *testing.T) {
	c, prefix := redistest.Require(t)
	now := time.Now()
	w := limits.Window{Key: "month", Limit: 100_000, Ends: now.Add(24 * time.Hour), Seeded: true}
	call := func(id string, amount int64) limits.Request {
		win := w
		win.Amount = amount
		return limits.Request{ID: id, Windows: []limits.Window{win}, Expires: now.Add(time.Minute)}
	}
	count := func(l *limits.Redis) int64 {
		t.Helper()
		got, err := l.Peek(ctx, []limits.Window{w}, now)
		must(t, err)
		return got[0]
	}
	// due reserves a call that finds the counter due for a seed, and
	// returns the epoch to seed it at.
	due := func(l *limits.Redis) int64 {
		t.Helper()
		d, err := l.Reserve(ctx, call("due", 10), now)
		must(t, err)
		if len(d.Unseeded) != 1 {
			t.Fatalf("the counter is not due for a seed: %+v", d)
		}
		return d.Epoch
	}

	t.Run("behind the ledger", func(t *testing.T) {
		l := limits.NewRedis(c, prefix+"behind:")
		must(t, l.Seed(ctx, w, 100, 0))
		if d, err := l.Reserve(ctx, call("held", 30), now); err != nil || !d.Allowed || d.Used[0] != 130 {
			t.Fatalf("held: %+v %v", d, err)
		}
		// Redis missed spend (the fallback's, 400): a new epoch.
		must(t, l.Reconcile(ctx))
		epoch := due(l)
		// The ledger is read: 500, without the two calls below.
		const read = 500
		// held (reserved in Redis) settles to 20, and a call reserved on
		// the fallback settles here to 25.
		must(t, l.Settle(ctx, call("held", 30), []int64{20}))
		must(t, l.Settle(ctx, call("fallback", 40), []int64{25}))
		must(t, l.Seed(ctx, w, read, epoch))
		if got := count(l); got != read+20+25 {
			t.Fatalf("after the seed the count is %d; want the ledger's %d plus the 20 and 25 that settled after it was read", got, read)
		}
		// Reconciled: what settles now goes to the counter alone, and the
		// next reconciliation, from a ledger that holds every call, does
		// not count any of them again.
		must(t, l.Settle(ctx, call("late", 40), []int64{5}))
		must(t, l.Reconcile(ctx))
		must(t, l.Seed(ctx, w, read+20+25+5, due(l)))
		if got := count(l); got != read+20+25+5 {
			t.Fatalf("after the next reconciliation the count is %d; want %d", got, read+20+25+5)
		}
		if n, err := c.Exists(ctx, prefix+"behind:month#q").Result(); err != nil || n != 0 {
			t.Fatalf("the side key of a reconciled counter is still there (%d, %v)", n, err)
		}
	})

	t.Run("gone", func(t *testing.T) {
		l := limits.NewRedis(c, prefix+"gone:")
		must(t, l.Reconcile(ctx))
		epoch := due(l)
		must(t, l.Settle(ctx, call("fallback", 40), []int64{25}))
		must(t, l.Seed(ctx, w, 500, epoch))
		if got := count(l); got != 525 {
			t.Fatalf("after the seed the count is %d; want the ledger's 500 plus the 25 that settled after it was read", got)
		}
	})

	t.Run("seeded at an older epoch", func(t *testing.T) {
		l := limits.NewRedis(c, prefix+"older:")
		must(t, l.Reconcile(ctx))
		epoch := due(l)
		must(t, l.Reconcile(ctx)) // another replica reconciles meanwhile
		must(t, l.Settle(ctx, call("fallback", 40), []int64{25}))
		// A seed from the reading made at the older epoch: the counter
		// stays due, and keeps what settled for the next seed.
		must(t, l.Seed(ctx, w, 0, epoch))
		epoch = due(l)
		must(t, l.Seed(ctx, w, 500, epoch))
		if got := count(l); got != 525 {
			t.Fatalf("after the seed the count is %d; want the ledger's 500 plus the 25 that settled after it was read", got)
		}
	})
}

// The in-process fallback reads its budgets from the ledger again every so
// often (NewReseedingMemory), with the same gap between the read and the
// seed: what settles in it is added too.
func TestAFallbackCountsASettleBetweenTheLedgerReadAndTheSeed(t *testing.T) {
	t0 := time.Now()
	w := limits.Window{Key: "budget", Limit: 100_000, Ends: t0.Add(24 * time.Hour), Seeded: true}
	call := func(id string, amount int64) limits.Request {
		win := w
		win.Amount = amount
		return limits.Request{ID: id, Windows: []limits.Window{win}, Expires: t0.Add(time.Hour)}
	}
	m := limits.NewReseedingMemory(time.Minute)
	must(t, m.Seed(ctx, w, 100, 0))
	if d, err := m.Reserve(ctx, call("held", 30), t0); err != nil || !d.Allowed || d.Used[0] != 130 {
		t.Fatalf("held: %+v %v", d, err)
	}
	later := t0.Add(61 * time.Second)
	d, err := m.Reserve(ctx, call("due", 10), later)
	must(t, err)
	if len(d.Unseeded) != 1 {
		t.Fatalf("a minute on: %+v, want the budget read again", d)
	}
	// The ledger is read (500, without the two calls below), then held
	// settles to 20 and a call this process did not reserve (made on
	// Redis before it went out of reach) to 25, then the seed.
	must(t, m.Settle(ctx, call("held", 30), []int64{20}))
	must(t, m.Settle(ctx, call("redis", 40), []int64{25}))
	must(t, m.Seed(ctx, w, 500, d.Epoch))
	got, err := m.Peek(ctx, []limits.Window{w}, later)
	must(t, err)
	if got[0] != 545 {
		t.Fatalf("after the seed the count is %d; want the ledger's 500 plus the 20 and 25 that settled after it was read", got[0])
	}
}

// A Failover seeds a window on the limiter that found it due: a window
// the fallback asked for, while Redis was out of reach, is seeded on the
// fallback even if Redis is back by the time of the seed. Seeded on Redis
// instead, the fallback would still find it due, and Redis's counter
// would be marked reconciled at an epoch not its own, due once more.
func TestAFailoverSeedsWhereTheWindowWasFoundDue(t *testing.T) {
	primary := &flaky{Limiter: limits.NewMemory()}
	fallback := limits.NewMemory()
	now := time.Now()
	clock := now
	f := &limits.Failover{Primary: primary, Fallback: fallback, Retry: 20 * time.Millisecond, Now: func() time.Time { return clock }}
	w := limits.Window{Key: "budget", Limit: 1000, Amount: 10, Ends: now.Add(time.Hour), Seeded: true}
	req := limits.Request{ID: "a", Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	primary.down.Store(true)
	d, err := f.Reserve(ctx, req, now)
	must(t, err)
	if len(d.Unseeded) != 1 || !f.Degraded() {
		t.Fatalf("with Redis down: %+v (degraded %v), want the fallback to find the budget due", d, f.Degraded())
	}
	// Redis is back, and it is time to try it again, when the seed comes.
	primary.down.Store(false)
	clock = clock.Add(20 * time.Millisecond)
	must(t, f.Seed(ctx, w, 500, d.Epoch))
	if got, err := fallback.Peek(ctx, []limits.Window{w}, now); err != nil || got[0] != 500 {
		t.Fatalf("the fallback's count is %v (%v); want it seeded with the ledger's 500", got, err)
	}
	if got, err := primary.Peek(ctx, []limits.Window{w}, now); err != nil || got[0] != 0 {
		t.Fatalf("the primary's count is %v (%v); want it untouched by the fallback's seed", got, err)
	}
}

// A Redis restored from an older snapshot (its counts, markers and epoch
// all older) is reconciled by the first reserve that finds it so, even if
// this replica never saw an error (its client retried until the restored
// Redis answered): a count behind the ledger is never trusted. Epochs only
// grow, so the restored epoch is below the one the limiter last saw.
func TestARedisRestoredFromAnOlderSnapshotIsReconciled(t *testing.T) {
	c, prefix := redistest.Require(t)
	l := limits.NewRedis(c, prefix)
	now := time.Now()
	w := limits.Window{Key: "month", Limit: 1000, Amount: 10, Ends: now.Add(24 * time.Hour), Seeded: true}
	req := func(id string) limits.Request {
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	}
	reserve := func(id string, ledger int64) limits.Decision {
		t.Helper()
		d, err := l.Reserve(ctx, req(id), now)
		must(t, err)
		if len(d.Unseeded) > 0 {
			must(t, l.Seed(ctx, w, ledger, d.Epoch))
			if d, err = l.Reserve(ctx, req(id), now); err != nil || len(d.Unseeded) > 0 {
				t.Fatalf("still unseeded after a seed: %+v %v", d, err)
			}
		}
		return d
	}
	must(t, l.Reconcile(ctx))
	if d := reserve("a", 100); !d.Allowed || d.Used[0] != 110 {
		t.Fatalf("first call: %+v", d)
	}
	// The snapshot: the counter, its marker and the epoch as they are now.
	keys := []string{prefix + "month", prefix + "month#r", prefix + "epoch"}
	snapshot, err := c.MGet(ctx, keys...).Result()
	must(t, err)
	// Redis is cut off and back: reconciled; then 950 are spent.
	must(t, l.Reconcile(ctx))
	if d := reserve("b", 950); !d.Allowed || d.Used[0] != 970 {
		t.Fatalf("after the reconciliation: %+v, want the ledger's 950 + a's 10 held + 10", d)
	}
	// Redis restarts from the snapshot; no call saw it down.
	for i, k := range keys {
		must(t, c.Set(ctx, k, snapshot[i], 0).Err())
	}
	// What people are shown does not trust the snapshot's count either.
	h, err := l.Holdings(ctx, []limits.Window{w}, now)
	must(t, err)
	if h[0].Counted {
		t.Fatalf("the restored Redis's holdings: %+v, want the count not trusted", h[0])
	}
	d, err := l.Reserve(ctx, req("c"), now)
	must(t, err)
	if d.Allowed || len(d.Unseeded) != 1 {
		t.Fatalf("on the restored Redis: %+v, want the budget due for a seed, not the snapshot's count trusted", d)
	}
	must(t, l.Seed(ctx, w, 960, d.Epoch))
	if d, err := l.Reserve(ctx, req("c"), now); err != nil || !d.Allowed || d.Used[0] != 990 {
		t.Fatalf("after the seed: %+v %v, want the ledger's 960 + a's and b's 20 held + 10", d, err)
	}
}
