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
// Each subscriber is a bounded channel that the hub fills as it publishes:
// no goroutine stands between the feed and the reader (at 10,000
// subscribers, one would cost more than the delivery). Each subscriber's
// filter decides, as the payload is handed over, what that subscriber may
// see of it. When a subscriber reads more slowly than payloads come and its
// channel is full, the payloads it has not read are dropped and counted, and
// the newest is delivered in their place, told how many were missed: a
// stalled client never delays the feed or the other subscribers, never grows
// memory, and catches up on the newest state when it reads again.
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

// Filter decides what one subscriber gets of a payload, as the payload is
// handed to it: out is the payload as the subscriber may see it (told of
// missed payloads dropped before it, when missed > 0), deliver says whether
// it gets anything, and end that the subscription must end (its credential
// no longer holds). A nil Filter delivers every payload as it is.
type Filter[T any] func(v T, missed int) (out T, deliver, end bool)

// Receiver is one subscriber's bounded channel of a topic's payloads.
type Receiver[T any] struct {
	mu      sync.Mutex
	ch      chan T // made by Start
	size    int
	filter  Filter[T]
	held    []T // payloads that came before Start
	holding bool
	missed  int
	// told holds, for the payloads last sent (as many as the channel
	// holds), how many missed payloads each was told of: when unread ones
	// are dropped, what they told is told again by the next. It assumes
	// the drained payloads are the newest sent, which a reader taking one
	// in the middle of a drain breaks; toldOf, when set, reads the count
	// from each drained payload instead, and is exact.
	told    []int
	toldOf  func(T) int
	sent    int
	closed  bool
	onClose []func()
	leave   func()
	dropped *atomic.Uint64
}

// Join subscribes to topic with room for size unread payloads. When it is
// the topic's first subscriber, start is called to begin the feed; when the
// last subscriber closes, the feed's stop is called. Payloads published
// before Start are held (the newest size of them) and delivered after
// Start's first payloads, so that a snapshot read after Join loses nothing
// that happened while it was read.
func (h *Hub[T]) Join(topic string, size int, start Feed[T]) *Receiver[T] {
	if size < 1 {
		size = 1
	}
	r := &Receiver[T]{size: size, holding: true}
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
	var ended []*Receiver[T]
	t.mu.RLock()
	for r := range t.subs {
		if !r.offer(v) {
			ended = append(ended, r)
		}
	}
	t.mu.RUnlock()
	// Closed outside the topic's lock: leaving takes it.
	for _, r := range ended {
		r.Close()
	}
}

// offer hands v to the subscriber through its filter. It never blocks on
// the reader. It returns false when the filter ends the subscription.
func (r *Receiver[T]) offer(v T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return true
	}
	if r.holding {
		if len(r.held) == r.size {
			var zero T
			r.held[0] = zero
			r.held = r.held[1:]
			r.missed++
			r.dropped.Add(1)
		}
		r.held = append(r.held, v)
		return true
	}
	return r.deliverLocked(v)
}

// deliverLocked sends v through the filter into the channel, first
// dropping what the reader has left unread if the channel is full.
func (r *Receiver[T]) deliverLocked(v T) bool {
	if len(r.ch) == cap(r.ch) {
		// The reader takes the oldest first, so the ones drained here,
		// until none is left, are the newest sent.
		n, told := 0, 0
	drain:
		for {
			select {
			case v := <-r.ch:
				n++
				if r.toldOf != nil {
					told += r.toldOf(v)
				}
			default:
				break drain
			}
		}
		if r.toldOf == nil {
			for i := 1; i <= n; i++ {
				told += r.told[(r.sent-i)%len(r.told)]
			}
		}
		r.missed += n + told
		r.dropped.Add(uint64(n))
	}
	out, deliver, end := v, true, false
	if r.filter != nil {
		out, deliver, end = r.filter(v, r.missed)
	}
	if end {
		return false
	}
	if !deliver {
		return true
	}
	r.send(out, r.missed)
	r.missed = 0
	return true
}

// send puts v, told of missed payloads, in the channel, which has room:
// only offers and Start send, under r.mu.
func (r *Receiver[T]) send(v T, missed int) {
	r.told[r.sent%len(r.told)] = missed
	r.sent++
	r.ch <- v
}

// Start delivers first (a snapshot, sent as it is), then what was published
// since Join, and from then on each payload as it comes, each through
// filter. onClose runs once when the receiver closes.
func (r *Receiver[T]) Start(first []T, filter Filter[T], onClose ...func()) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		for _, f := range onClose {
			f()
		}
		return
	}
	r.onClose = append(r.onClose, onClose...)
	r.filter = filter
	// Room for first, and then for size unread payloads.
	r.ch = make(chan T, len(first)+r.size)
	r.told = make([]int, cap(r.ch))
	for _, v := range first {
		r.send(v, 0)
	}
	held := r.held
	r.held, r.holding = nil, false
	ended := false
	for _, v := range held {
		if !r.deliverLocked(v) {
			ended = true
			break
		}
	}
	r.mu.Unlock()
	if ended {
		r.Close()
	}
}

// ToldBy says how to read, from a payload the filter let out, how many
// missed payloads it told of. Without it, a payload dropped unread is
// assumed to be one of the newest sent, which holds unless the reader
// takes a payload while the drop drains the channel; then a count told by
// the payload the reader took in the middle is lost, and the reader is
// told of fewer than it missed. Call it before Start.
func (r *Receiver[T]) ToldBy(f func(T) int) {
	r.mu.Lock()
	r.toldOf = f
	r.mu.Unlock()
}

// C is the subscriber's channel, once Start has made it. It is closed when
// the receiver closes.
func (r *Receiver[T]) C() <-chan T { return r.ch }

// Close leaves the topic and closes the channel; payloads published later
// are not delivered. Closing twice is harmless.
func (r *Receiver[T]) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	if r.ch == nil {
		r.ch = make(chan T)
	}
	close(r.ch)
	onClose := r.onClose
	r.onClose = nil
	r.mu.Unlock()
	r.leave()
	for _, f := range onClose {
		f()
	}
}
