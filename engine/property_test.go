package engine_test

import (
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
)

// The property tests drive the pure pass over random estates and random
// event sequences (arrivals, completions, time passing with budgets burning
// at the running rate, budgets raised and lowered) through a small simulated
// world that applies each pass's decisions the way the loop does:
// placements move a task from its queue to its pool at Now; preemptions send
// it back to its queue in its old order (by Seq). After every pass the world
// checks the invariants of the pass (checkPass, property_pass_test.go), of
// reclaim (property_reclaim_test.go) and of budgets and the ledger
// (property_budget_test.go); each is stated precisely where it is checked.
// The world itself is in property_world_test.go.
//
// Run longer by hand with, for example:
//
//	go test ./engine -run TestPassProperties -rapid.checks=20000

func TestPassProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := genWorld(rt, false)
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			w.event(rt)
			w.pass(rt)
		}
		w.checkLedger(rt)
	})
}

// TestPassPropertiesUnderContention checks the same properties on estates
// built for reclaim: few small pools shared by every profile, and groups
// with reservations that borrow up to limits as large as the estate.
func TestPassPropertiesUnderContention(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := genWorld(rt, true)
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			w.event(rt)
			w.pass(rt)
		}
		w.checkLedger(rt)
	})
}

// Regressions the properties found, kept as scenarios named after the rule
// they prove.
func TestRegressionsFoundByProperties(t *testing.T) {
	t.Run("reclaim frees a reservation even when taking work newest first would not", func(t *testing.T) {
		// B is 16 GPUs above its reservation of 1 and holds a 16-GPU gang
		// and, newer, one GPU. Newest first, B gives back the one GPU and
		// then cannot give the gang without going below its reservation;
		// the gang alone frees A's 2 GPUs and leaves B at its reservation.
		s := enginetest.NewEstate(t).Pool("p", 17).Profile("any", 1, "p").
			Group("A", 2, 2).Group("B", 1, 17).Queue("A", "any").Queue("B", "any").
			Run("B/any", "p", 1, "2x8", enginetest.T0.Add(-2*time.Hour)).
			Run("B/any", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
			Wait("A/any", 1, "2").Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"B/any#1"}) {
			t.Fatalf("preempted %v, want only B's gang", got)
		}
		if got := enginetest.PlacedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"A/any#3"}) {
			t.Fatalf("placed %v, want A's task", got)
		}
	})

	t.Run("nothing behind a preempted task is placed in the pass that preempted it", func(t *testing.T) {
		// B borrows all of p; A reclaims an eighth of it. B's preempted task
		// goes back to the front of B's queue, so B's next task must not
		// take the idle GPU on q ahead of it.
		s := enginetest.NewEstate(t).Pool("p", 5).Pool("q", 1).Profile("one", 1, "p", "q").Profile("eighth", 0.125, "p").
			Group("A", 1, 1).Group("B", 0, 5).Queue("A", "eighth").Queue("B", "one").
			Run("B/one", "p", 5, "1", enginetest.T0.Add(-time.Hour)).
			Wait("B/one", 1, "1").Wait("A/eighth", 1, "0.125").Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"B/one#5"}) {
			t.Fatalf("preempted %v, want B's newest", got)
		}
		if got := enginetest.PlacedOn(s, d); !reflect.DeepEqual(got, map[string][]string{"p": {"A/eighth#7"}}) {
			t.Fatalf("placed %v, want only A's eighth: B/one#6 would overtake the requeued B/one#5", got)
		}
	})
}
