package engine_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
)

func TestFillReservations(t *testing.T) {
	t.Run("a group below its reservation is placed up to it, within the reservation phase", func(t *testing.T) {
		b := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("A", 3, 8).Queue("A", "one").Wait("A/one", 5, "1")
		s := b.Build()
		d := engine.Pass(s)
		if got := len(d.Placements); got != 5 {
			t.Fatalf("placed %d tasks, want 5 (3 reserved, then 2 lent)", got)
		}
		for i, p := range d.Placements {
			wantPhase, wantBorrowed := engine.PhaseReservation, false
			if i >= 3 {
				wantPhase, wantBorrowed = engine.PhaseLend, true
			}
			if p.Phase != wantPhase || p.Borrowed != wantBorrowed {
				t.Errorf("placement %d: phase %s borrowed %v, want %s %v", i, p.Phase, p.Borrowed, wantPhase, wantBorrowed)
			}
		}
	})

	t.Run("every profile's first pool is tried for all reserved work before any second pool", func(t *testing.T) {
		// X prefers p1, Y prefers p2. Served profile by profile, A would
		// spill onto p2 before B got its first pool.
		b := enginetest.NewEstate(t).Pool("p1", 2).Pool("p2", 2).
			Profile("X", 1, "p1", "p2").Profile("Y", 1, "p2", "p1").
			Group("A", 4, 4).Group("B", 4, 4).Queue("A", "X").Queue("B", "Y").
			Wait("A/X", 3, "1").Wait("B/Y", 3, "1")
		s := b.Build()
		got := enginetest.PlacedOn(s, engine.Pass(s))
		want := map[string][]string{"p1": {"A/X#1", "A/X#2"}, "p2": {"B/Y#4", "B/Y#5"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("placed %v, want %v", got, want)
		}
	})

	t.Run("within a pool, profiles are served in execution priority", func(t *testing.T) {
		b := enginetest.NewEstate(t).Pool("p", 1).Profile("small", 1, "p").Profile("large", 1, "p").
			ExecutionPriority("p", "large", "small").
			Group("A", 1, 1).Group("B", 1, 1).Queue("A", "small").Queue("B", "large").
			Wait("A/small", 1, "1").Wait("B/large", 1, "1")
		s := b.Build()
		if got := enginetest.PlacedOn(s, engine.Pass(s))["p"]; !reflect.DeepEqual(got, []string{"B/large#2"}) {
			t.Fatalf("placed %v, want the large profile's task first", got)
		}
	})

	t.Run("within a profile, groups are served in queuing priority", func(t *testing.T) {
		b := enginetest.NewEstate(t).Pool("p", 1).Profile("one", 1, "p").
			Group("second", 1, 1).Group("first", 1, 1).Queue("first", "one").Queue("second", "one").
			Wait("second/one", 1, "1").Wait("first/one", 1, "1")
		s := b.Build()
		if got := enginetest.PlacedOn(s, engine.Pass(s))["p"]; !reflect.DeepEqual(got, []string{"first/one#2"}) {
			t.Fatalf("placed %v, want the queue first in queuing priority", got)
		}
	})

	t.Run("within a compute resource, tasks go in queue order and the head blocks the rest", func(t *testing.T) {
		b := enginetest.NewEstate(t).Pool("p", 3).Profile("var", 1, "p").Group("A", 3, 8).Queue("A", "var").
			Run("A/var", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
			Wait("A/var", 1, "3").Wait("A/var", 1, "1")
		s := b.Build()
		d := engine.Pass(s)
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v behind a head that does not fit", d.Placements)
		}
		if bl := enginetest.BlockedOf(s, d, "A/var"); bl == nil || bl.TaskID != "A/var#2" || bl.Constraint != engine.HeldByPoolsFull {
			t.Fatalf("blocked = %+v, want the head held by the full pool", bl)
		}
	})

	t.Run("a task that would take its group above its reservation waits for lending", func(t *testing.T) {
		b := enginetest.NewEstate(t).Pool("p", 8).Profile("two", 1, "p").Group("A", 3, 8).Queue("A", "two").Wait("A/two", 2, "2")
		s := b.Build()
		d := engine.Pass(s)
		if len(d.Placements) != 2 || d.Placements[0].Phase != engine.PhaseReservation || d.Placements[1].Phase != engine.PhaseLend || !d.Placements[1].Borrowed {
			t.Fatalf("placements %+v: want one within the reservation, then one borrowed", d.Placements)
		}
	})

	t.Run("fractions count as their share of a GPU", func(t *testing.T) {
		b := enginetest.NewEstate(t).Pool("p", 1).Profile("eighth", 0.125, "p").Group("A", 1, 1).Queue("A", "eighth").Wait("A/eighth", 9, "0.125")
		s := b.Build()
		d := engine.Pass(s)
		if len(d.Placements) != 8 {
			t.Fatalf("placed %d eighths on one GPU, want 8", len(d.Placements))
		}
		if bl := enginetest.BlockedOf(s, d, "A/eighth"); bl == nil || bl.Constraint != engine.HeldByLimit {
			t.Fatalf("the ninth eighth is held by %+v, want the group's limit", bl)
		}
	})

	t.Run("multi-node work is placed whole or not at all", func(t *testing.T) {
		b := enginetest.NewEstate(t).Pool("p", 8).Profile("2x4", 8, "p").Profile("one", 1, "p").
			Group("A", 8, 16).Group("B", 0, 8).Queue("A", "2x4").Queue("B", "one").
			Run("B/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).Wait("A/2x4", 1, "2x4")
		s := b.Build()
		d := engine.Pass(s)
		// A is below its reservation: one GPU of borrowed work is reclaimed
		// so the gang fits whole.
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"B/one#1"}) {
			t.Fatalf("preempted %v, want B's borrowed GPU", got)
		}
		if got := enginetest.PlacedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"A/2x4#2"}) {
			t.Fatalf("placed %v, want the 2x4 gang", got)
		}
	})
}

func TestReclaim(t *testing.T) {
	// The seeds' worked example: group A is quiet and B borrows A's idle
	// reservation; A queues work; B's borrowed work is preempted and A's
	// work takes its reserved GPUs.
	seed := func(t *testing.T) *enginetest.EstateBuilder {
		return enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").
			Group("A", 4, 8).Group("B", 4, 8).Queue("A", "one").Queue("B", "one").
			Run("B/one", "p", 4, "1", enginetest.T0.Add(-3*time.Hour)). // B's reservation
			Run("B/one", "p", 2, "1", enginetest.T0.Add(-2*time.Hour)). // borrowed
			Run("B/one", "p", 2, "1", enginetest.T0.Add(-1*time.Hour))  // borrowed, newest
	}

	t.Run("borrowed work is preempted, newest first, and the owner takes its reserved GPUs", func(t *testing.T) {
		s := seed(t).Wait("A/one", 2, "1").Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"B/one#8", "B/one#7"}) {
			t.Fatalf("preempted %v, want B's two newest", got)
		}
		for _, p := range d.Preemptions {
			if p.Cause != engine.CauseReclaim || !strings.Contains(p.Reason, "reclaimed by group A") {
				t.Fatalf("preemption %+v lacks the reclaim reason", p)
			}
		}
		if got := enginetest.PlacedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"A/one#9", "A/one#10"}) {
			t.Fatalf("placed %v, want A's two tasks", got)
		}
		for _, p := range d.Placements {
			if p.Phase != engine.PhaseReclaim || p.Borrowed {
				t.Fatalf("placement %+v: want a reclaim within the reservation", p)
			}
		}
	})

	t.Run("only as much as the waiting work needs is preempted", func(t *testing.T) {
		s := seed(t).Wait("A/one", 1, "1").Build()
		if got := enginetest.PreemptedIDs(engine.Pass(s)); !reflect.DeepEqual(got, []string{"B/one#8"}) {
			t.Fatalf("preempted %v, want one task", got)
		}
	})

	t.Run("a group is never taken below its own reservation", func(t *testing.T) {
		s := seed(t).Wait("A/one", 6, "1").Build()
		d := engine.Pass(s)
		if got := len(d.Preemptions); got != 4 {
			t.Fatalf("preempted %d, want the 4 borrowed GPUs and none of B's reservation", got)
		}
		if got := len(d.Placements); got != 4 {
			t.Fatalf("placed %d of A's tasks, want 4 (A's reservation)", got)
		}
	})

	t.Run("nothing is preempted for a task that would still not fit", func(t *testing.T) {
		// A needs 4 GPUs at once; B can give back only 2 without going
		// below its own reservation of 6.
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("four", 1, "p").Profile("one", 1, "p").
			Group("A", 4, 8).Group("B", 6, 8).Queue("A", "four").Queue("B", "one").
			Run("B/one", "p", 8, "1", enginetest.T0.Add(-time.Hour)).Wait("A/four", 1, "4").Build()
		d := engine.Pass(s)
		if len(d.Preemptions) != 0 || len(d.Placements) != 0 {
			t.Fatalf("preempted %v and placed %v; want nothing", enginetest.PreemptedIDs(d), d.Placements)
		}
		if bl := enginetest.BlockedOf(s, d, "A/four"); bl == nil || bl.Constraint != engine.HeldByPoolsFull {
			t.Fatalf("blocked %+v, want pools full", bl)
		}
	})

	t.Run("only pools the waiting task's profile can use are reclaimed", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("mine", 0).Pool("theirs", 8).Profile("a", 1, "mine").Profile("b", 1, "theirs").
			Group("A", 4, 8).Group("B", 0, 8).Queue("A", "a").Queue("B", "b").
			Run("B/b", "theirs", 8, "1", enginetest.T0.Add(-time.Hour)).Wait("A/a", 1, "1").Build()
		if d := engine.Pass(s); len(d.Preemptions) != 0 {
			t.Fatalf("preempted %v on a pool A's profile does not list", enginetest.PreemptedIDs(d))
		}
	})

	t.Run("groups above their reservation give back before a group at it", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").
			Group("A", 4, 8).Group("B", 2, 8).Group("C", 2, 8).Queue("A", "one").Queue("B", "one").Queue("C", "one").
			Run("B/one", "p", 2, "1", enginetest.T0.Add(-time.Hour)). // B at its reservation
			Run("C/one", "p", 6, "1", enginetest.T0.Add(-2*time.Hour)).Wait("A/one", 4, "1").Build()
		d := engine.Pass(s)
		for _, id := range enginetest.PreemptedIDs(d) {
			if !strings.HasPrefix(id, "C/") {
				t.Fatalf("preempted %s of a group at its reservation", id)
			}
		}
		if len(d.Preemptions) != 4 {
			t.Fatalf("preempted %d, want 4 of C's borrowed GPUs", len(d.Preemptions))
		}
	})
}

func TestLend(t *testing.T) {
	t.Run("idle capacity is lent up to the group's limit", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 16).Profile("one", 1, "p").Group("B", 0, 5).Queue("B", "one").Wait("B/one", 8, "1").Build()
		d := engine.Pass(s)
		if len(d.Placements) != 5 {
			t.Fatalf("lent %d GPUs, want the limit of 5", len(d.Placements))
		}
		bl := enginetest.BlockedOf(s, d, "B/one")
		if bl == nil || bl.Constraint != engine.HeldByLimit || !strings.Contains(bl.Reason, "group B is at its limit: it holds 5 of 5 GPUs") {
			t.Fatalf("blocked %+v, want the limit named", bl)
		}
	})

	t.Run("lending also goes first pool before second", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p1", 2).Pool("p2", 8).Profile("one", 1, "p1", "p2").Group("B", 0, 8).Queue("B", "one").Wait("B/one", 3, "1").Build()
		got := enginetest.PlacedOn(s, engine.Pass(s))
		if len(got["p1"]) != 2 || len(got["p2"]) != 1 {
			t.Fatalf("placed %v, want p1 filled before p2", got)
		}
	})

	t.Run("when every pool is full the reason lists them", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p1", 1).Pool("p2", 1).Profile("one", 1, "p1", "p2").Group("B", 0, 8).Queue("B", "one").Wait("B/one", 3, "1").Build()
		d := engine.Pass(s)
		bl := enginetest.BlockedOf(s, d, "B/one")
		if bl == nil || bl.Constraint != engine.HeldByPoolsFull || !strings.Contains(bl.Reason, "p1 1/1, p2 1/1") {
			t.Fatalf("blocked %+v", bl)
		}
	})

	t.Run("a profile without pools says so", func(t *testing.T) {
		s := enginetest.NewEstate(t).Profile("nowhere", 1).Group("B", 0, 8).Queue("B", "nowhere").Wait("B/nowhere", 1, "1").Build()
		if bl := enginetest.BlockedOf(s, engine.Pass(s), "B/nowhere"); bl == nil || bl.Constraint != engine.HeldByNoPool {
			t.Fatalf("blocked %+v", bl)
		}
	})
}

func TestTimeBudgets(t *testing.T) {
	t.Run("a used-up budget preempts running budgeted work newest first and holds the rest", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Profile("cpu", 0, "p").
			Group("V", 4, 8).Budget(100, 100, 15*time.Minute).Queue("V", "one").Queue("V", "cpu").
			Run("V/one", "p", 1, "1", enginetest.T0.Add(-3*time.Hour)).
			Run("V/one", "p", 1, "1", enginetest.T0.Add(-1*time.Hour)).
			Run("V/one", "p", 1, "1", enginetest.T0.Add(-2*time.Hour)).
			Run("V/cpu", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
			Wait("V/one", 2, "1").Wait("V/cpu", 1, "1").Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"V/one#2", "V/one#3", "V/one#1"}) {
			t.Fatalf("preempted %v, want the budgeted work newest first", got)
		}
		for _, p := range d.Preemptions {
			if p.Cause != engine.CauseBudgetUsed || !strings.Contains(p.Reason, "weekly time budget of 100 h; it resets Monday 2026-11-30 00:00 UTC") {
				t.Fatalf("preemption reason %q", p.Reason)
			}
		}
		// Weight 0 is exempt: the CPU task keeps running and the waiting
		// one starts.
		if got := enginetest.PlacedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"V/cpu#7"}) {
			t.Fatalf("placed %v, want only the exempt task", got)
		}
		bl := enginetest.BlockedOf(s, d, "V/one")
		if bl == nil || bl.Constraint != engine.HeldByBudgetUsed || !bl.Until.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("blocked %+v, want budget used up until Monday", bl)
		}
	})

	t.Run("the low watermark refuses a start that a small top-up would allow for minutes", func(t *testing.T) {
		// 0.2 budget hours left, one task running at weight 1: with a
		// second task the rate is 2 per hour, so the budget lasts 6 minutes,
		// under the 15-minute watermark.
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("V", 0, 8).Budget(10, 9.8, 15*time.Minute).
			Queue("V", "one").Run("V/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).Wait("V/one", 1, "1").Build()
		d := engine.Pass(s)
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v under the low watermark", d.Placements)
		}
		bl := enginetest.BlockedOf(s, d, "V/one")
		if bl == nil || bl.Constraint != engine.HeldByLowWatermark || !strings.Contains(bl.Reason, "0.2 h") {
			t.Fatalf("blocked %+v, want the low watermark", bl)
		}
	})

	t.Run("a start passes the watermark when the budget lasts long enough", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("V", 0, 8).Budget(10, 9, 15*time.Minute).
			Queue("V", "one").Run("V/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).Wait("V/one", 3, "1").Build()
		// 1 h left: with two tasks running it lasts 30 min, three 20 min,
		// four exactly 15 min, which is enough.
		if got := len(engine.Pass(s).Placements); got != 3 {
			t.Fatalf("placed %d, want all 3 (the fourth running task still lasts exactly the 15 minutes)", got)
		}
	})

	t.Run("with nothing running one task starts even below its need", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("V", 0, 8).Budget(10, 9.95, 15*time.Minute).
			Queue("V", "one").Wait("V/one", 2, "1").Build()
		if got := len(engine.Pass(s).Placements); got != 1 {
			t.Fatalf("placed %d, want exactly one", got)
		}
	})

	t.Run("time weight scales the burn rate", func(t *testing.T) {
		// 1 h left at weight 8 per task lasts 7.5 minutes: refused when
		// another budgeted task runs.
		s := enginetest.NewEstate(t).Pool("p", 16).Profile("eight", 8, "p").Group("V", 0, 16).Budget(100, 99, 15*time.Minute).
			Queue("V", "eight").Run("V/eight", "p", 1, "1", enginetest.T0.Add(-time.Hour)).Wait("V/eight", 1, "1").Build()
		if got := len(engine.Pass(s).Placements); got != 0 {
			t.Fatalf("placed %d, want 0", got)
		}
	})
}

func TestPassIsPureAndDeterministic(t *testing.T) {
	build := func() *engine.Snapshot {
		return enginetest.NewEstate(t).Pool("p1", 4).Pool("p2", 4).Profile("one", 1, "p1", "p2").Profile("half", 0.5, "p2").
			Group("A", 2, 6).Group("B", 2, 6).Budget(50, 10, 15*time.Minute).
			Queue("A", "one").Queue("B", "one").Queue("B", "half").
			Run("B/one", "p1", 4, "1", enginetest.T0.Add(-time.Hour)).
			Wait("A/one", 3, "1").Wait("B/one", 3, "1").Wait("B/half", 4, "0.5").Build()
	}
	s := build()
	first := engine.Pass(s)
	if !reflect.DeepEqual(s, build()) {
		t.Fatal("Pass changed its snapshot")
	}
	for i := 0; i < 20; i++ {
		if again := engine.Pass(s); !reflect.DeepEqual(first, again) {
			t.Fatalf("pass %d decided differently:\n%+v\n%+v", i, first, again)
		}
	}
}
