package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFillReservations(t *testing.T) {
	t.Run("a group below its reservation is placed up to it, within the reservation phase", func(t *testing.T) {
		b := newEstate(t).pool("p", 8).profile("one", 1, "p").group("A", 3, 8).queue("A", "one").wait("A/one", 5, "1")
		s := b.build()
		d := Pass(s)
		if got := len(d.Placements); got != 5 {
			t.Fatalf("placed %d tasks, want 5 (3 reserved, then 2 lent)", got)
		}
		for i, p := range d.Placements {
			wantPhase, wantBorrowed := PhaseReservation, false
			if i >= 3 {
				wantPhase, wantBorrowed = PhaseLend, true
			}
			if p.Phase != wantPhase || p.Borrowed != wantBorrowed {
				t.Errorf("placement %d: phase %s borrowed %v, want %s %v", i, p.Phase, p.Borrowed, wantPhase, wantBorrowed)
			}
		}
	})

	t.Run("every profile's first pool is tried for all reserved work before any second pool", func(t *testing.T) {
		// X prefers p1, Y prefers p2. Served profile by profile, A would
		// spill onto p2 before B got its first pool.
		b := newEstate(t).pool("p1", 2).pool("p2", 2).
			profile("X", 1, "p1", "p2").profile("Y", 1, "p2", "p1").
			group("A", 4, 4).group("B", 4, 4).queue("A", "X").queue("B", "Y").
			wait("A/X", 3, "1").wait("B/Y", 3, "1")
		s := b.build()
		got := placedOn(s, Pass(s))
		want := map[string][]string{"p1": {"A/X#1", "A/X#2"}, "p2": {"B/Y#4", "B/Y#5"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("placed %v, want %v", got, want)
		}
	})

	t.Run("within a pool, profiles are served in execution priority", func(t *testing.T) {
		b := newEstate(t).pool("p", 1).profile("small", 1, "p").profile("large", 1, "p").
			executionPriority("p", "large", "small").
			group("A", 1, 1).group("B", 1, 1).queue("A", "small").queue("B", "large").
			wait("A/small", 1, "1").wait("B/large", 1, "1")
		s := b.build()
		if got := placedOn(s, Pass(s))["p"]; !reflect.DeepEqual(got, []string{"B/large#2"}) {
			t.Fatalf("placed %v, want the large profile's task first", got)
		}
	})

	t.Run("within a profile, groups are served in queuing priority", func(t *testing.T) {
		b := newEstate(t).pool("p", 1).profile("one", 1, "p").
			group("second", 1, 1).group("first", 1, 1).queue("first", "one").queue("second", "one").
			wait("second/one", 1, "1").wait("first/one", 1, "1")
		s := b.build()
		if got := placedOn(s, Pass(s))["p"]; !reflect.DeepEqual(got, []string{"first/one#2"}) {
			t.Fatalf("placed %v, want the queue first in queuing priority", got)
		}
	})

	t.Run("within a compute resource, tasks go in queue order and the head blocks the rest", func(t *testing.T) {
		b := newEstate(t).pool("p", 3).profile("var", 1, "p").group("A", 3, 8).queue("A", "var").
			run("A/var", "p", 1, "1", t0.Add(-time.Hour)).
			wait("A/var", 1, "4").wait("A/var", 1, "1")
		s := b.build()
		d := Pass(s)
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v behind a head that does not fit", d.Placements)
		}
		if bl := blockedOf(s, d, "A/var"); bl == nil || bl.TaskID != "A/var#2" || bl.Constraint != HeldByTooLarge {
			t.Fatalf("blocked = %+v, want the head held as too large", bl)
		}
	})

	t.Run("a task that would take its group above its reservation waits for lending", func(t *testing.T) {
		b := newEstate(t).pool("p", 8).profile("two", 1, "p").group("A", 3, 8).queue("A", "two").wait("A/two", 2, "2")
		s := b.build()
		d := Pass(s)
		if len(d.Placements) != 2 || d.Placements[0].Phase != PhaseReservation || d.Placements[1].Phase != PhaseLend || !d.Placements[1].Borrowed {
			t.Fatalf("placements %+v: want one within the reservation, then one borrowed", d.Placements)
		}
	})

	t.Run("fractions count as their share of a GPU", func(t *testing.T) {
		b := newEstate(t).pool("p", 1).profile("eighth", 0.125, "p").group("A", 1, 1).queue("A", "eighth").wait("A/eighth", 9, "0.125")
		s := b.build()
		d := Pass(s)
		if len(d.Placements) != 8 {
			t.Fatalf("placed %d eighths on one GPU, want 8", len(d.Placements))
		}
		if bl := blockedOf(s, d, "A/eighth"); bl == nil || bl.Constraint != HeldByLimit {
			t.Fatalf("the ninth eighth is held by %+v, want the group's limit", bl)
		}
	})

	t.Run("multi-node work is placed whole or not at all", func(t *testing.T) {
		b := newEstate(t).pool("p", 8).profile("2x4", 8, "p").profile("one", 1, "p").
			group("A", 8, 16).group("B", 0, 8).queue("A", "2x4").queue("B", "one").
			run("B/one", "p", 1, "1", t0.Add(-time.Hour)).wait("A/2x4", 1, "2x4")
		s := b.build()
		d := Pass(s)
		// A is below its reservation: one GPU of borrowed work is reclaimed
		// so the gang fits whole.
		if got := preemptedIDs(d); !reflect.DeepEqual(got, []string{"B/one#1"}) {
			t.Fatalf("preempted %v, want B's borrowed GPU", got)
		}
		if got := placedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"A/2x4#2"}) {
			t.Fatalf("placed %v, want the 2x4 gang", got)
		}
	})
}

func TestReclaim(t *testing.T) {
	// The seeds' worked example: group A is quiet and B borrows A's idle
	// reservation; A queues work; B's borrowed work is preempted and A's
	// work takes its reserved GPUs.
	seed := func(t *testing.T) *estateBuilder {
		return newEstate(t).pool("p", 8).profile("one", 1, "p").
			group("A", 4, 8).group("B", 4, 8).queue("A", "one").queue("B", "one").
			run("B/one", "p", 4, "1", t0.Add(-3*time.Hour)). // B's reservation
			run("B/one", "p", 2, "1", t0.Add(-2*time.Hour)). // borrowed
			run("B/one", "p", 2, "1", t0.Add(-1*time.Hour))  // borrowed, newest
	}

	t.Run("borrowed work is preempted, newest first, and the owner takes its reserved GPUs", func(t *testing.T) {
		s := seed(t).wait("A/one", 2, "1").build()
		d := Pass(s)
		if got := preemptedIDs(d); !reflect.DeepEqual(got, []string{"B/one#8", "B/one#7"}) {
			t.Fatalf("preempted %v, want B's two newest", got)
		}
		for _, p := range d.Preemptions {
			if p.Cause != CauseReclaim || !strings.Contains(p.Reason, "reclaimed by group A") {
				t.Fatalf("preemption %+v lacks the reclaim reason", p)
			}
		}
		if got := placedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"A/one#9", "A/one#10"}) {
			t.Fatalf("placed %v, want A's two tasks", got)
		}
		for _, p := range d.Placements {
			if p.Phase != PhaseReclaim || p.Borrowed {
				t.Fatalf("placement %+v: want a reclaim within the reservation", p)
			}
		}
	})

	t.Run("only as much as the waiting work needs is preempted", func(t *testing.T) {
		s := seed(t).wait("A/one", 1, "1").build()
		if got := preemptedIDs(Pass(s)); !reflect.DeepEqual(got, []string{"B/one#8"}) {
			t.Fatalf("preempted %v, want one task", got)
		}
	})

	t.Run("a group is never taken below its own reservation", func(t *testing.T) {
		s := seed(t).wait("A/one", 6, "1").build()
		d := Pass(s)
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
		s := newEstate(t).pool("p", 8).profile("four", 1, "p").profile("one", 1, "p").
			group("A", 4, 8).group("B", 6, 8).queue("A", "four").queue("B", "one").
			run("B/one", "p", 8, "1", t0.Add(-time.Hour)).wait("A/four", 1, "4").build()
		d := Pass(s)
		if len(d.Preemptions) != 0 || len(d.Placements) != 0 {
			t.Fatalf("preempted %v and placed %v; want nothing", preemptedIDs(d), d.Placements)
		}
		if bl := blockedOf(s, d, "A/four"); bl == nil || bl.Constraint != HeldByPoolsFull {
			t.Fatalf("blocked %+v, want pools full", bl)
		}
	})

	t.Run("only pools the waiting task's profile can use are reclaimed", func(t *testing.T) {
		s := newEstate(t).pool("mine", 0).pool("theirs", 8).profile("a", 1, "mine").profile("b", 1, "theirs").
			group("A", 4, 8).group("B", 0, 8).queue("A", "a").queue("B", "b").
			run("B/b", "theirs", 8, "1", t0.Add(-time.Hour)).wait("A/a", 1, "1").build()
		if d := Pass(s); len(d.Preemptions) != 0 {
			t.Fatalf("preempted %v on a pool A's profile does not list", preemptedIDs(d))
		}
	})

	t.Run("groups above their reservation give back before a group at it", func(t *testing.T) {
		s := newEstate(t).pool("p", 8).profile("one", 1, "p").
			group("A", 4, 8).group("B", 2, 8).group("C", 2, 8).queue("A", "one").queue("B", "one").queue("C", "one").
			run("B/one", "p", 2, "1", t0.Add(-time.Hour)). // B at its reservation
			run("C/one", "p", 6, "1", t0.Add(-2*time.Hour)).wait("A/one", 4, "1").build()
		d := Pass(s)
		for _, id := range preemptedIDs(d) {
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
		s := newEstate(t).pool("p", 16).profile("one", 1, "p").group("B", 0, 5).queue("B", "one").wait("B/one", 8, "1").build()
		d := Pass(s)
		if len(d.Placements) != 5 {
			t.Fatalf("lent %d GPUs, want the limit of 5", len(d.Placements))
		}
		bl := blockedOf(s, d, "B/one")
		if bl == nil || bl.Constraint != HeldByLimit || !strings.Contains(bl.Reason, "group B is at its limit: it holds 5 of 5 GPUs") {
			t.Fatalf("blocked %+v, want the limit named", bl)
		}
	})

	t.Run("lending also goes first pool before second", func(t *testing.T) {
		s := newEstate(t).pool("p1", 2).pool("p2", 8).profile("one", 1, "p1", "p2").group("B", 0, 8).queue("B", "one").wait("B/one", 3, "1").build()
		got := placedOn(s, Pass(s))
		if len(got["p1"]) != 2 || len(got["p2"]) != 1 {
			t.Fatalf("placed %v, want p1 filled before p2", got)
		}
	})

	t.Run("when every pool is full the reason lists them", func(t *testing.T) {
		s := newEstate(t).pool("p1", 1).pool("p2", 1).profile("one", 1, "p1", "p2").group("B", 0, 8).queue("B", "one").wait("B/one", 3, "1").build()
		d := Pass(s)
		bl := blockedOf(s, d, "B/one")
		if bl == nil || bl.Constraint != HeldByPoolsFull || !strings.Contains(bl.Reason, "p1 1/1, p2 1/1") {
			t.Fatalf("blocked %+v", bl)
		}
	})

	t.Run("a profile without pools says so", func(t *testing.T) {
		s := newEstate(t).profile("nowhere", 1).group("B", 0, 8).queue("B", "nowhere").wait("B/nowhere", 1, "1").build()
		if bl := blockedOf(s, Pass(s), "B/nowhere"); bl == nil || bl.Constraint != HeldByNoPool {
			t.Fatalf("blocked %+v", bl)
		}
	})
}

func TestTimeBudgets(t *testing.T) {
	t.Run("a used-up budget preempts running budgeted work newest first and holds the rest", func(t *testing.T) {
		s := newEstate(t).pool("p", 8).profile("one", 1, "p").profile("cpu", 0, "p").
			group("V", 4, 8).budget(100, 100, 15*time.Minute).queue("V", "one").queue("V", "cpu").
			run("V/one", "p", 1, "1", t0.Add(-3*time.Hour)).
			run("V/one", "p", 1, "1", t0.Add(-1*time.Hour)).
			run("V/one", "p", 1, "1", t0.Add(-2*time.Hour)).
			run("V/cpu", "p", 1, "1", t0.Add(-time.Hour)).
			wait("V/one", 2, "1").wait("V/cpu", 1, "1").build()
		d := Pass(s)
		if got := preemptedIDs(d); !reflect.DeepEqual(got, []string{"V/one#2", "V/one#3", "V/one#1"}) {
			t.Fatalf("preempted %v, want the budgeted work newest first", got)
		}
		for _, p := range d.Preemptions {
			if p.Cause != CauseBudgetUsed || !strings.Contains(p.Reason, "weekly time budget of 100 h; it resets Monday 2026-11-30 00:00 UTC") {
				t.Fatalf("preemption reason %q", p.Reason)
			}
		}
		// Weight 0 is exempt: the CPU task keeps running and the waiting
		// one starts.
		if got := placedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"V/cpu#7"}) {
			t.Fatalf("placed %v, want only the exempt task", got)
		}
		bl := blockedOf(s, d, "V/one")
		if bl == nil || bl.Constraint != HeldByBudgetUsed || !bl.Until.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("blocked %+v, want budget used up until Monday", bl)
		}
	})

	t.Run("the low watermark refuses a start that a small top-up would allow for minutes", func(t *testing.T) {
		// 0.2 budget hours left, one task running at weight 1: with a
		// second task the rate is 2 per hour, so the budget lasts 6 minutes,
		// under the 15-minute watermark.
		s := newEstate(t).pool("p", 8).profile("one", 1, "p").group("V", 0, 8).budget(10, 9.8, 15*time.Minute).
			queue("V", "one").run("V/one", "p", 1, "1", t0.Add(-time.Hour)).wait("V/one", 1, "1").build()
		d := Pass(s)
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v under the low watermark", d.Placements)
		}
		bl := blockedOf(s, d, "V/one")
		if bl == nil || bl.Constraint != HeldByLowWatermark || !strings.Contains(bl.Reason, "0.2 h") {
			t.Fatalf("blocked %+v, want the low watermark", bl)
		}
	})

	t.Run("a start passes the watermark when the budget lasts long enough", func(t *testing.T) {
		s := newEstate(t).pool("p", 8).profile("one", 1, "p").group("V", 0, 8).budget(10, 9, 15*time.Minute).
			queue("V", "one").run("V/one", "p", 1, "1", t0.Add(-time.Hour)).wait("V/one", 3, "1").build()
		// 1 h left: with two tasks running it lasts 30 min, three 20 min,
		// four exactly 15 min, which is enough.
		if got := len(Pass(s).Placements); got != 3 {
			t.Fatalf("placed %d, want all 3 (the fourth running task still lasts exactly the 15 minutes)", got)
		}
	})

	t.Run("with nothing running one task starts even below its need", func(t *testing.T) {
		s := newEstate(t).pool("p", 8).profile("one", 1, "p").group("V", 0, 8).budget(10, 9.95, 15*time.Minute).
			queue("V", "one").wait("V/one", 2, "1").build()
		if got := len(Pass(s).Placements); got != 1 {
			t.Fatalf("placed %d, want exactly one", got)
		}
	})

	t.Run("time weight scales the burn rate", func(t *testing.T) {
		// 1 h left at weight 8 per task lasts 7.5 minutes: refused when
		// another budgeted task runs.
		s := newEstate(t).pool("p", 16).profile("eight", 8, "p").group("V", 0, 16).budget(100, 99, 15*time.Minute).
			queue("V", "eight").run("V/eight", "p", 1, "1", t0.Add(-time.Hour)).wait("V/eight", 1, "1").build()
		if got := len(Pass(s).Placements); got != 0 {
			t.Fatalf("placed %d, want 0", got)
		}
	})
}

func TestPassIsPureAndDeterministic(t *testing.T) {
	build := func() *Snapshot {
		return newEstate(t).pool("p1", 4).pool("p2", 4).profile("one", 1, "p1", "p2").profile("half", 0.5, "p2").
			group("A", 2, 6).group("B", 2, 6).budget(50, 10, 15*time.Minute).
			queue("A", "one").queue("B", "one").queue("B", "half").
			run("B/one", "p1", 4, "1", t0.Add(-time.Hour)).
			wait("A/one", 3, "1").wait("B/one", 3, "1").wait("B/half", 4, "0.5").build()
	}
	s := build()
	first := Pass(s)
	if !reflect.DeepEqual(s, build()) {
		t.Fatal("Pass changed its snapshot")
	}
	for i := 0; i < 20; i++ {
		if again := Pass(s); !reflect.DeepEqual(first, again) {
			t.Fatalf("pass %d decided differently:\n%+v\n%+v", i, first, again)
		}
	}
}
