package events

import (
	"sync"
	"sync/atomic"
)

// Hub shares one feed per topic among all who subscribe to it. A topic is
// something many people watch at once (one compute resource's queue, one
// tenant's pools): its feed turns the events it cares about into one
// payload, built once, and the hub hands that payload to every subscriber.
// Building per subscriber instead would cost 10,000 store reads per event on
// a busy dashboard.
//
// Each subscriber has a bounded buffer. When a subscriber reads more slowly
// than payloads come, its oldest unread payload is dropped and counted, and
// the next payload it takes says how many it missed: a stalled client never
// delays the feed or the other subscribers, and never grows memory.
type Hub[T any] struct {
	mu     sync.Mutex
	topics map[string]*hubTopic[T]
	// dropped counts payloads dropped for slow subscribers, over all
	// topics and all time.
	dropped atomic.Uint64
}

type hubTopic[T any] struct {
	mu   sync.RWMutex
	subs map[*Receiver[T]]struct{}
	stop func()
}

// Feed starts a topic's feed: it calls publish with each payload until stop
// is called. Feeds run in their own goroutine.
type Feed[T any] func(publish func(T)) (stop func())

// Receiver is one subscriber's bounded buffer of a topic's payloads.
type Receiver[T any] struct {
	mu      sync.Mutex
	buf     []T
	head    int
	n       int
	missed  int
	ready   chan struct{}
	closed  bool
	leave   func()
	dropped *atomic.Uint64
}

// Join subscribes to topic with a buffer of size payloads. When it is the
// topic's first subscriber, start is called to begin the feed; when the last
// subscriber closes, the feed's stop is called.
func (h *Hub[T]) Join(topic string, size int, start Feed[T]) *Receiver[T] {
	if size < 1 {
		size = 1
	}
	r := &Receiver[T]{buf: make([]T, size), ready: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.topics == nil {
		h.topics = map[string]*hubTopic[T]{}
	}
	t := h.topics[topic]
	first := t == nil
	if first {
		t = &hubTopic[T]{subs: map[*Receiver[T]]struct{}{}}
		h.topics[topic] = t
	}
	t.mu.Lock()
	t.subs[r] = struct{}{}
	t.mu.Unlock()
	r.leave = func() { h.leave(topic, t, r) }
	r.dropped = &h.dropped
	if first && start != nil {
		// Started under h.mu so that a second subscriber cannot see the
		// topic before its feed runs, nor a closing one stop it twice.
		t.stop = start(func(v T) { t.publish(v) })
	}
	h.mu.Unlock()
	return r
}

// Publish hands v to every subscriber of topic, as the topic's own feed
// does; it is for payloads that come from outside the feed. Nothing
// happens when nobody subscribes.
func (h *Hub[T]) Publish(topic string, v T) {
	h.mu.Lock()
	t := h.topics[topic]
	h.mu.Unlock()
	if t != nil {
		t.publish(v)
	}
}

// Subscribers returns how many subscribe to topic now.
func (h *Hub[T]) Subscribers(topic string) int {
	h.mu.Lock()
	t := h.topics[topic]
	h.mu.Unlock()
	if t == nil {
		return 0
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.subs)
}

// Dropped returns how many payloads were dropped for subscribers that did
// not keep up, since the hub was made.
func (h *Hub[T]) Dropped() uint64 { return h.dropped.Load() }

// Topics returns how many topics have subscribers (and so a running feed).
func (h *Hub[T]) Topics() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}

func (h *Hub[T]) leave(topic string, t *hubTopic[T], r *Receiver[T]) {
	h.mu.Lock()
	t.mu.Lock()
	delete(t.subs, r)
	last := len(t.subs) == 0
	t.mu.Unlock()
	var stop func()
	if last && h.topics[topic] == t {
		delete(h.topics, topic)
		stop = t.stop
	}
	h.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (t *hubTopic[T]) publish(v T) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for r := range t.subs {
		r.offer(v)
	}
}

// offer buffers v, dropping the oldest unread payload when the buffer is
// full. It never blocks on the reader.
func (r *Receiver[T]) offer(v T) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	size := len(r.buf)
	if r.n == size {
		var zero T
		r.buf[r.head] = zero
		r.head = (r.head + 1) % size
		r.n--
		r.missed++
		r.dropped.Add(1)
	}
	r.buf[(r.head+r.n)%size] = v
	r.n++
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when payloads may be waiting; call Take until it
// reports none.
func (r *Receiver[T]) Ready() <-chan struct{} { return r.ready }

// Take returns the oldest unread payload and how many payloads were dropped
// before it since the previous Take (then reset); ok is false when none is
// waiting.
func (r *Receiver[T]) Take() (v T, missed int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return v, 0, false
	}
	v = r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	missed, r.missed = r.missed, 0
	return v, missed, true
}

// Close leaves the topic; payloads published later are not buffered.
// Closing twice is harmless.
func (r *Receiver[T]) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.leave()
}
