package gateway

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// balancer spreads calls across the endpoints of a static route and keeps
// failing ones aside: an endpoint that failed is not tried first again for
// a while (passive health), but is still tried when nothing else is left.
type balancer struct {
	mu   sync.Mutex
	down map[string]time.Time // endpoint → until
	next atomic.Uint64
	// rest is how long a failed endpoint is set aside.
	rest time.Duration
	now  func() time.Time
}

func newBalancer() *balancer {
	return &balancer{down: map[string]time.Time{}, rest: 10 * time.Second, now: time.Now}
}

// turn returns the next turn: one per call, however many of its models
// stand on routes, so that the healthy endpoints of a route take calls in
// turn even when a call's fallback is on the same route (two orders a
// call would otherwise start two endpoints of a pair on the same one every
// time).
func (b *balancer) turn() uint64 { return b.next.Add(1) }

// order returns a route's endpoints in the order to try them for a call's
// turn: the healthy ones first, starting at the turn's among them (so that
// they share the calls evenly, whichever are set aside), then those set
// aside.
func (b *balancer) order(endpoints []string, turn uint64) []string {
	if len(endpoints) <= 1 {
		return endpoints
	}
	out := make([]string, 0, len(endpoints))
	var aside []string
	now := b.now()
	b.mu.Lock()
	for _, e := range endpoints {
		if until, ok := b.down[e]; ok && now.Before(until) {
			aside = append(aside, e)
			continue
		}
		out = append(out, e)
	}
	b.mu.Unlock()
	if n := len(out); n > 1 {
		// Rotate left by the turn, in place.
		start := int(turn % uint64(n))
		slices.Reverse(out[:start])
		slices.Reverse(out[start:])
		slices.Reverse(out)
	}
	return append(out, aside...)
}

func (b *balancer) failed(a Attempt) {
	if a.Route == "" {
		return
	}
	b.mu.Lock()
	b.down[a.BaseURL] = b.now().Add(b.rest)
	b.mu.Unlock()
}

func (b *balancer) succeeded(a Attempt) {
	if a.Route == "" {
		return
	}
	b.mu.Lock()
	delete(b.down, a.BaseURL)
	b.mu.Unlock()
}
