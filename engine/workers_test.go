package engine_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
)

func TestWorkPlacedWhereNoWorkerIs(t *testing.T) {
	t0 := enginetest.T0
	offline := engine.PoolWorkers{ClaimTimeout: 5 * time.Minute, LastSeen: t0.Add(-10 * time.Minute)}
	online := engine.PoolWorkers{ClaimTimeout: 5 * time.Minute, Online: true, LastSeen: t0}
	estate := func() *enginetest.EstateBuilder {
		return enginetest.NewEstate(t).Pool("onprem", 4).Pool("spare", 4).Profile("one", 1, "onprem", "spare").
			Group("A", 0, 8).Queue("A", "one")
	}

	t.Run("work no worker claims within the claim timeout goes back to the front, and the next pool takes it", func(t *testing.T) {
		s := estate().Workers("onprem", t0.Add(-time.Hour), offline).Workers("spare", t0.Add(-time.Hour), online).
			Run("A/one", "onprem", 1, "1", t0.Add(-6*time.Minute)).Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"A/one#1"}) {
			t.Fatalf("preempted %v, want the unclaimed task", got)
		}
		p := d.Preemptions[0]
		want := "not claimed within 5m: placed on pool onprem; no worker of pool onprem is online (last seen 2026-11-25 09:50:00 UTC)"
		if p.Cause != engine.CauseUnclaimed || p.Reason != want {
			t.Fatalf("preempted for %s: %q, want %s: %q", p.Cause, p.Reason, engine.CauseUnclaimed, want)
		}
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v in the pass that requeued the head", d.Placements)
		}
		// The next pass: the task is back at the front, in its old order.
		next := estate().Workers("onprem", t0.Add(-time.Hour), offline).Workers("spare", t0.Add(-time.Hour), online).
			Wait("A/one", 2, "1").Build()
		if got := enginetest.PlacedOn(next, engine.Pass(next)); !reflect.DeepEqual(got, map[string][]string{"spare": {"A/one#1", "A/one#2"}}) {
			t.Fatalf("placed %v, want both on the pool with a worker", got)
		}
	})

	t.Run("claimed work, and work within its claim timeout, stay", func(t *testing.T) {
		s := estate().Workers("onprem", t0.Add(-time.Hour), offline).
			Run("A/one", "onprem", 1, "1", t0.Add(-time.Hour)).Run("A/one", "onprem", 1, "1", t0.Add(-4*time.Minute)).
			Claimed("A/one#1").Build()
		if d := engine.Pass(s); len(d.Preemptions) != 0 {
			t.Fatalf("preempted %v", enginetest.PreemptedIDs(d))
		}
	})

	t.Run("work on a pool with a worker online stays however long it waits", func(t *testing.T) {
		s := estate().Workers("onprem", t0.Add(-time.Hour), online).Run("A/one", "onprem", 1, "1", t0.Add(-time.Hour)).Build()
		if d := engine.Pass(s); len(d.Preemptions) != 0 {
			t.Fatalf("preempted %v", enginetest.PreemptedIDs(d))
		}
	})

	t.Run("with the claim timeout off, as for a pool an autoscaler serves, work waits for a worker for ever", func(t *testing.T) {
		s := estate().Workers("onprem", t0.Add(-time.Hour), engine.PoolWorkers{}).
			Run("A/one", "onprem", 1, "1", t0.Add(-time.Hour)).Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		if len(d.Preemptions) != 0 {
			t.Fatalf("preempted %v", enginetest.PreemptedIDs(d))
		}
		if got := enginetest.PlacedOn(s, d); !reflect.DeepEqual(got, map[string][]string{"onprem": {"A/one#2"}}) {
			t.Fatalf("placed %v, want the first pool, worker or not", got)
		}
	})

	t.Run("a pool without a worker for its claim timeout takes no work, and the head says why", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("onprem", 4).Profile("one", 1, "onprem").Group("A", 0, 8).Queue("A", "one").
			Workers("onprem", t0.Add(-time.Hour), engine.PoolWorkers{ClaimTimeout: 5 * time.Minute}).Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v on a pool no worker serves", d.Placements)
		}
		bl := enginetest.BlockedOf(s, d, "A/one")
		if bl == nil || bl.Constraint != engine.HeldByNoWorker ||
			!strings.Contains(bl.Reason, "no worker of pool onprem is online (none has registered)") {
			t.Fatalf("blocked = %+v, want the head held for want of a worker", bl)
		}
	})

	t.Run("a pool declared less than its claim timeout ago takes work before any worker registers", func(t *testing.T) {
		s := estate().Workers("onprem", t0.Add(-time.Minute), engine.PoolWorkers{ClaimTimeout: 5 * time.Minute}).
			Wait("A/one", 1, "1").Build()
		if got := enginetest.PlacedOn(s, engine.Pass(s)); !reflect.DeepEqual(got, map[string][]string{"onprem": {"A/one#1"}}) {
			t.Fatalf("placed %v, want the first pool: its workers may still be starting", got)
		}
	})
}
