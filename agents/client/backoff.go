package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with full jitter: the n-th wait is a
// random duration between Initial·2ⁿ/2 and Initial·2ⁿ, capped at Max. Jitter
// keeps a fleet of workers that lost the control plane at the same moment
// from coming back at the same moment.
type Backoff struct {
	// Initial is the first wait (default 250 ms).
	Initial time.Duration
	// Max caps every wait (default 15 s).
	Max time.Duration
}

// Delay returns the wait before retry number n (0 for the first retry).
func (b Backoff) Delay(n int) time.Duration {
	initial, maxWait := b.Initial, b.Max
	if initial <= 0 {
		initial = 250 * time.Millisecond
	}
	if maxWait <= 0 {
		maxWait = 15 * time.Second
	}
	d := initial
	for i := 0; i < n && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	// Between half and all of d.
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// Sleep waits d or until ctx is done, and reports whether the wait ran out
// (false: ctx is done).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
