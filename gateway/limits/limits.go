// Package limits keeps the counters the LLM gateway checks before it lets a
// call through: rate limits (requests and tokens per minute) and budgets
// (tokens or money per day, week or month, and per-user limits inside a
// project).
//
// Every call reserves an amount in each of its windows at once, all or
// nothing, before it goes upstream: the input tokens counted, the output
// bounded by max_tokens, or the estimated cost. After the call it settles
// each window to what was actually used; a call that failed settles to
// what it consumed (nothing, or a request). A budget reservation that is
// never settled (the gateway died mid-call) lapses at its expiry and gives
// its amount back; a rate window's ends with its minute. Amounts are integers: tokens, requests, or micro-units of
// money; never floats.
//
// Two implementations share these semantics and one conformance suite:
// Redis (one Lua script per reserve and per settle, so replicas share the
// counters exactly) and in-process (one replica, or while Redis is
// unreachable). Failover switches between them.
package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Window is one counter a call is checked and reserved against.
type Window struct {
	// Key names the counter: the limited thing and its period, such as
	// "t1/budget/project/p1/month/2026-11". Calendar windows get a new key
	// each period, so nothing needs resetting.
	Key string
	// Limit is the most the window may hold; a reservation that would take
	// it past the limit is refused.
	Limit int64
	// Amount is what this call reserves.
	Amount int64
	// Ends is when the window's period ends; its counter is kept an hour
	// longer, then dropped.
	Ends time.Time
	// Seeded windows (budgets) start from what the ledger says was spent in
	// the period: a Reserve that finds one without a counter, or with one
	// not reconciled with the ledger since spend last bypassed it (see
	// Reconciler), says so in Decision.Unseeded, and the caller seeds it
	// (Seed) and tries again.
	// Their reservations are tracked one by one and lapse at the request's
	// expiry. Rate windows start at zero, and a reservation never settled
	// stays counted until the window ends (a minute): tracking it would
	// cost more than it gives back.
	Seeded bool
}

// Request is one call's reservation.
type Request struct {
	// ID identifies the reservation (the gateway's request id).
	ID      string
	Windows []Window
	// Expires is when an unsettled reservation lapses.
	Expires time.Time
}

// Decision is the answer to a Reserve.
type Decision struct {
	// Allowed is true when every window took its amount.
	Allowed bool
	// Denied is the index of the first window that would have gone past
	// its limit, when not Allowed and nothing is Unseeded.
	Denied int
	// Used is each window's count: after the reservation when Allowed,
	// before it otherwise.
	Used []int64
	// Unseeded lists the seeded windows that have no counter yet, or one
	// to reconcile with the ledger; nothing was reserved.
	Unseeded []int
	// Epoch is the reconciliation generation the limiter was at when it
	// found windows Unseeded: the caller passes it to Seed, so that a seed
	// made from a ledger read that an epoch since may have missed counts
	// as not reconciled (see Reconciler).
	Epoch int64
}

// Limiter reserves and settles. Limiters read no clock of their own for
// the windows: now is the caller's (the gateway's Options.Now), so that a
// test moves time rather than waits for it. Redis drops a counter by its
// own clock (an hour after its window ends), so a caller's clock must not
// stray far from Redis's.
type Limiter interface {
	// Reserve takes each window's amount, all or nothing.
	Reserve(ctx context.Context, r Request, now time.Time) (Decision, error)
	// Settle replaces each reserved amount by the actual one (actual[i]
	// for r.Windows[i]). Settling a reservation that lapsed adds the actual
	// amount; settling twice is not allowed.
	Settle(ctx context.Context, r Request, actual []int64) error
	// Seed sets a window's count to used (what the ledger says was
	// spent) plus the reservations it holds, plus what settled in it
	// since it was found due (the reading of the ledger may have missed
	// those calls: they settle between the reading and the seed). The
	// shared limiter (Redis) sets it in both directions, since the ledger
	// is the truth; the in-process one keeps a count already higher
	// unless the window was due to be read again. The window then counts
	// as reconciled at epoch (Decision.Epoch of the Reserve that asked
	// for the seed).
	Seed(ctx context.Context, w Window, used, epoch int64) error
	// Peek returns windows' counts without reserving (0 for a window with
	// no counter).
	Peek(ctx context.Context, ws []Window, now time.Time) ([]int64, error)
}

// Settlement is one reservation to settle: the request as reserved and
// the actual amount of each of its windows.
type Settlement struct {
	Request Request
	Actual  []int64
}

// BatchSettler is a Limiter that can settle many reservations at once (in
// one round trip to Redis). Settling happens after the answer, off the
// request path, so a caller can gather settlements for a moment and spend
// one network write and read on all of them.
type BatchSettler interface {
	// SettleBatch settles each of batch as Settle would. It returns nil
	// when all settled, else an error for each (nil for those that
	// settled).
	SettleBatch(ctx context.Context, batch []Settlement) []error
}

// Reconciler is a shared limiter whose budget counters can miss spend:
// spend a replica made while it could not reach it (a partition, during
// which it counted on its own and wrote the spend to the ledger only), or
// spend it forgot (restored from an older snapshot). Reconcile starts a
// new epoch: every budget window is then reported Unseeded once, and its
// Seed sets its count to the ledger's plus the reservations it holds,
// before it is trusted again. Failover reconciles when it starts using
// the primary, and whenever it comes back to it; Redis also reconciles
// by itself when it finds its epoch rolled back (see Redis).
type Reconciler interface {
	Reconcile(ctx context.Context) error
}

// Canceller is a shared limiter that can give back reservations that
// will not be settled on it: those of calls that Failover settled on the
// fallback while the primary could not be reached, and those whose
// reserve timed out (a Redis that was frozen, not gone, still reads it,
// late). The ledger holds what those calls used; a reservation left held
// would count it a second time until it lapsed.
type Canceller interface {
	// Cancel gives back each reservation of reqs the limiter still
	// holds; one it does not hold is left alone.
	Cancel(ctx context.Context, reqs []Request) error
}

// Outstanding is a limiter whose seed of a budget window counts some
// calls itself (see Redis): those that settled into it while it was due,
// and those whose reservations it holds. A call's ledger row may be
// written before its settle reaches the limiter, so the ledger's sum that
// a seed is made from leaves these calls out, or it would count them
// twice.
type Outstanding interface {
	// Outstanding lists the ids of the calls a seed of w counts from the
	// limiter: to read after the ledger rows buffered so far are written,
	// and before the ledger's sum.
	Outstanding(ctx context.Context, w Window) ([]string, error)
}

// ErrUnavailable wraps errors of a limiter that cannot be reached (Redis
// down), as opposed to a refused reservation.
var ErrUnavailable = errors.New("limiter unavailable")

// keep is how long a window's counter outlives its period.
const keep = time.Hour

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// checkReserve refuses a negative amount or limit: a reservation that
// lowered a counter would give back what other calls used.
func checkReserve(r Request) error {
	for _, w := range r.Windows {
		if w.Amount < 0 || w.Limit < 0 {
			return fmt.Errorf("reserve %s: the amount (%d) and the limit (%d) must not be negative", w.Key, w.Amount, w.Limit)
		}
	}
	return nil
}

// checkSettle refuses a settlement that does not give one actual amount
// per window, or gives a negative one.
func checkSettle(r Request, actual []int64) error {
	if len(actual) != len(r.Windows) {
		return fmt.Errorf("settle: %d actual amounts for %d windows", len(actual), len(r.Windows))
	}
	for i, a := range actual {
		if a < 0 {
			return fmt.Errorf("settle %s: the actual amount (%d) must not be negative", r.Windows[i].Key, a)
		}
	}
	return nil
}
