// Package events carries what happened in the control plane (a task
// enqueued, a pool changed) from the platform service to whoever listens:
// GraphQL subscriptions, the dashboard, the engine loop's wake-up.
//
// The platform service publishes an event only after the transaction that
// made the change has committed, so a listener never sees a change that was
// rolled back.
package events

import (
	"sync"
	"sync/atomic"
	"time"
)

// Event is one thing that happened.
type Event struct {
	TenantID string
	// Kind names what happened, such as "task.enqueued" or "pool.updated".
	Kind       string
	ObjectKind string
	ObjectID   string
	ObjectName string
	// GroupID is set when the object belongs to one group, so that
	// listeners can deliver it only to those who may see it.
	GroupID string
	// PoolID is set for events about work on a pool (a task placed there),
	// so that the pool's workers waiting for work wake up.
	PoolID  string
	ActorID string
	At      time.Time
}

// Publisher publishes events.
type Publisher interface {
	Publish(e Event)
}

// Broker publishes events and lets listeners subscribe to them.
type Broker interface {
	Publisher
	Subscribe(size int, filter func(Event) bool) *Subscription
}

// Bus fans events out to in-process subscribers. A subscriber that does not
// keep up loses events rather than slowing the publisher: Publish never
// blocks.
type Bus struct {
	mu   sync.RWMutex
	subs map[*Subscription]struct{}
	// forward, when set, also sends each published event to the other
	// replicas (see BridgeRedis). Events that come from them are delivered
	// here without being forwarded again.
	forward atomic.Pointer[func(Event)]
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscription receives events on C until Close.
type Subscription struct {
	C       <-chan Event
	c       chan Event
	bus     *Bus
	dropped uint64
	mu      sync.Mutex
	filter  func(Event) bool
}

// Subscribe returns a subscription with a buffer of size events, receiving
// those for which filter returns true (all when filter is nil).
func (b *Bus) Subscribe(size int, filter func(Event) bool) *Subscription {
	if size < 1 {
		size = 1
	}
	c := make(chan Event, size)
	s := &Subscription{C: c, c: c, bus: b, filter: filter}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish delivers e to every subscriber whose filter accepts it, dropping it
// for subscribers whose buffer is full, and forwards it to the other
// replicas when the bus is bridged.
func (b *Bus) Publish(e Event) {
	b.deliver(e)
	if f := b.forward.Load(); f != nil {
		(*f)(e)
	}
}

// deliver hands e to this replica's subscribers only.
func (b *Bus) deliver(e Event) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.c <- e:
		default:
			s.mu.Lock()
			s.dropped++
			s.mu.Unlock()
		}
	}
}

// Dropped returns how many events this subscriber missed because its buffer
// was full.
func (s *Subscription) Dropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Close stops delivery and closes C.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	if _, ok := s.bus.subs[s]; ok {
		delete(s.bus.subs, s)
		close(s.c)
	}
	s.bus.mu.Unlock()
}
