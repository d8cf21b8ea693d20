package fleet

import (
	"container/list"
	"sync"

	"github.com/klique-ai/klique/internal/events"
)

// claimWaiters hands each placement on a pool to one waiting claim of that
// pool, first come first served, rather than waking every worker of the
// pool to race for one task: with a thousand workers long-polling, waking
// all of them for each placement costs a thousand transactions that find
// nothing. A woken claim that finds nothing it can run (the task needs more
// GPUs than its worker has free) passes the wake on to the next waiter, at
// most once around the line.
type claimWaiters struct {
	mu    sync.Mutex
	pools map[string]*list.List // tenant|pool → *claimWaiter, oldest first
	start sync.Once
}

// claimWaiter is one claim waiting for work. wake receives the number of
// further waiters the wake may be passed on to.
type claimWaiter struct {
	key  string
	wake chan int
	elem *list.Element
}

func waitKey(tenantID, poolID string) string { return tenantID + "|" + poolID }

// listen starts, once, the dispatcher that turns placement events into
// wakes. It runs for the life of the process, like the bus it reads.
func (cw *claimWaiters) listen(bus events.Broker) {
	cw.start.Do(func() {
		sub := bus.Subscribe(8192, func(e events.Event) bool { return e.Kind == "task.placed" && e.PoolID != "" })
		go func() {
			for e := range sub.C {
				cw.wakeOne(waitKey(e.TenantID, e.PoolID), -1)
			}
		}()
	})
}

// add puts a waiter at the back of its pool's line.
func (cw *claimWaiters) add(tenantID, poolID string) *claimWaiter {
	w := &claimWaiter{key: waitKey(tenantID, poolID), wake: make(chan int, 1)}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.pools == nil {
		cw.pools = map[string]*list.List{}
	}
	l := cw.pools[w.key]
	if l == nil {
		l = list.New()
		cw.pools[w.key] = l
	}
	w.elem = l.PushBack(w)
	return w
}

// remove takes a waiter out of its line. A wake it received and did not
// use (it claimed something else, or gave up) goes on to the next waiter.
func (cw *claimWaiters) remove(w *claimWaiter, used bool) {
	cw.mu.Lock()
	if w.elem != nil {
		cw.pools[w.key].Remove(w.elem)
		w.elem = nil
		if cw.pools[w.key].Len() == 0 {
			delete(cw.pools, w.key)
		}
	}
	cw.mu.Unlock()
	if used {
		return
	}
	select {
	case hops := <-w.wake:
		cw.wakeOne(w.key, hops)
	default:
	}
}

// wakeOne wakes the first waiter of a line. hops is how many more times
// the wake may be passed on; -1 means a fresh wake, which may go once
// around the line as it is now.
func (cw *claimWaiters) wakeOne(key string, hops int) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	l := cw.pools[key]
	if l == nil || l.Len() == 0 || hops == 0 {
		return
	}
	if hops < 0 {
		hops = l.Len()
	}
	w := l.Remove(l.Front()).(*claimWaiter)
	w.elem = nil
	if l.Len() == 0 {
		delete(cw.pools, key)
	}
	w.wake <- hops - 1 // never blocks: a waiter is woken once per time in line
}
