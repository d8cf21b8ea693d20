package fleet

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/events"
)

// woken reports the hops of the wake w received, or -1 if none came.
func woken(w *claimWaiter) int {
	select {
	case h := <-w.wake:
		return h
	case <-time.After(50 * time.Millisecond):
		return -1
	}
}

func TestAPlacementWakesOneWaitingClaimInArrivalOrder(t *testing.T) {
	var cw claimWaiters
	bus := events.NewBus()
	cw.listen(bus)
	first, second, third := cw.add("t", "p"), cw.add("t", "p"), cw.add("t", "p")
	elsewhere := cw.add("t", "other")

	bus.Publish(events.Event{TenantID: "t", Kind: "task.placed", PoolID: "p"})
	if h := woken(first); h != 2 {
		t.Fatalf("the first in line got hops %d, want 2 (the rest of the line)", h)
	}
	if woken(second) != -1 || woken(third) != -1 || woken(elsewhere) != -1 {
		t.Fatal("a single placement woke more than one claim")
	}
	// Events that are not placements on a pool wake nobody.
	bus.Publish(events.Event{TenantID: "t", Kind: "task.enqueued", PoolID: "p"})
	bus.Publish(events.Event{TenantID: "u", Kind: "task.placed", PoolID: "p"})
	if woken(second) != -1 {
		t.Fatal("an event for another tenant or of another kind woke a claim")
	}
	bus.Publish(events.Event{TenantID: "t", Kind: "task.placed", PoolID: "p"})
	if woken(second) != 1 || woken(third) != -1 {
		t.Fatal("the second placement did not go to the second in line")
	}
}

func TestAWakeNotUsedGoesToTheNextInLine(t *testing.T) {
	var cw claimWaiters
	a, b := cw.add("t", "p"), cw.add("t", "p")
	cw.wakeOne(waitKey("t", "p"), -1)
	// a claimed something without needing the wake (or gave up): it
	// leaves the line and the wake goes on to b.
	cw.remove(a, false)
	if h := woken(b); h != 0 {
		t.Fatalf("b got hops %d, want 0", h)
	}
	// A waiter that leaves without a wake passes nothing on.
	c, d := cw.add("t", "p"), cw.add("t", "p")
	cw.remove(c, false)
	if woken(d) != -1 {
		t.Fatal("a waiter that left without a wake woke another")
	}
	cw.remove(d, false)
	if len(cw.pools) != 0 {
		t.Fatalf("empty lines are kept: %v", cw.pools)
	}
}

func TestAWakePassedOnGoesAroundTheLineAtMostOnce(t *testing.T) {
	var cw claimWaiters
	key := waitKey("t", "p")
	line := []*claimWaiter{cw.add("t", "p"), cw.add("t", "p"), cw.add("t", "p")}
	cw.wakeOne(key, -1)
	passes := 0
	// Each woken claim finds nothing it can run, goes back in line and
	// passes the wake on, as ClaimTask does.
	for i := 0; i < 10; i++ {
		var got *claimWaiter
		hops := -1
		for _, w := range line {
			if h := woken(w); h >= 0 {
				got, hops = w, h
				break
			}
		}
		if got == nil {
			break
		}
		passes++
		for j, w := range line {
			if w == got {
				line[j] = cw.add("t", "p")
			}
		}
		cw.wakeOne(key, hops)
	}
	if passes != 3 {
		t.Fatalf("the wake visited %d claims, want each of the 3 once", passes)
	}
}
