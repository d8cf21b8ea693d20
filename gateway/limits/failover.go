package limits

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Failover uses Primary (Redis) and, while it cannot be reached, Fallback
// (in-process). Budgets stay enforced while degraded: the fallback's
// seeded windows are seeded from the ledger like Redis's. It tries the
// primary again every Retry. Spend made while degraded is in the ledger
// only, so a primary that is a Reconciler is reconciled with the ledger
// before it is used again (and before it is first used, since another
// process may have spent without it: one that ran while it was
// unreachable, or before it was restored from an older snapshot).
//
// Spend is counted once. Before it reconciles, it gives back (Canceller)
// the reservations the primary may hold for calls it settled on the
// fallback, or whose reserve it gave up on: their calls are in the
// ledger the seed reads. The calls reserved on the fallback and still in
// flight when the primary came back settle on it, adding what they used,
// though the ledger a seed read meanwhile may hold some of them already;
// so once the last of them has settled, it reconciles once more (see
// release).
type Failover struct {
	Primary, Fallback Limiter
	Log               *slog.Logger
	// Retry is how long it stays on the fallback before trying the primary
	// again (default 1 s).
	Retry time.Duration
	// OnChange, when set, is told when the limiter degrades (true) and
	// recovers (false).
	OnChange func(degraded bool)
	// Now is the clock Retry is counted on (default time.Now); the
	// windows' clock is the caller's (the now of Reserve and Peek).
	Now func() time.Time

	degraded atomic.Bool
	mu       sync.Mutex
	since    time.Time
	// reconciled is true once the primary was reconciled since it was
	// last out of reach (or since the start); rmu makes one caller do it
	// while the others wait.
	reconciled atomic.Bool
	rmu        sync.Mutex

	// hmu guards what the primary is owed: orphans, the requests to give
	// back on it (see Canceller); held, the reservations made on the
	// fallback and not settled yet, by id, with their expiry; and again,
	// set when the primary was reconciled while some were held, so that
	// it is reconciled once more when the last settles.
	hmu     sync.Mutex
	orphans []Request
	held    map[string]time.Time
	again   bool
	// holding is len(held), read without the lock: settles skip the lock
	// while nothing is held, as when the primary is healthy.
	holding atomic.Int64
}

// maxOrphans bounds the reservations kept to give back: past it, the
// oldest are dropped and lapse at their expiry instead.
const maxOrphans = 1 << 16

// Degraded reports whether the fallback is in use.
func (f *Failover) Degraded() bool { return f.degraded.Load() }

// pick returns the limiter to use now: the primary once it is
// reconciled, else the fallback.
func (f *Failover) pick(ctx context.Context) (Limiter, bool) {
	if !f.degraded.Load() {
		if f.reconciled.Load() || f.reconcile(ctx) {
			return f.Primary, true
		}
		return f.Fallback, false
	}
	f.mu.Lock()
	retry := f.Retry
	if retry <= 0 {
		retry = time.Second
	}
	probe := false
	if now := f.now(); now.Sub(f.since) >= retry {
		f.since = now // one caller probes; the rest stay on the fallback
		probe = true
	}
	f.mu.Unlock()
	if probe && f.reconcile(ctx) {
		return f.Primary, true
	}
	return f.Fallback, false
}

// reconcile reconciles the primary with the ledger unless it is already
// (see Reconciler), and reports whether it may be used.
func (f *Failover) reconcile(ctx context.Context) bool {
	r, ok := f.Primary.(Reconciler)
	if !ok {
		return true
	}
	f.rmu.Lock()
	defer f.rmu.Unlock()
	if f.reconciled.Load() {
		return true
	}
	// The caller's going away says nothing of Redis: the reconciliation
	// is the limiter's, and is done whoever asked for it first.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := f.giveBack(rctx); err != nil {
		f.result(err)
		return false
	}
	if err := r.Reconcile(rctx); err != nil {
		f.result(err)
		return false
	}
	f.reconciled.Store(true)
	f.hmu.Lock()
	f.again = len(f.held) > 0
	f.hmu.Unlock()
	return true
}

// giveBack gives back on the primary the reservations it may hold for
// calls settled elsewhere (see Canceller); those it could not are kept
// for the next try.
func (f *Failover) giveBack(ctx context.Context) error {
	c, ok := f.Primary.(Canceller)
	if !ok {
		return nil
	}
	f.hmu.Lock()
	reqs := f.orphans
	f.orphans = nil
	f.hmu.Unlock()
	if len(reqs) == 0 {
		return nil
	}
	if err := c.Cancel(ctx, reqs); err != nil {
		f.orphan(reqs...)
		return err
	}
	return nil
}

// orphan notes reservations that the primary may hold but that will not
// be settled on it: settled on the fallback, though not reserved there.
// Only those with a budget window are kept: a rate window's reservation
// ends with its minute.
func (f *Failover) orphan(reqs ...Request) {
	if _, ok := f.Primary.(Canceller); !ok {
		return
	}
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for _, r := range reqs {
		if _, mine := f.held[r.ID]; mine {
			continue // reserved on the fallback: the primary holds nothing
		}
		if slices.ContainsFunc(r.Windows, func(w Window) bool { return w.Seeded }) {
			f.orphans = append(f.orphans, r)
		}
	}
	if over := len(f.orphans) - maxOrphans; over > 0 {
		f.orphans = slices.Delete(f.orphans, 0, over)
	}
}

// hold notes a reservation made on the fallback, until it settles.
func (f *Failover) hold(r Request) {
	f.hmu.Lock()
	if f.held == nil {
		f.held = map[string]time.Time{}
	}
	f.held[r.ID] = r.Expires
	f.holding.Store(int64(len(f.held)))
	f.hmu.Unlock()
}

// release notes that reservations settled. When the primary was
// reconciled while some made on the fallback were in flight, and the
// last of them has now settled (or lapsed), the primary is reconciled
// again: those calls are all in the ledger now, and some may have been
// counted twice (read in the ledger by a seed, and settled on the
// primary after it).
func (f *Failover) release(r Request) {
	if f.holding.Load() == 0 {
		return
	}
	f.hmu.Lock()
	defer f.hmu.Unlock()
	delete(f.held, r.ID)
	f.released()
}

// releaseBatch is release for each settlement of batch.
func (f *Failover) releaseBatch(batch []Settlement) {
	if f.holding.Load() == 0 {
		return
	}
	f.hmu.Lock()
	defer f.hmu.Unlock()
	for _, s := range batch {
		delete(f.held, s.Request.ID)
	}
	f.released()
}

// released is release's end, under hmu.
func (f *Failover) released() {
	defer func() { f.holding.Store(int64(len(f.held))) }()
	if !f.again {
		return
	}
	now := f.now()
	for id, exp := range f.held {
		if !exp.IsZero() && exp.Before(now) {
			delete(f.held, id)
		}
	}
	if len(f.held) == 0 {
		f.again = false
		f.reconciled.Store(false)
	}
}

// result records how a call on the primary went, and tells whether to
// keep its answer. A call cut short by its caller (the client went away)
// says nothing of Redis either way: its error is kept and nothing changes.
func (f *Failover) result(err error) bool {
	if errors.Is(err, context.Canceled) && !errors.Is(err, ErrUnavailable) {
		return true
	}
	if errors.Is(err, ErrUnavailable) {
		now := f.now()
		f.mu.Lock()
		f.since = now
		f.mu.Unlock()
		f.reconciled.Store(false) // what is spent from now on bypasses it
		if !f.degraded.Swap(true) {
			f.log().Warn("rate limits and budgets fall back to this process: Redis cannot be reached", "err", err)
			if f.OnChange != nil {
				f.OnChange(true)
			}
		}
		return false
	}
	if f.degraded.Swap(false) {
		f.log().Info("rate limits and budgets are shared in Redis again")
		if f.OnChange != nil {
			f.OnChange(false)
		}
	}
	return true
}

func (f *Failover) now() time.Time {
	if f.Now == nil {
		return time.Now()
	}
	return f.Now()
}

func (f *Failover) log() *slog.Logger {
	if f.Log == nil {
		return slog.Default()
	}
	return f.Log
}

// fallbackEpoch is the Decision.Epoch of a Reserve the fallback
// answered, so that the Seed it asks for goes to the fallback too, where
// the windows were found due. Sent to the primary (back meanwhile), it
// would mark a Redis counter reconciled at an epoch that is not Redis's,
// which leaves it due again: another reading of the ledger, and another
// gap between that reading and the seed, for every such call.
const fallbackEpoch = -1

// Reserve implements Limiter.
func (f *Failover) Reserve(ctx context.Context, r Request, now time.Time) (Decision, error) {
	if l, primary := f.pick(ctx); primary {
		d, err := l.Reserve(ctx, r, now)
		if f.result(err) {
			return d, err
		}
		// The reserve may still reach Redis (a frozen one reads it late).
		f.orphan(r)
	}
	d, err := f.Fallback.Reserve(ctx, r, now)
	if len(d.Unseeded) > 0 {
		d.Epoch = fallbackEpoch
	}
	if err == nil && d.Allowed {
		f.hold(r)
	}
	return d, err
}

// Settle implements Limiter. A reservation is settled where it was made,
// as far as the caller can tell: on the primary unless degraded.
func (f *Failover) Settle(ctx context.Context, r Request, actual []int64) error {
	defer f.release(r)
	if l, primary := f.pick(ctx); primary {
		err := l.Settle(ctx, r, actual)
		if f.result(err) {
			return err
		}
	}
	f.orphan(r)
	return f.Fallback.Settle(ctx, r, actual)
}

// SettleBatch implements BatchSettler: on the primary in one go when it
// can; those it cannot reach are settled on the fallback, as Settle does.
func (f *Failover) SettleBatch(ctx context.Context, batch []Settlement) []error {
	defer f.releaseBatch(batch)
	l, primary := f.pick(ctx)
	if !primary {
		for _, s := range batch {
			f.orphan(s.Request)
		}
		return SettleAll(ctx, f.Fallback, batch)
	}
	errs := SettleAll(ctx, l, batch)
	var rest []Settlement
	var at []int
	var down error
	for i, err := range errs {
		if errors.Is(err, ErrUnavailable) {
			rest, at, down = append(rest, batch[i]), append(at, i), err
		}
	}
	if f.result(down) {
		return errs
	}
	for _, s := range rest {
		f.orphan(s.Request)
	}
	fallback := SettleAll(ctx, f.Fallback, rest)
	for j, i := range at {
		errs[i] = nil
		if fallback != nil {
			errs[i] = fallback[j]
		}
	}
	if !slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		return nil
	}
	return errs
}

// SettleAll settles batch on l: in one go if l is a BatchSettler, else one
// by one. It returns nil when all settled, else an error for each.
func SettleAll(ctx context.Context, l Limiter, batch []Settlement) []error {
	if b, ok := l.(BatchSettler); ok {
		return b.SettleBatch(ctx, batch)
	}
	var errs []error
	for i, s := range batch {
		if err := l.Settle(ctx, s.Request, s.Actual); err != nil {
			if errs == nil {
				errs = make([]error, len(batch))
			}
			errs[i] = err
		}
	}
	return errs
}

// Seed implements Limiter: on the limiter that found the window due (see
// fallbackEpoch).
func (f *Failover) Seed(ctx context.Context, w Window, used, epoch int64) error {
	if epoch == fallbackEpoch {
		return f.Fallback.Seed(ctx, w, used, 0)
	}
	if l, primary := f.pick(ctx); primary {
		err := l.Seed(ctx, w, used, epoch)
		if f.result(err) {
			return err
		}
	}
	return f.Fallback.Seed(ctx, w, used, epoch)
}

// OutstandingAt lists the calls a seed of w at epoch counts from the
// limiter that found it due (see Outstanding): none on the fallback.
func (f *Failover) OutstandingAt(ctx context.Context, w Window, epoch int64) ([]string, error) {
	if epoch == fallbackEpoch {
		return nil, nil
	}
	o, ok := f.Primary.(Outstanding)
	if !ok {
		return nil, nil
	}
	if _, primary := f.pick(ctx); !primary {
		return nil, nil
	}
	ids, err := o.Outstanding(ctx, w)
	if !f.result(err) {
		return nil, nil
	}
	return ids, err
}

// Peek implements Limiter.
func (f *Failover) Peek(ctx context.Context, ws []Window, now time.Time) ([]int64, error) {
	if l, primary := f.pick(ctx); primary {
		out, err := l.Peek(ctx, ws, now)
		if f.result(err) {
			return out, err
		}
	}
	return f.Fallback.Peek(ctx, ws, now)
}
