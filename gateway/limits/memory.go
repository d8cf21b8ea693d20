package limits

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Memory is the in-process Limiter: exact within one process. One mutex
// guards all counters; a reservation touches a handful of them and holds
// it for well under a microsecond.
type Memory struct {
	mu      sync.Mutex
	windows map[string]*memWindow
	// sweepAt is when dropped windows were last looked for.
	sweepAt time.Time
	// reseed is how long a seeded window's count is trusted before it is
	// read from the ledger again (0: for good).
	reseed time.Duration
}

// NewMemory returns an empty in-process limiter.
func NewMemory() *Memory { return &Memory{windows: map[string]*memWindow{}} }

// NewReseedingMemory returns an in-process limiter whose seeded windows
// (budgets) are read from the ledger again once their count is older than
// every: the fallback of a Failover. Alone, one process sees all of its
// budgets' spend and its counts stay exact. As a fallback, other replicas
// spend the same budgets, and this process may have held a window since an
// earlier outage: reading the ledger again every few seconds keeps its
// budgets within what the replicas spend in that time.
func NewReseedingMemory(every time.Duration) *Memory {
	m := NewMemory()
	m.reseed = every
	return m
}

type memWindow struct {
	used  int64
	until time.Time // Ends + keep: dropped after
	// seededAt is when a seeded window's count was first used after it
	// was read from the ledger; stale asks for it to be read again (see
	// Memory.reseed).
	seededAt time.Time
	stale    bool
	// pending is what settled while the window was stale: the seed that
	// follows reads the ledger before it writes the count, and a call that
	// settles in between, its row not in the reading, would be in neither
	// (see Redis, which keeps the same rule); the seed adds it.
	pending int64
	// held is each live reservation by id and amount; lapse orders the
	// same reservations by expiry.
	held  map[string]*hold
	lapse lapseHeap
}

// hold is one live reservation in one window.
type hold struct {
	key    string
	amount int64
	at     time.Time
	index  int // in lapse
}

type lapseHeap []*hold

func (h lapseHeap) Len() int           { return len(h) }
func (h lapseHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h lapseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *lapseHeap) Push(x any) {
	e := x.(*hold)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *lapseHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// purge gives back the amounts of reservations that lapsed by now.
func (w *memWindow) purge(now time.Time) {
	for len(w.lapse) > 0 && !w.lapse[0].at.After(now) {
		e := heap.Pop(&w.lapse).(*hold)
		delete(w.held, e.key)
		w.used -= e.amount
	}
}

// take removes a live reservation and returns its amount.
func (w *memWindow) take(key string) (int64, bool) {
	e, ok := w.held[key]
	if !ok {
		return 0, false
	}
	delete(w.held, key)
	heap.Remove(&w.lapse, e.index)
	return e.amount, true
}

func reservationKey(id string, amount int64) string {
	return id + ":" + itoa(amount)
}

// window returns the live counter of a key, dropping it first if its
// period is long over.
func (m *Memory) window(key string, now time.Time) *memWindow {
	w := m.windows[key]
	if w != nil && now.After(w.until) {
		delete(m.windows, key)
		return nil
	}
	return w
}

func (m *Memory) create(win Window, used int64) *memWindow {
	w := &memWindow{used: used, until: win.Ends.Add(keep), held: map[string]*hold{}}
	m.windows[win.Key] = w
	return w
}

// sweep drops windows whose period is long over, at most once a minute.
func (m *Memory) sweep(now time.Time) {
	if now.Sub(m.sweepAt) < time.Minute {
		return
	}
	m.sweepAt = now
	for k, w := range m.windows {
		if now.After(w.until) {
			delete(m.windows, k)
		}
	}
}

// Reserve implements Limiter.
func (m *Memory) Reserve(_ context.Context, r Request, now time.Time) (Decision, error) {
	if err := checkReserve(r); err != nil {
		return Decision{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	d := Decision{Used: make([]int64, len(r.Windows))}
	ws := make([]*memWindow, len(r.Windows))
	for i, win := range r.Windows {
		w := m.window(win.Key, now)
		if w != nil && win.Seeded && m.reseed > 0 {
			if w.seededAt.IsZero() {
				w.seededAt = now
			}
			w.stale = w.stale || now.Sub(w.seededAt) >= m.reseed
		}
		if win.Seeded && (w == nil || w.stale) {
			d.Unseeded = append(d.Unseeded, i)
			continue
		}
		if w != nil {
			w.purge(now)
			d.Used[i] = w.used
		}
		ws[i] = w
	}
	if len(d.Unseeded) > 0 {
		return d, nil
	}
	for i, win := range r.Windows {
		if d.Used[i]+win.Amount > win.Limit {
			d.Denied = i
			return d, nil
		}
	}
	for i, win := range r.Windows {
		w := ws[i]
		if w == nil {
			w = m.create(win, 0)
		}
		w.used += win.Amount
		if win.Seeded {
			k := reservationKey(r.ID, win.Amount)
			if e, dup := w.held[k]; dup {
				e.amount += win.Amount
			} else {
				e := &hold{key: k, amount: win.Amount, at: r.Expires}
				w.held[k] = e
				heap.Push(&w.lapse, e)
			}
		}
		d.Used[i] = w.used
	}
	d.Allowed = true
	return d, nil
}

// Settle implements Limiter.
func (m *Memory) Settle(_ context.Context, r Request, actual []int64) error {
	if err := checkSettle(r, actual); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, win := range r.Windows {
		w := m.windows[win.Key]
		if w == nil {
			// The counter is gone (its period ended, or this process
			// restarted): a seeded one is counted from the ledger at its
			// next seed.
			continue
		}
		if !win.Seeded {
			w.used += actual[i] - win.Amount
			continue
		}
		if amt, ok := w.take(reservationKey(r.ID, win.Amount)); ok {
			w.used += actual[i] - amt
		} else {
			w.used += actual[i]
		}
		if w.stale {
			w.pending += actual[i]
		}
	}
	return nil
}

// Seed implements Limiter. A window due to be read again (see
// NewReseedingMemory) takes the ledger's count plus the reservations this
// process holds in it, which the ledger cannot know of yet, plus what
// settled in it since it was found due (which the reading may have
// missed). One process sees all of its spend: it has no epochs.
func (m *Memory) Seed(_ context.Context, win Window, used, _ int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch w := m.windows[win.Key]; {
	case w == nil:
		m.create(win, used)
	default:
		for _, h := range w.held {
			used += h.amount
		}
		if w.stale {
			w.used, w.stale, w.seededAt = used+w.pending, false, time.Time{}
			w.pending = 0
		} else {
			w.used = max(w.used, used)
		}
	}
	return nil
}

// Peek implements Limiter.
func (m *Memory) Peek(_ context.Context, ws []Window, now time.Time) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int64, len(ws))
	for i, win := range ws {
		if w := m.window(win.Key, now); w != nil {
			w.purge(now)
			out[i] = w.used
		}
	}
	return out, nil
}
