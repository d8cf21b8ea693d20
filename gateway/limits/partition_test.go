package limits_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/redistest"
)

// Issue 39 defect 8: a short Redis partition counted the degraded spend
// twice and locked a budget early, for the rest of its period, because
// reconciliation only ever raised a counter. The tests here run against
// a real Redis.

// A seed at a new epoch sets a counter above the ledger down to the
// ledger's spend plus the reservations it holds: the ledger is the truth,
// in both directions.
func TestAReconciledRedisCounterIsLoweredToTheLedger(t *testing.T) {
	c, prefix := redistest.Require(t)
	l := limits.NewRedis(c, prefix)
	now := time.Now()
	w := limits.Window{Key: "month", Limit: 10000, Amount: 100, Ends: now.Add(24 * time.Hour), Seeded: true}
	req := func(id string) limits.Request {
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	}
	must(t, l.Seed(ctx, w, 5000, 0)) // counted twice: the ledger says 600
	d, err := l.Reserve(ctx, req("held"), now)
	must(t, err)
	if !d.Allowed || d.Used[0] != 5100 {
		t.Fatalf("before reconciling: %+v", d)
	}
	must(t, l.Reconcile(ctx))
	d, err = l.Reserve(ctx, req("a"), now)
	must(t, err)
	if len(d.Unseeded) != 1 {
		t.Fatalf("after Reconcile: %+v, want the budget due", d)
	}
	must(t, l.Seed(ctx, w, 600, d.Epoch))
	if got, _ := l.Peek(ctx, []limits.Window{w}, now); got[0] != 700 {
		t.Fatalf("a counter of 5100 seeded from a ledger of 600 with 100 held reads %d, want 700", got[0])
	}
	// The project can spend up to its budget: 700 + 93 reservations of
	// 100 is 10000.
	for i := 0; i < 93; i++ {
		d, err := l.Reserve(ctx, req(fmt.Sprint("b", i)), now)
		must(t, err)
		if !d.Allowed {
			t.Fatalf("reservation %d refused at %v of 10000", i, d.Used)
		}
	}
	if d, _ := l.Reserve(ctx, req("over"), now); d.Allowed {
		t.Fatalf("a reservation past the budget was allowed: %+v", d)
	}
}

// cut is a Redis limiter behind a switch: while down, every call fails as
// an unreachable Redis's does. Redis keeps what it holds.
type cut struct {
	*limits.Redis
	down atomic.Bool
}

func (c *cut) err() error { return fmt.Errorf("i/o timeout: %w", limits.ErrUnavailable) }

func (c *cut) Reserve(ctx context.Context, r limits.Request, now time.Time) (limits.Decision, error) {
	if c.down.Load() {
		return limits.Decision{}, c.err()
	}
	return c.Redis.Reserve(ctx, r, now)
}

func (c *cut) Settle(ctx context.Context, r limits.Request, actual []int64) error {
	if c.down.Load() {
		return c.err()
	}
	return c.Redis.Settle(ctx, r, actual)
}

func (c *cut) SettleBatch(ctx context.Context, batch []limits.Settlement) []error {
	if c.down.Load() {
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = c.err()
		}
		return errs
	}
	return c.Redis.SettleBatch(ctx, batch)
}

func (c *cut) Seed(ctx context.Context, w limits.Window, used, epoch int64) error {
	if c.down.Load() {
		return c.err()
	}
	return c.Redis.Seed(ctx, w, used, epoch)
}

func (c *cut) Reconcile(ctx context.Context) error {
	if c.down.Load() {
		return c.err()
	}
	return c.Redis.Reconcile(ctx)
}

func (c *cut) Cancel(ctx context.Context, reqs []limits.Request) error {
	if c.down.Load() {
		return c.err()
	}
	return c.Redis.Cancel(ctx, reqs)
}

// partitioned is a Failover from a Redis behind a switch to the process,
// as the server builds one, with a ledger: what the calls settled used.
type partitioned struct {
	t       *testing.T
	redis   *cut
	f       *limits.Failover
	clock   time.Time
	now     time.Time
	w       limits.Window
	ledger  int64
	counter func() int64
}

func newPartitioned(t *testing.T) *partitioned {
	c, prefix := redistest.Require(t)
	p := &partitioned{t: t, redis: &cut{Redis: limits.NewRedis(c, prefix)}, now: time.Now()}
	p.clock = p.now
	p.f = &limits.Failover{Primary: p.redis, Fallback: limits.NewMemory(), Retry: time.Millisecond, Now: func() time.Time { return p.clock }}
	p.w = limits.Window{Key: "month", Limit: 100000, Amount: 100, Ends: p.now.Add(24 * time.Hour), Seeded: true}
	p.counter = func() int64 {
		got, err := c.Get(ctx, prefix+"month").Int64()
		must(t, err)
		return got
	}
	return p
}

func (p *partitioned) req(id string) limits.Request {
	return limits.Request{ID: id, Windows: []limits.Window{p.w}, Expires: p.now.Add(15 * time.Minute)}
}

// reserve reserves as the gateway does: seeding from the ledger when the
// window is due.
func (p *partitioned) reserve(id string) limits.Request {
	p.t.Helper()
	r := p.req(id)
	for try := 0; try < 3; try++ {
		d, err := p.f.Reserve(ctx, r, p.now)
		must(p.t, err)
		if d.Allowed {
			return r
		}
		if len(d.Unseeded) == 0 {
			p.t.Fatalf("reserve %s refused: %+v", id, d)
		}
		must(p.t, p.f.Seed(ctx, p.w, p.ledger, d.Epoch))
	}
	p.t.Fatalf("reserve %s: still due after 3 seeds", id)
	return r
}

// settle settles a call that used 40, and writes its ledger row.
func (p *partitioned) settle(r limits.Request) {
	p.t.Helper()
	must(p.t, p.f.Settle(ctx, r, []int64{40}))
	p.ledger += 40
}

// cutOff and back switch Redis off and on; back lets Retry pass.
func (p *partitioned) cutOff() { p.redis.down.Store(true) }
func (p *partitioned) back() {
	p.redis.down.Store(false)
	p.clock = p.clock.Add(time.Second)
}

// A call reserved on Redis whose settle Redis does not take (it is cut
// off) is settled on the process; when Redis is back, its reservation is
// given back there, since the ledger the seed reads holds what it used.
// Before, the reservation stayed held for its 15 minutes, counted on top
// of the call's spend.
func TestAFailoverGivesBackWhatItSettledOnTheProcess(t *testing.T) {
	p := newPartitioned(t)
	p.settle(p.reserve("before"))
	inFlight := p.reserve("in-flight") // 100 held in Redis
	later := p.reserve("later")        // and 100 more
	p.cutOff()
	p.settle(inFlight) // Redis does not take it: on the process; the ledger has it
	p.settle(later)    // degraded by now: straight to the process
	p.settle(p.reserve("degraded"))
	p.back()
	held := p.reserve("after")
	// The ledger says 160; "after" holds 100.
	if got, want := p.counter(), p.ledger+100; got != want {
		t.Fatalf("after the partition Redis counts %d; the ledger says %d and one call of 100 is in flight: want %d", got, p.ledger, want)
	}
	p.settle(held)
	if got := p.counter(); got != p.ledger {
		t.Fatalf("with nothing in flight Redis counts %d, the ledger %d", got, p.ledger)
	}
}

// A call reserved on the process while Redis was cut off, and still in
// flight when it came back, settles on Redis and adds what it used, though
// the ledger that Redis was seeded from may hold it already. Once the last
// such call has settled, Redis is reconciled again: its counter is the
// ledger's plus what is held.
func TestAFailoverReconcilesAgainOnceTheCallsOfAPartitionHaveSettled(t *testing.T) {
	p := newPartitioned(t)
	p.settle(p.reserve("before"))
	p.cutOff()
	slow := p.reserve("slow") // on the process, in flight
	p.back()
	// The call ends (its ledger row is written) just before Redis is
	// seeded, and its settle reaches Redis just after.
	p.ledger += 40
	fresh := p.reserve("fresh")
	must(t, p.f.Settle(ctx, slow, []int64{40}))
	if got := p.counter(); got != p.ledger+40+100 {
		t.Fatalf("the scenario counts %d: want %d (the slow call twice, and 100 held)", got, p.ledger+40+100)
	}
	held := p.reserve("next") // reconciles again: the partition's calls have all settled
	if got, want := p.counter(), p.ledger+200; got != want {
		t.Fatalf("after the last call of the partition settled Redis counts %d: want %d (the ledger's %d and 200 held)", got, want, p.ledger)
	}
	p.settle(fresh)
	p.settle(held)
	if got := p.counter(); got != p.ledger {
		t.Fatalf("with nothing in flight Redis counts %d, the ledger %d", got, p.ledger)
	}
}

// freezer forwards connections to Redis; while frozen it forwards nothing
// and keeps what clients send, as a stopped Redis's socket does, and
// counts the scripts among it.
type freezer struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
	mu     sync.Mutex
	held   bytes.Buffer
}

func startFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	f := &freezer{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				conn.Close()
				continue
			}
			go func() { _, _ = io.Copy(conn, up); conn.Close() }()
			go f.forward(conn, up)
		}
	}()
	return f
}

func (f *freezer) forward(conn, up net.Conn) {
	defer up.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if f.frozen.Load() {
				f.mu.Lock()
				f.held.Write(buf[:n])
				f.mu.Unlock()
			} else if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// scripts counts the script calls sent while frozen.
func (f *freezer) scripts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := bytes.ToLower(f.held.Bytes())
	return bytes.Count(b, []byte("evalsha")) + bytes.Count(b, []byte("\r\neval\r\n"))
}

// A client made with ClientOptions sends a reserve once to a Redis that
// does not answer. One that sent it again after its timeout (go-redis
// retries a timed-out command by default) had both copies run by a Redis
// that was frozen, not gone, when it woke: the amount taken twice, given
// back once.
func TestALimiterSendsAScriptOnceToARedisThatDoesNotAnswer(t *testing.T) {
	direct, prefix := redistest.Require(t)
	fr := startFreezer(t, direct.Options().Addr)
	opts := *direct.Options()
	opts.Addr = fr.ln.Addr().String()
	limits.ClientOptions(&opts)
	opts.ReadTimeout = 200 * time.Millisecond
	c := redis.NewClient(&opts)
	defer c.Close()
	// Several connections in the pool, as a busy gateway has.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); must(t, c.Ping(ctx).Err()) }()
	}
	wg.Wait()
	l := limits.NewRedis(c, prefix)
	now := time.Now()
	w := limits.Window{Key: "minute", Limit: 1000, Amount: 10, Ends: now.Add(time.Minute)}
	req := limits.Request{ID: "a", Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	if _, err := l.Reserve(ctx, req, now); err != nil {
		t.Fatal(err)
	}
	fr.frozen.Store(true)
	_, err := l.Reserve(ctx, limits.Request{ID: "b", Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}, now)
	if !errors.Is(err, limits.ErrUnavailable) {
		t.Fatalf("a reserve to a frozen Redis: %v, want ErrUnavailable", err)
	}
	if n := fr.scripts(); n != 1 {
		t.Fatalf("the reserve was sent %d times to a Redis that did not answer, want once", n)
	}
}

// A seed asked for at an older epoch, from a reading of the ledger made
// then, does not set a counter reconciled at a newer one: calls settled
// into it since would be lost, and the budget overspent by them. (With 200
// callers after a partition, a caller's reading took seconds while another
// reconciled.)
func TestAStaleSeedDoesNotLowerACounter(t *testing.T) {
	c, prefix := redistest.Require(t)
	l := limits.NewRedis(c, prefix)
	now := time.Now()
	w := limits.Window{Key: "month", Limit: 10000, Amount: 100, Ends: now.Add(24 * time.Hour), Seeded: true}
	req := func(id string) limits.Request {
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	}
	due := func() int64 {
		t.Helper()
		d, err := l.Reserve(ctx, req("due"), now)
		must(t, err)
		if len(d.Unseeded) != 1 {
			t.Fatalf("not due: %+v", d)
		}
		return d.Epoch
	}
	must(t, l.Reconcile(ctx))
	old := due() // a caller reads the ledger: 100
	must(t, l.Reconcile(ctx))
	must(t, l.Seed(ctx, w, 500, due())) // another reads 500 and seeds
	must(t, l.Settle(ctx, req("late"), []int64{40}))
	must(t, l.Seed(ctx, w, 100, old)) // the first caller's seed comes in last
	if got, _ := l.Peek(ctx, []limits.Window{w}, now); got[0] != 540 {
		t.Fatalf("the counter reads %d after a stale seed, want 540 (500 and the call of 40 since)", got[0])
	}
}

// A seed counts some calls from Redis itself: those that settled into the
// counter while it was due, and those it holds reservations for, whose
// ledger rows may be written before their settles arrive. Outstanding
// names them, and the ledger's sum the seed is made from leaves them out,
// so that none is counted twice. (With 200 callers, about a hundred calls
// end while a counter is being seeded.)
func TestASeedLeavesOutOfTheLedgerWhatItCountsItself(t *testing.T) {
	c, prefix := redistest.Require(t)
	l := limits.NewRedis(c, prefix)
	now := time.Now()
	w := limits.Window{Key: "month", Limit: 10000, Amount: 100, Ends: now.Add(24 * time.Hour), Seeded: true}
	req := func(id string) limits.Request {
		return limits.Request{ID: id, Windows: []limits.Window{w}, Expires: now.Add(time.Minute)}
	}
	must(t, l.Seed(ctx, w, 0, 0))
	for _, id := range []string{"held", "settled"} {
		if d, err := l.Reserve(ctx, req(id), now); err != nil || !d.Allowed {
			t.Fatalf("reserve %s: %+v %v", id, d, err)
		}
	}
	must(t, l.Reconcile(ctx))
	d, err := l.Reserve(ctx, req("due"), now)
	must(t, err)
	// "settled" ends and settles (25) while the counter is due; "held"
	// ends (30) and its row is written, its settle still on its way. The
	// ledger holds both, and 500 of other calls.
	must(t, l.Settle(ctx, req("settled"), []int64{25}))
	ledger := map[string]int64{"others": 500, "settled": 25, "held": 30}
	ids, err := l.Outstanding(ctx, w)
	must(t, err)
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"held", "settled"}) {
		t.Fatalf("outstanding %v, want [held settled]", ids)
	}
	var sum int64
	for id, n := range ledger {
		if !slices.Contains(ids, id) {
			sum += n
		}
	}
	must(t, l.Seed(ctx, w, sum, d.Epoch))
	must(t, l.Settle(ctx, req("held"), []int64{30}))
	if got, _ := l.Peek(ctx, []limits.Window{w}, now); got[0] != 555 {
		t.Fatalf("with nothing in flight the counter reads %d, the ledger 555", got[0])
	}
}
