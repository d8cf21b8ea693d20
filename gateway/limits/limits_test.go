package limits_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/redistest"
)

// forEachLimiter runs fn against the in-process limiter and against Redis
// (KLIQUE_TEST_REDIS_URL), each with keys of its own.
func forEachLimiter(t *testing.T, fn func(t *testing.T, l limits.Limiter, key func(string) string)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		fn(t, limits.NewMemory(), func(s string) string { return t.Name() + "/" + s })
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c, prefix := redistest.Require(t)
		fn(t, limits.NewRedis(c, prefix), func(s string) string { return s })
	})
}

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReserveAndSettle(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		minute := now.Truncate(time.Minute).Add(time.Minute)
		rpm := limits.Window{Key: key("rpm"), Limit: 3, Amount: 1, Ends: minute}
		tpm := limits.Window{Key: key("tpm"), Limit: 1000, Amount: 400, Ends: minute}
		call := func(id string) limits.Request {
			return limits.Request{ID: id, Windows: []limits.Window{rpm, tpm}, Expires: now.Add(time.Minute)}
		}

		d, err := l.Reserve(ctx, call("a"), now)
		must(t, err)
		if !d.Allowed || d.Used[0] != 1 || d.Used[1] != 400 {
			t.Fatalf("first call: %+v", d)
		}
		d, err = l.Reserve(ctx, call("b"), now)
		must(t, err)
		if !d.Allowed || d.Used[1] != 800 {
			t.Fatalf("second call: %+v", d)
		}
		// The third would take tokens past 1,000: refused, and nothing of
		// it is taken, not even its request.
		d, err = l.Reserve(ctx, call("c"), now)
		must(t, err)
		if d.Allowed || d.Denied != 1 || d.Used[0] != 2 || d.Used[1] != 800 {
			t.Fatalf("third call: %+v", d)
		}
		// a used 150 tokens of its 400: the difference comes back.
		must(t, l.Settle(ctx, call("a"), []int64{1, 150}))
		got, err := l.Peek(ctx, []limits.Window{rpm, tpm}, now)
		must(t, err)
		if got[0] != 2 || got[1] != 550 {
			t.Fatalf("after settling a: %v", got)
		}
		// b used more than it reserved (a stream that ran past its
		// estimate): what was used is what counts.
		must(t, l.Settle(ctx, call("b"), []int64{1, 450}))
		d, err = l.Reserve(ctx, call("c"), now)
		must(t, err)
		if !d.Allowed || d.Used[0] != 3 || d.Used[1] != 1000 {
			t.Fatalf("c after the settles: %+v", d)
		}
		// The request limit is reached.
		d, err = l.Reserve(ctx, call("d"), now)
		must(t, err)
		if d.Allowed || d.Denied != 0 {
			t.Fatalf("d: %+v", d)
		}
	})
}

func TestAReservationNeverSettledLapses(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		w := limits.Window{Key: key("budget"), Limit: 100, Amount: 60, Ends: now.Add(time.Hour), Seeded: true}
		must(t, l.Seed(ctx, w, 0, 0))
		dead := limits.Request{ID: "dead", Windows: []limits.Window{w}, Expires: now.Add(50 * time.Millisecond)}
		d, err := l.Reserve(ctx, dead, now)
		must(t, err)
		if !d.Allowed {
			t.Fatalf("%+v", d)
		}
		live := limits.Request{ID: "live", Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
		if d, _ := l.Reserve(ctx, live, now); d.Allowed {
			t.Fatal("60 more fit in 100 while the first 60 are held")
		}
		// The gateway that made it died: after its expiry the amount is
		// given back.
		later := now.Add(100 * time.Millisecond)
		d, err = l.Reserve(ctx, live, later)
		must(t, err)
		if !d.Allowed || d.Used[0] != 60 {
			t.Fatalf("after the lapse: %+v", d)
		}
		// A settle arriving after the lapse adds what was used.
		must(t, l.Settle(ctx, dead, []int64{10}))
		got, err := l.Peek(ctx, []limits.Window{w}, later)
		must(t, err)
		if got[0] != 70 {
			t.Fatalf("after a late settle: %v", got)
		}
	})
}

func TestARateWindowKeepsAnUnsettledReservationUntilItEnds(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		w := limits.Window{Key: key("tpm"), Limit: 100, Amount: 60, Ends: now.Add(time.Minute)}
		r := limits.Request{ID: "r", Windows: []limits.Window{w}, Expires: now.Add(10 * time.Millisecond)}
		if d, _ := l.Reserve(ctx, r, now); !d.Allowed {
			t.Fatal("refused")
		}
		got, err := l.Peek(ctx, []limits.Window{w}, now.Add(time.Second))
		must(t, err)
		if got[0] != 60 {
			t.Fatalf("a rate reservation lapsed before its window ended: %v", got)
		}
		must(t, l.Settle(ctx, r, []int64{20}))
		if got, _ := l.Peek(ctx, []limits.Window{w}, now); got[0] != 20 {
			t.Fatalf("settled: %v", got)
		}
		// Settling into a window that is gone does not bring it back.
		gone := limits.Window{Key: key("gone"), Limit: 100, Amount: 5, Ends: now}
		must(t, l.Settle(ctx, limits.Request{ID: "x", Windows: []limits.Window{gone}}, []int64{7}))
		if got, _ := l.Peek(ctx, []limits.Window{gone}, now); got[0] != 0 {
			t.Fatalf("a settle recreated a counter: %v", got)
		}
	})
}

func TestBudgetsAreSeededFromTheLedger(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		budget := limits.Window{Key: key("month"), Limit: 1000, Amount: 100, Ends: now.Add(24 * time.Hour), Seeded: true}
		rate := limits.Window{Key: key("rpm"), Limit: 10, Amount: 1, Ends: now.Add(time.Minute)}
		r := limits.Request{ID: "r", Windows: []limits.Window{rate, budget}, Expires: now.Add(time.Minute)}
		d, err := l.Reserve(ctx, r, now)
		must(t, err)
		if d.Allowed || len(d.Unseeded) != 1 || d.Unseeded[0] != 1 {
			t.Fatalf("unseeded budget: %+v", d)
		}
		if got, _ := l.Peek(ctx, []limits.Window{rate}, now); got[0] != 0 {
			t.Fatalf("an unseeded reserve took from the rate window: %v", got)
		}
		must(t, l.Seed(ctx, budget, 850, 0))
		must(t, l.Seed(ctx, budget, 0, 0)) // a second seed does not overwrite
		d, err = l.Reserve(ctx, r, now)
		must(t, err)
		if !d.Allowed || d.Used[1] != 950 {
			t.Fatalf("seeded: %+v", d)
		}
		r.ID = "r2"
		if d, _ := l.Reserve(ctx, r, now); d.Allowed || d.Denied != 1 {
			t.Fatalf("past the budget: %+v", d)
		}
	})
}

func TestAWindowIsDroppedAnHourAfterItsPeriod(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		// A period that ended over an hour ago: its counter is not kept.
		old := limits.Window{Key: key("old"), Limit: 5, Amount: 5, Ends: now.Add(-2 * time.Hour)}
		d, err := l.Reserve(ctx, limits.Request{ID: "x", Windows: []limits.Window{old}, Expires: now.Add(time.Minute)}, now)
		must(t, err)
		if !d.Allowed {
			t.Fatalf("%+v", d)
		}
		got, err := l.Peek(ctx, []limits.Window{old}, now.Add(time.Millisecond))
		must(t, err)
		if got[0] != 0 {
			t.Fatalf("a counter outlived its period by more than an hour: %v", got)
		}
	})
}

// TestConcurrentCallersNeverOverspend is the budget under 200 concurrent
// callers: each reserves an estimate and settles to less; the sum charged
// never exceeds the budget, and calls stop only when the next estimate
// does not fit.
func TestConcurrentCallersNeverOverspend(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		const budget, estimate, used = 100_000, 700, 500
		w := limits.Window{Key: key("project-day"), Limit: budget, Amount: estimate, Ends: now.Add(24 * time.Hour)}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 200; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					r := limits.Request{ID: fmt.Sprintf("g%d-%d", g, i), Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
					d, err := l.Reserve(ctx, r, now)
					if err != nil {
						t.Error(err)
						return
					}
					if !d.Allowed {
						return
					}
					allowed.Add(1)
					if err := l.Settle(ctx, r, []int64{used}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		got, err := l.Peek(ctx, []limits.Window{w}, now)
		must(t, err)
		if got[0] != allowed.Load()*used {
			t.Fatalf("counter %d, want %d calls × %d", got[0], allowed.Load(), used)
		}
		if got[0] > budget {
			t.Fatalf("charged %d of a budget of %d", got[0], budget)
		}
		// Everyone stopped because the next estimate no longer fits (a
		// caller that stops sees the counter of that moment, so the final
		// gap is under one estimate per caller at most; with settles
		// always smaller it is under one estimate).
		if budget-got[0] >= estimate {
			t.Fatalf("stopped at %d with %d left, room for another call", got[0], budget-got[0])
		}
	})
}

// flaky is a primary that is down until told otherwise.
type flaky struct {
	limits.Limiter
	down atomic.Bool
}

func (f *flaky) Reserve(ctx context.Context, r limits.Request, now time.Time) (limits.Decision, error) {
	if f.down.Load() {
		return limits.Decision{}, fmt.Errorf("dial: %w", limits.ErrUnavailable)
	}
	return f.Limiter.Reserve(ctx, r, now)
}

func TestFailoverUsesTheProcessWhileRedisIsDown(t *testing.T) {
	primary := &flaky{Limiter: limits.NewMemory()}
	var changes []bool
	now := time.Now()
	clock := now
	f := &limits.Failover{Primary: primary, Fallback: limits.NewMemory(), Retry: 20 * time.Millisecond,
		OnChange: func(d bool) { changes = append(changes, d) }, Now: func() time.Time { return clock }}
	w := limits.Window{Key: "k", Limit: 2, Amount: 1, Ends: now.Add(time.Hour)}
	req := func(id string) limits.Request {
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	}
	if d, err := f.Reserve(ctx, req("1"), now); err != nil || !d.Allowed || f.Degraded() {
		t.Fatalf("healthy: %+v %v", d, err)
	}
	primary.down.Store(true)
	// Limits still hold while degraded: the fallback counts on its own.
	for i, want := range []bool{true, true, false} {
		d, err := f.Reserve(ctx, req(fmt.Sprint("d", i)), now)
		if err != nil || d.Allowed != want {
			t.Fatalf("degraded call %d: %+v %v", i, d, err)
		}
	}
	if !f.Degraded() {
		t.Fatal("not degraded")
	}
	primary.down.Store(false)
	// Until Retry has passed, calls stay on the fallback, which is full.
	clock = clock.Add(19 * time.Millisecond)
	if d, err := f.Reserve(ctx, req("3"), now); err != nil || d.Allowed || !f.Degraded() {
		t.Fatalf("before the retry: %+v %v (degraded %v), want the fallback's refusal", d, err, f.Degraded())
	}
	clock = clock.Add(time.Millisecond)
	if d, err := f.Reserve(ctx, req("2"), now); err != nil || !d.Allowed || f.Degraded() {
		t.Fatalf("recovered: %+v %v (degraded %v)", d, err, f.Degraded())
	}
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Fatalf("changes %v", changes)
	}
}

func TestAnUnreachableRedisIsUnavailableNotARefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	l := limits.NewRedis(c, "x:")
	now := time.Now()
	_, err = l.Reserve(ctx, limits.Request{ID: "a", Windows: []limits.Window{{Key: "k", Limit: 1, Amount: 1, Ends: now}}, Expires: now}, now)
	if !errors.Is(err, limits.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestASettledBatchIsEverySettleInIt(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		rpm := limits.Window{Key: key("rpm"), Limit: 100, Amount: 1, Ends: now.Add(time.Minute)}
		tpm := limits.Window{Key: key("tpm"), Limit: 10_000, Amount: 400, Ends: now.Add(time.Minute)}
		budget := limits.Window{Key: key("budget"), Limit: 10_000, Amount: 400, Ends: now.Add(time.Hour), Seeded: true}
		must(t, l.Seed(ctx, budget, 100, 0))
		ws := []limits.Window{rpm, tpm, budget}
		var batch []limits.Settlement
		for i := range 5 {
			r := limits.Request{ID: fmt.Sprint("b", i), Windows: ws, Expires: now.Add(time.Minute)}
			d, err := l.Reserve(ctx, r, now)
			must(t, err)
			if !d.Allowed {
				t.Fatalf("reserve %d: %+v", i, d)
			}
			batch = append(batch, limits.Settlement{Request: r, Actual: []int64{1, int64(10 * i), int64(10 * i)}})
		}
		// One settlement that is wrong (amounts for two windows of three)
		// fails alone.
		bad := limits.Settlement{Request: batch[0].Request, Actual: []int64{1}}
		errs := limits.SettleAll(ctx, l, append(batch, bad))
		if len(errs) != 6 || slices.IndexFunc(errs, func(e error) bool { return e != nil }) != 5 {
			t.Fatalf("errors %v, want one for the last", errs)
		}
		got, err := l.Peek(ctx, ws, now)
		must(t, err)
		// 0+10+20+30+40 = 100 tokens used, on top of the seeded 100.
		if got[0] != 5 || got[1] != 100 || got[2] != 200 {
			t.Fatalf("after the batch: %v", got)
		}
		if errs := limits.SettleAll(ctx, l, nil); errs != nil {
			t.Fatalf("empty batch: %v", errs)
		}
	})
}

func TestFailoverSettlesABatchOnTheProcessWhileRedisIsDown(t *testing.T) {
	fallback := limits.NewMemory()
	f := &limits.Failover{Primary: limits.NewRedis(unreachableRedis(t), "x:"), Fallback: fallback, Retry: time.Hour}
	now := time.Now()
	w := limits.Window{Key: "k", Limit: 1000, Amount: 100, Ends: now.Add(time.Minute)}
	r := limits.Request{ID: "a", Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	if _, err := fallback.Reserve(ctx, r, now); err != nil {
		t.Fatal(err)
	}
	if errs := f.SettleBatch(ctx, []limits.Settlement{{Request: r, Actual: []int64{30}}}); errs != nil {
		t.Fatalf("settled on the fallback: %v", errs)
	}
	if !f.Degraded() {
		t.Fatal("not degraded")
	}
	got, err := fallback.Peek(ctx, []limits.Window{w}, now)
	must(t, err)
	if got[0] != 30 {
		t.Fatalf("fallback count %v, want 30", got)
	}
}

// unreachableRedis is a client of an address nothing listens on.
func unreachableRedis(t *testing.T) *redis.Client {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A reservation written by an earlier version (its id in the lapse set,
// its amounts in a hash) is still settled, or given back when it lapses.
func TestReservationsOfAnEarlierVersionStillSettleAndLapse(t *testing.T) {
	c, prefix := redistest.Require(t)
	l := limits.NewRedis(c, prefix)
	now := time.Now()
	w := limits.Window{Key: "budget", Limit: 1000, Amount: 100, Ends: now.Add(time.Hour), Seeded: true}
	must(t, l.Seed(ctx, w, 0, 0))
	old := func(id string, expires time.Time) limits.Request {
		must(t, c.IncrBy(ctx, prefix+w.Key, w.Amount).Err())
		must(t, c.HSet(ctx, prefix+"r:"+id, prefix+w.Key, w.Amount).Err())
		must(t, c.ZAdd(ctx, prefix+"lapse", redis.Z{Score: float64(expires.UnixMilli()), Member: id}).Err())
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: expires}
	}
	settled := old("settled", now.Add(time.Minute))
	old("lapsed", now.Add(-time.Second))
	must(t, l.Settle(ctx, settled, []int64{30}))
	got, err := l.Peek(ctx, []limits.Window{w}, now)
	must(t, err)
	// 30 used by the settled one; the lapsed one's 100 given back.
	if got[0] != 30 {
		t.Fatalf("count %d, want 30", got[0])
	}
	if n := c.Exists(ctx, prefix+"r:settled", prefix+"r:lapsed").Val(); n != 0 {
		t.Fatalf("%d reservation hashes left", n)
	}
	if n := c.ZCard(ctx, prefix+"lapse").Val(); n != 0 {
		t.Fatalf("%d reservations left in the lapse set", n)
	}
}

// A negative amount would lower a counter and give back what other calls
// used (an estimate that overflowed, an upstream that reported negative
// usage): it is refused, and nothing changes.
func TestNegativeAmountsAreRefusedAndChangeNothing(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		now := time.Now()
		w := limits.Window{Key: key("neg"), Limit: 100, Amount: 60, Ends: now.Add(time.Hour)}
		req := func(id string, amount int64) limits.Request {
			w := w
			w.Amount = amount
			return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
		}
		first := req("a", 60)
		d, err := l.Reserve(ctx, first, now)
		if err != nil || !d.Allowed {
			t.Fatalf("first call: %+v %v", d, err)
		}
		if _, err := l.Reserve(ctx, req("b", -1<<62), now); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Fatalf("a negative amount: %v, want it refused", err)
		}
		if err := l.Settle(ctx, first, []int64{-1 << 62}); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Fatalf("a negative actual amount: %v, want it refused", err)
		}
		used, err := l.Peek(ctx, []limits.Window{w}, now)
		must(t, err)
		if used[0] != 60 {
			t.Fatalf("the counter holds %d after the refusals, want 60", used[0])
		}
		// The window is as full as before: 60 more do not fit.
		if d, err := l.Reserve(ctx, req("c", 60), now); err != nil || d.Allowed {
			t.Fatalf("after the refusals: %+v %v, want a refusal", d, err)
		}
	})
}

// A caller that goes away while its reservation is in Redis says nothing
// of Redis: the error is the caller's, not ErrUnavailable, and Failover
// neither falls back to the process nor says Redis is down.
func TestACancelledCallerDoesNotSwitchOffRedis(t *testing.T) {
	c, prefix := redistest.Require(t)
	var changes atomic.Int32
	f := &limits.Failover{Primary: limits.NewRedis(c, prefix), Fallback: limits.NewMemory(), Retry: time.Hour,
		OnChange: func(bool) { changes.Add(1) }}
	now := time.Now()
	w := limits.Window{Key: "cancel", Limit: 1, Amount: 1, Ends: now.Add(time.Hour)}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err := f.Reserve(gone, limits.Request{ID: "a", Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}, now)
	if !errors.Is(err, context.Canceled) || errors.Is(err, limits.ErrUnavailable) {
		t.Fatalf("err = %v, want the caller's cancellation and not ErrUnavailable", err)
	}
	if f.Degraded() || changes.Load() != 0 {
		t.Fatalf("degraded %v after %d changes: a caller going away switched Redis off", f.Degraded(), changes.Load())
	}
	// The limit is still Redis's: one call fits, the next does not.
	for i, want := range []bool{true, false} {
		d, err := f.Reserve(ctx, limits.Request{ID: fmt.Sprint("b", i), Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}, now)
		if err != nil || d.Allowed != want || f.Degraded() {
			t.Fatalf("call %d: %+v %v (degraded %v)", i, d, err, f.Degraded())
		}
	}
}

// A fallback reads its budgets from the ledger again once their count is
// older than it trusts: what other replicas spent meanwhile reaches it, and
// the reservations it holds itself are kept. A limiter alone (NewMemory)
// trusts its count for good.
func TestAFallbackReadsItsBudgetsFromTheLedgerAgain(t *testing.T) {
	t0 := time.Now()
	budget := limits.Window{Key: "budget", Limit: 100, Ends: t0.Add(24 * time.Hour), Seeded: true}
	call := func(id string, amount int64) limits.Request {
		w := budget
		w.Amount = amount
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: t0.Add(time.Hour)}
	}
	reserve := func(l limits.Limiter, r limits.Request, now time.Time, ledger int64) limits.Decision {
		t.Helper()
		d, err := l.Reserve(ctx, r, now)
		must(t, err)
		if len(d.Unseeded) > 0 {
			must(t, l.Seed(ctx, budget, ledger, d.Epoch))
			d, err = l.Reserve(ctx, r, now)
			must(t, err)
			if len(d.Unseeded) > 0 {
				t.Fatalf("still unseeded after a seed: %+v", d)
			}
		}
		return d
	}

	m := limits.NewReseedingMemory(time.Minute)
	if d := reserve(m, call("a", 10), t0, 50); !d.Allowed || d.Used[0] != 60 {
		t.Fatalf("first call: %+v", d)
	}
	if d := reserve(m, call("b", 10), t0.Add(30*time.Second), 999); !d.Allowed || d.Used[0] != 70 {
		t.Fatalf("within the minute the count is trusted: %+v", d)
	}
	// A minute on, the ledger says 80 was spent (by other replicas, and
	// none of it by a and b, still in flight): 80 + 20 held leaves nothing.
	d, err := m.Reserve(ctx, call("c", 10), t0.Add(61*time.Second))
	must(t, err)
	if len(d.Unseeded) != 1 {
		t.Fatalf("a minute on: %+v, want the budget read again", d)
	}
	if d := reserve(m, call("c", 10), t0.Add(61*time.Second), 80); d.Allowed || d.Used[0] != 100 {
		t.Fatalf("after reading the ledger again: %+v, want 100 used and a refusal", d)
	}
	must(t, m.Settle(ctx, call("a", 10), []int64{5}))
	if d := reserve(m, call("d", 5), t0.Add(62*time.Second), 0); !d.Allowed || d.Used[0] != 100 {
		t.Fatalf("after a settled for 5: %+v", d)
	}

	alone := limits.NewMemory()
	reserve(alone, call("a", 10), t0, 50)
	d, err = alone.Reserve(ctx, call("b", 10), t0.Add(50*time.Minute))
	must(t, err)
	if !d.Allowed || len(d.Unseeded) > 0 || d.Used[0] != 70 {
		t.Fatalf("a limiter alone, 50 minutes on: %+v, want its own count", d)
	}
}

// After Reconcile, a Redis budget counter is reported Unseeded once, at
// the new epoch; its seed raises it to the ledger's spend plus the
// reservations it holds (which are taken back when they settle), and a
// seed made at an older epoch does not count as reconciled.
func TestARedisBudgetIsReconciledWithTheLedgerAtANewEpoch(t *testing.T) {
	c, prefix := redistest.Require(t)
	l := limits.NewRedis(c, prefix)
	now := time.Now()
	w := limits.Window{Key: "month", Limit: 1000, Amount: 100, Ends: now.Add(24 * time.Hour), Seeded: true}
	req := func(id string) limits.Request {
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	}
	reserve := func(id string) limits.Decision {
		t.Helper()
		d, err := l.Reserve(ctx, req(id), now)
		must(t, err)
		return d
	}
	must(t, l.Seed(ctx, w, 200, 0))
	if d := reserve("held"); !d.Allowed || d.Used[0] != 300 {
		t.Fatalf("before reconciling: %+v", d)
	}
	must(t, l.Reconcile(ctx))
	d := reserve("a")
	if d.Allowed || len(d.Unseeded) != 1 || d.Epoch != 1 {
		t.Fatalf("after Reconcile: %+v, want the budget unseeded at epoch 1", d)
	}
	// A seed from a ledger read made before the epoch does not reconcile.
	must(t, l.Seed(ctx, w, 0, 0))
	if d := reserve("a"); len(d.Unseeded) != 1 {
		t.Fatalf("after a seed at an older epoch: %+v", d)
	}
	// The ledger says 600 were spent (a partition's spend): 600 plus the
	// 100 held.
	must(t, l.Seed(ctx, w, 600, d.Epoch))
	if d := reserve("b"); !d.Allowed || d.Used[0] != 800 {
		t.Fatalf("reconciled: %+v, want 600 + 100 held + 100", d)
	}
	// The held reservation settles to 40: taken back from what the seed
	// counted.
	must(t, l.Settle(ctx, req("held"), []int64{40}))
	if got, _ := l.Peek(ctx, []limits.Window{w}, now); got[0] != 740 {
		t.Fatalf("after settling: %v", got)
	}
}
