package gateway

import (
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

// order returns a route's endpoints in the order to try them: healthy ones
// first, starting at the next in turn, then those set aside.
func (b *balancer) order(endpoints []string) []string {
	if len(endpoints) <= 1 {
		return endpoints
	}
	start := int(b.next.Add(1) % uint64(len(endpoints)))
	out := make([]string, 0, len(endpoints))
	var aside []string
	now := b.now()
	b.mu.Lock()
	for i := range endpoints {
		e := endpoints[(start+i)%len(endpoints)]
		if until, ok := b.down[e]; ok && now.Before(until) {
			aside = append(aside, e)
			continue
		}
		out = append(out, e)
	}
	b.mu.Unlock()
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
