package engine_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
	"github.com/klique-ai/klique/internal/model"
)

func failedIDs(d *engine.Decisions) []string {
	var out []string
	for _, f := range d.Failures {
		out = append(out, f.TaskID)
	}
	return out
}

func TestUnplaceableWorkFails(t *testing.T) {
	t.Run("a task larger than every pool of its profile fails and the task behind it is placed", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("small", 4).Pool("p", 8).Profile("var", 1, "small", "p").Group("A", 0, 16).Queue("A", "var").
			Wait("A/var", 1, "2x8").Wait("A/var", 1, "16").Wait("A/var", 1, "1").Build()
		d := engine.Pass(s)
		if got := failedIDs(d); !reflect.DeepEqual(got, []string{"A/var#1", "A/var#2"}) {
			t.Fatalf("failed %v, want the two 16-GPU tasks", got)
		}
		want := "it can never be placed: it needs 16 GPUs, and no pool of profile var declares that many (the largest, p, declares 8); enqueue it again with at most 8 GPUs, or ask an admin for a larger pool on the profile"
		if d.Failures[0].Reason != want {
			t.Fatalf("reason %q, want %q", d.Failures[0].Reason, want)
		}
		if got := enginetest.PlacedOn(s, d); !reflect.DeepEqual(got, map[string][]string{"small": {"A/var#3"}}) {
			t.Fatalf("placed %v, want the 1-GPU task behind them", got)
		}
		if len(d.Blocked) != 0 {
			t.Fatalf("blocked %+v, want no queue held", d.Blocked)
		}
	})

	t.Run("a task above its group's limit fails, whatever the pools", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 16).Profile("var", 1, "p").Group("A", 0, 4).Queue("A", "var").
			Wait("A/var", 1, "8").Wait("A/var", 1, "1").Build()
		d := engine.Pass(s)
		if got := failedIDs(d); !reflect.DeepEqual(got, []string{"A/var#1"}) {
			t.Fatalf("failed %v, want the 8-GPU task", got)
		}
		if r := d.Failures[0].Reason; !strings.Contains(r, "more than group A's limit of 4 GPUs; enqueue it again with at most 4 GPUs") {
			t.Fatalf("reason %q does not name the limit", r)
		}
		if got := enginetest.PlacedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"A/var#2"}) {
			t.Fatalf("placed %v, want the task behind", got)
		}
	})

	t.Run("a profile whose pools all declare 0 GPUs, and a limit of 0, keep work waiting", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("closed", 0).Pool("p", 8).Profile("shut", 1, "closed").Profile("one", 1, "p").
			Group("A", 0, 8).Group("B", 0, 0).Queue("A", "shut").Queue("B", "one").
			Wait("A/shut", 1, "1").Wait("B/one", 1, "1").Build()
		d := engine.Pass(s)
		if len(d.Failures) != 0 || len(d.Placements) != 0 {
			t.Fatalf("failed %v, placed %v: want both to wait", d.Failures, d.Placements)
		}
		if bl := enginetest.BlockedOf(s, d, "A/shut"); bl == nil || bl.Constraint != engine.HeldByNoPool || !strings.Contains(bl.Reason, "every pool of profile shut declares 0 GPUs") {
			t.Fatalf("A/shut held by %+v, want its closed pools", bl)
		}
		if bl := enginetest.BlockedOf(s, d, "B/one"); bl == nil || bl.Constraint != engine.HeldByPaused {
			t.Fatalf("B/one held by %+v, want its pause", bl)
		}
	})

	t.Run("a queue that places or fails every task it read asks for another pass", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("var", 1, "p").Group("A", 0, 8).Queue("A", "var").
			Wait("A/var", 1, "16").Wait("A/var", 1, "1").Build()
		if d := engine.Pass(s); !engine.MorePending(s, d, 2) {
			t.Fatalf("one failed and one placed of the 2 read: want another pass")
		}
	})
}

func TestLoweredCapacity(t *testing.T) {
	t.Run("borrowed work is preempted first, newest first, only as much as the pool is over", func(t *testing.T) {
		// The pool went from 8 to 6 GPUs. A holds its reservation with the
		// newest work; B borrows with older work: B gives back, as a
		// reclaim by A would otherwise make it do at the next pass.
		s := enginetest.NewEstate(t).Pool("p", 6).Profile("one", 1, "p").
			Group("A", 4, 8).Group("B", 0, 8).Queue("A", "one").Queue("B", "one").
			Run("B/one", "p", 4, "1", enginetest.T0.Add(-3*time.Hour)).
			Run("A/one", "p", 4, "1", enginetest.T0.Add(-time.Hour)).Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"B/one#4", "B/one#3"}) {
			t.Fatalf("preempted %v, want B's two newest", got)
		}
		for _, p := range d.Preemptions {
			if p.Cause != engine.CauseCapacity || p.Reason != "pool p's capacity was lowered to 6 GPUs, below the 8 GPUs placed on it" {
				t.Fatalf("preemption %+v, want the capacity change named", p)
			}
		}
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v on a pool that is full", d.Placements)
		}
		if bl := enginetest.BlockedOf(s, d, "B/one"); bl == nil || bl.TaskID != "B/one#3" {
			t.Fatalf("B/one held by %+v, want its preempted task at the front", bl)
		}
	})

	t.Run("the fewest tasks go: a gang alone rather than the smaller work placed after it", func(t *testing.T) {
		// 4 GPUs too many: newest first takes the two 1-GPU tasks and then
		// the gang, which alone is enough; the two are given back.
		s := enginetest.NewEstate(t).Pool("p", 4).Profile("var", 1, "p").Group("B", 0, 16).Queue("B", "var").
			Run("B/var", "p", 1, "2x2", enginetest.T0.Add(-2*time.Hour)).
			Run("B/var", "p", 2, "1", enginetest.T0.Add(-time.Hour)).
			Run("B/var", "p", 2, "1", enginetest.T0.Add(-3*time.Hour)).Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"B/var#1"}) {
			t.Fatalf("preempted %v, want only the gang", got)
		}
	})

	t.Run("when borrowed work is not enough, reserved work goes too, newest first", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 1).Profile("one", 1, "p").Group("A", 4, 4).Queue("A", "one").
			Run("A/one", "p", 1, "1", enginetest.T0.Add(-3*time.Hour)).
			Run("A/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
			Run("A/one", "p", 1, "1", enginetest.T0.Add(-2*time.Hour)).Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"A/one#2", "A/one#3"}) {
			t.Fatalf("preempted %v, want the two newest", got)
		}
	})

	t.Run("a pool at or under its capacity loses nothing", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 2).Profile("one", 1, "p").Group("A", 0, 4).Queue("A", "one").
			Run("A/one", "p", 2, "1", enginetest.T0.Add(-time.Hour)).Build()
		if d := engine.Pass(s); len(d.Preemptions) != 0 {
			t.Fatalf("preempted %v", enginetest.PreemptedIDs(d))
		}
	})
}

func TestLoweredLimit(t *testing.T) {
	t.Run("a group above its lowered limit gives back its newest work, only as much as it is over", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Pool("q", 8).Profile("one", 1, "p", "q").Group("A", 1, 2).Queue("A", "one").
			Run("A/one", "p", 2, "1", enginetest.T0.Add(-3*time.Hour)).
			Run("A/one", "q", 1, "1", enginetest.T0.Add(-time.Hour)).
			Run("A/one", "p", 1, "1", enginetest.T0.Add(-2*time.Hour)).
			Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"A/one#3", "A/one#4"}) {
			t.Fatalf("preempted %v, want the two newest, on both pools", got)
		}
		for _, p := range d.Preemptions {
			if p.Cause != engine.CauseLimit || p.Reason != "group A's limit was lowered to 2 GPUs, below the 4 GPUs it held" {
				t.Fatalf("preemption %+v, want the limit change named", p)
			}
		}
		if len(d.Placements) != 0 {
			t.Fatalf("placed %v for a group at its limit", d.Placements)
		}
	})

	t.Run("a group at its limit keeps its work", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("A", 0, 2).Queue("A", "one").
			Run("A/one", "p", 2, "1", enginetest.T0.Add(-time.Hour)).Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		if len(d.Preemptions) != 0 {
			t.Fatalf("preempted %v", enginetest.PreemptedIDs(d))
		}
		if bl := enginetest.BlockedOf(s, d, "A/one"); bl == nil || bl.Constraint != engine.HeldByLimit {
			t.Fatalf("held by %+v, want the limit", bl)
		}
	})
}

func TestBudgetFiguresReadAsSet(t *testing.T) {
	for _, tc := range []struct {
		micro int64
		want  string
	}{
		{2000_000_000, "2000"}, {15_000, "0.015"}, {1_000, "0.001"}, {1, "0.000001"}, {1_500_000, "1.5"}, {0, "0"}, {123_456_789, "123.456789"},
	} {
		if got := engine.FormatMicroHours(tc.micro); got != tc.want {
			t.Errorf("FormatMicroHours(%d) = %q, want %q", tc.micro, got, tc.want)
		}
	}
	t.Run("a budget used up names its budget unrounded", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("A", 0, 8).Budget(0.015, 0.015, 15*time.Minute).Queue("A", "one").
			Run("A/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		if len(d.Preemptions) != 1 || !strings.Contains(d.Preemptions[0].Reason, "weekly time budget of 0.015 h;") {
			t.Fatalf("preemptions %+v, want the budget of 0.015 h named", d.Preemptions)
		}
		if bl := enginetest.BlockedOf(s, d, "A/one"); bl == nil || !strings.Contains(bl.Reason, "weekly time budget of 0.015 h;") {
			t.Fatalf("held by %+v, want the budget of 0.015 h named", bl)
		}
	})
	t.Run("a remaining budget below a hundredth of an hour is not 0", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("A", 0, 8).Budget(1, 0.999, 15*time.Minute).Queue("A", "one").
			Run("A/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		if bl := enginetest.BlockedOf(s, d, "A/one"); bl == nil || !strings.Contains(bl.Reason, "remaining time budget (0.001 h)") {
			t.Fatalf("held by %+v, want 0.001 h left", bl)
		}
	})
}

func TestLowWatermarkSaysBothWaysOut(t *testing.T) {
	// 0.1 h left; with the running task and this one the group burns 2 h
	// per hour: 3 minutes, under the 15-minute watermark. Once the running
	// task ends the task may start (none of the group's budgeted work
	// would be running), well before the reset.
	s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("A", 0, 8).Budget(1, 0.9, 15*time.Minute).Queue("A", "one").
		Run("A/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).Wait("A/one", 1, "1").Build()
	d := engine.Pass(s)
	bl := enginetest.BlockedOf(s, d, "A/one")
	if bl == nil || bl.Constraint != engine.HeldByLowWatermark {
		t.Fatalf("held by %+v, want the low watermark", bl)
	}
	want := "group A's remaining time budget (0.1 h) would last less than the low watermark of 15m0s at its rate with this task; " +
		"it can start once the group's running budgeted work ends (or sooner, once enough of it has), or when the budget resets Monday 2026-11-30 00:00 UTC"
	if bl.Reason != want {
		t.Fatalf("reason\n%q, want\n%q", bl.Reason, want)
	}
	if !bl.Until.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("until %s, want the reset as the latest it lifts", bl.Until)
	}
	// And it does start once the running work has ended.
	s2 := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Group("A", 0, 8).Budget(1, 0.9, 15*time.Minute).Queue("A", "one").
		Wait("A/one", 1, "1").Build()
	if d := engine.Pass(s2); len(d.Placements) != 1 {
		t.Fatalf("placed %v once nothing runs, want the task", d.Placements)
	}
}

// TestPausedGroup: a limit of 0 pauses a group (docs/engine.md): its
// running work is not preempted but runs to its end, nothing of it is
// placed (not even within the reservation it keeps), none of its waiting
// work fails for its size, and its head says the group is paused.
func TestPausedGroup(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Profile("var", 1, "p").
		Group("A", 4, 0).Group("B", 0, 8).Queue("A", "one").Queue("A", "var").Queue("B", "one").
		Run("A/one", "p", 2, "1", enginetest.T0.Add(-time.Hour)).
		Wait("A/one", 1, "1").Wait("A/var", 1, "4").Wait("B/one", 1, "1").Build()
	d := engine.Pass(s)
	if len(d.Preemptions) != 0 || len(d.Failures) != 0 {
		t.Fatalf("preempted %v, failed %v: a paused group's running work runs on and its waiting work waits", enginetest.PreemptedIDs(d), d.Failures)
	}
	if got := enginetest.PlacedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"B/one#5"}) {
		t.Fatalf("placed %v, want only B's task", got)
	}
	for _, q := range []string{"A/one", "A/var"} {
		bl := enginetest.BlockedOf(s, d, q)
		if bl == nil || bl.Constraint != engine.HeldByPaused || bl.Reason != "group A is paused: an admin set its limit to 0 GPUs, so its work waits (and its running work runs to its end) until the limit is raised" {
			t.Fatalf("%s held by %+v, want the pause", q, bl)
		}
	}
}

// TestPoolKinds: the pass holds a task's size to the pool-kind rule
// (model.PoolKind.CanRun) whatever its profile says, so a multi-node size
// read from a task never lands on a pool that cannot run a gang.
func TestPoolKinds(t *testing.T) {
	t.Run("a multi-node task skips a bare-metal pool for the next pool of its profile's order", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("metal", 16).PoolKind("metal", model.PoolBareMetal).Pool("hpc", 16).PoolKind("hpc", model.PoolSlurm).
			Profile("var", 1, "metal", "hpc").Group("A", 0, 16).Queue("A", "var").Wait("A/var", 1, "2x4").Build()
		d := engine.Pass(s)
		if on := enginetest.PlacedOn(s, d); len(on["metal"]) != 0 || !reflect.DeepEqual(on["hpc"], []string{"A/var#1"}) {
			t.Fatalf("placed %v, want the gang on hpc (slurm), not on metal (bare metal)", on)
		}
	})

	t.Run("one node still goes to the first pool", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("metal", 16).PoolKind("metal", model.PoolBareMetal).Pool("hpc", 16).PoolKind("hpc", model.PoolSlurm).
			Profile("var", 1, "metal", "hpc").Group("A", 0, 16).Queue("A", "var").Wait("A/var", 1, "8").Build()
		if on := enginetest.PlacedOn(s, engine.Pass(s)); !reflect.DeepEqual(on["metal"], []string{"A/var#1"}) {
			t.Fatalf("placed %v, want the 8-GPU task on metal", on)
		}
	})

	t.Run("a multi-node task no pool of its profile can run fails with the reason, and the task behind runs", func(t *testing.T) {
		s := enginetest.NewEstate(t).Pool("metal", 16).PoolKind("metal", model.PoolBareMetal).Pool("burst", 16).PoolKind("burst", model.PoolCloud).
			Profile("var", 1, "metal", "burst").Group("A", 0, 16).Queue("A", "var").Wait("A/var", 1, "2x4").Wait("A/var", 1, "1").Build()
		d := engine.Pass(s)
		want := "it can never be placed: no pool of profile var can run multi-node work (2x4): metal is bare_metal, burst is cloud, and multi-node work needs a kubernetes, neocloud, slurm, pbs or lsf pool; enqueue it again on one node, or ask an admin to add such a pool to the profile"
		if len(d.Failures) != 1 || d.Failures[0].TaskID != "A/var#1" || d.Failures[0].Reason != want {
			t.Fatalf("failures %+v, want A/var#1 failed with %q", d.Failures, want)
		}
		if on := enginetest.PlacedOn(s, d); !reflect.DeepEqual(on["metal"], []string{"A/var#2"}) {
			t.Fatalf("placed %v, want the task behind on metal", on)
		}
	})

	t.Run("a gang sent back from a pool that cannot run it says why it waits", func(t *testing.T) {
		// Placed before the rule held at enqueue; a reclaim sends it back.
		s := enginetest.NewEstate(t).Pool("metal", 8).PoolKind("metal", model.PoolBareMetal).Profile("var", 1, "metal").Profile("one", 1, "metal").
			Group("A", 8, 8).Group("B", 0, 8).Queue("A", "one").Queue("B", "var").
			Run("B/var", "metal", 1, "2x4", enginetest.T0.Add(-time.Hour)).Wait("A/one", 1, "1").Build()
		d := engine.Pass(s)
		bl := enginetest.BlockedOf(s, d, "B/var")
		if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"B/var#1"}) || bl == nil || bl.Constraint != engine.HeldByPoolKind ||
			!strings.Contains(bl.Reason, "no pool of profile var can run multi-node work (2x4): metal is bare_metal") {
			t.Fatalf("preempted %v, B/var held by %+v: want the gang reclaimed and held by the pool kind", got, bl)
		}
	})
}
