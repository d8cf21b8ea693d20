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
// primary again every Retry. Spend made while degraded is in the ledger;
// Redis counts it again when its counters are next seeded (a new period,
// or a Redis that lost its keys).
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
}

// Degraded reports whether the fallback is in use.
func (f *Failover) Degraded() bool { return f.degraded.Load() }

// pick returns the limiter to use now.
func (f *Failover) pick() (Limiter, bool) {
	if !f.degraded.Load() {
		return f.Primary, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	retry := f.Retry
	if retry <= 0 {
		retry = time.Second
	}
	if now := f.now(); now.Sub(f.since) >= retry {
		f.since = now // one caller probes; the rest stay on the fallback
		return f.Primary, true
	}
	return f.Fallback, false
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

// Reserve implements Limiter.
func (f *Failover) Reserve(ctx context.Context, r Request, now time.Time) (Decision, error) {
	if l, primary := f.pick(); primary {
		d, err := l.Reserve(ctx, r, now)
		if f.result(err) {
			return d, err
		}
	}
	return f.Fallback.Reserve(ctx, r, now)
}

// Settle implements Limiter. A reservation is settled where it was made,
// as far as the caller can tell: on the primary unless degraded.
func (f *Failover) Settle(ctx context.Context, r Request, actual []int64) error {
	if l, primary := f.pick(); primary {
		err := l.Settle(ctx, r, actual)
		if f.result(err) {
			return err
		}
	}
	return f.Fallback.Settle(ctx, r, actual)
}

// SettleBatch implements BatchSettler: on the primary in one go when it
// can; those it cannot reach are settled on the fallback, as Settle does.
func (f *Failover) SettleBatch(ctx context.Context, batch []Settlement) []error {
	l, primary := f.pick()
	if !primary {
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

// Seed implements Limiter.
func (f *Failover) Seed(ctx context.Context, w Window, used int64) error {
	if l, primary := f.pick(); primary {
		err := l.Seed(ctx, w, used)
		if f.result(err) {
			return err
		}
	}
	return f.Fallback.Seed(ctx, w, used)
}

// Peek implements Limiter.
func (f *Failover) Peek(ctx context.Context, ws []Window, now time.Time) ([]int64, error) {
	if l, primary := f.pick(); primary {
		out, err := l.Peek(ctx, ws, now)
		if f.result(err) {
			return out, err
		}
	}
	return f.Fallback.Peek(ctx, ws, now)
}
