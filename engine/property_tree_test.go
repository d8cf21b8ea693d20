package engine_test

import (
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
)

// The organisation tree's properties (issue 32), each over 1,000 random
// trees and workloads: up to 4 levels of departments above teams, valid
// reservations (a child's fit within its parent's, siblings' together
// too), random limits (a department's may be below its teams'), weights
// and time budgets at any level, and the property tests' events between
// passes. Run longer by hand with -rapid.checks=20000.

const treeChecks = 1000

// TestTreeNoNodeAboveItsLimit: after every pass, no node of the tree holds
// more than its limit, at any level, unless a level at or above it is
// paused (a pause keeps running work). The pools hold no more than their
// capacity, and the pass's general invariants hold.
func TestTreeNoNodeAboveItsLimit(t *testing.T) {
	runTree(t, func(rt *rapid.T, w *world, pre *engine.Snapshot, d *engine.Decisions) {
		checkOnePlacePerTask(rt, d, &w.s)
		checkPoolKinds(rt, pre, d)
		checkQueueOrder(rt, pre, d, &w.s, w.variable)
		checkBlocked(rt, pre, d, &w.s)
		checkTreeLimits(rt, pre, &w.s)
	})
}

// TestTreeReservationsMetBottomUp: a team whose head is guaranteed (by its
// own reservation or by a department's, bottom up) and allowed by every
// limit and budget on its path never waits while a pool of its profile has
// room for it, or while one running task it may reclaim would make room.
func TestTreeReservationsMetBottomUp(t *testing.T) {
	runTree(t, func(rt *rapid.T, w *world, pre *engine.Snapshot, d *engine.Decisions) {
		checkTreeReservations(rt, pre, d, &w.s)
	})
}

// TestTreeNoChurn: with demand unchanged (no arrival, no time, no admin),
// passes settle, and what a settled pass lent the next does not take back.
//
//   - A pass that preempts nothing is followed by one that preempts
//     nothing it placed. (It may preempt other work: reservations are
//     tenant-wide, not per pool, so work lent on one pool takes its group
//     above its reservation, and a claimant that can use only another
//     pool then reclaims the group's work there, as in a flat estate.)
//     After a pass that preempts, the queues it preempted from place
//     nothing more in it, so what lending gave in their place may go back
//     to them at the next pass: that is the pass settling, not churn.
//   - Within six passes with unchanged demand, one preempts nothing.
func TestTreeNoChurn(t *testing.T) {
	runTree(t, func(rt *rapid.T, w *world, pre *engine.Snapshot, d *engine.Decisions) {
		last := d
		for n := 2; n <= 6; n++ {
			again := engine.Pass(&w.s)
			for _, p := range again.Preemptions {
				if len(last.Preemptions) > 0 {
					break
				}
				for _, placed := range last.Placements {
					if p.TaskID == placed.TaskID {
						rt.Fatalf("pass %d placed %s (%s), and the next, with unchanged demand, preempted it: %s", n-1, placed.TaskID, placed.Phase, p.Reason)
					}
				}
			}
			w.apply(rt, again)
			if len(again.Preemptions) == 0 {
				return
			}
			last = again
		}
		rt.Fatalf("six passes with unchanged demand never settled: the last preempted %+v", last.Preemptions)
	})
}

// runTree draws a tree world and runs up to 30 events and passes, calling
// check after each pass with the snapshot before it and its decisions (the
// world then holds the state after them).
func runTree(t *testing.T, check func(*rapid.T, *world, *engine.Snapshot, *engine.Decisions)) {
	atLeastChecks(t, treeChecks)
	rapid.Check(t, func(rt *rapid.T) {
		w := genTreeWorld(rt)
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			w.event(rt)
			pre := cloneSnapshot(&w.s)
			d := engine.Pass(&w.s)
			if again := engine.Pass(pre); !reflect.DeepEqual(d, again) {
				rt.Fatalf("pass %d is not deterministic", i)
			}
			kept, reasons := engine.PassReusing(pre, w.reasons)
			if !reflect.DeepEqual(d, kept) {
				rt.Fatalf("pass %d with the last pass's reasons decided otherwise:\n%+v\n%+v", i, kept, d)
			}
			w.reasons = reasons
			w.apply(rt, d)
			check(rt, w, pre, d)
		}
	})
}

// genTreeWorld draws a world whose groups form a tree: departments first
// (each under the tenant or an earlier department, at most 4 deep), then
// teams under the tenant or a department. Reservations are drawn top
// down, each within what its parent has not yet split; the tenant's is at
// most the estate's capacity.
func genTreeWorld(t *rapid.T) *world {
	w := genWorld(t, rapid.Bool().Draw(t, "tight"))
	w.tree = true
	var total int
	for _, p := range w.s.Pools {
		total += int(p.Capacity / 1000)
	}
	teams := len(w.s.Groups)
	depts := rapid.IntRange(1, 5).Draw(t, "departments")
	var groups []engine.Group
	depth := []int{}
	left := []int{} // reservation not yet split, per node
	tenantLeft := rapid.IntRange(0, total).Draw(t, "tenantReservation")
	node := func(name string, department bool, parent int) {
		avail := tenantLeft
		if parent >= 0 {
			avail = left[parent]
		}
		res := rapid.IntRange(0, avail).Draw(t, "reservation")
		if parent >= 0 {
			left[parent] -= res
		} else {
			tenantLeft -= res
		}
		limit := res + smallOrLarge(8, 32).Draw(t, "limitAbove")
		if rapid.IntRange(0, 9).Draw(t, "paused") == 0 {
			limit = 0
		}
		g := engine.Group{ID: name, Name: name, Department: department, Parent: parent + 1,
			Reservation: model.GPUs(res), Limit: model.GPUs(limit), Weight: int64(rapid.IntRange(0, 3).Draw(t, "weight"))}
		if rapid.IntRange(0, 3).Draw(t, "budgeted") == 0 {
			total := int64(rapid.IntRange(0, 40).Draw(t, "budgetHours")) * 1_000_000
			g.Budget = &engine.Budget{Total: total, Used: rapid.Int64Range(0, total).Draw(t, "budgetUsed"),
				LowWatermark: time.Duration(rapid.IntRange(0, 30).Draw(t, "watermarkMinutes")) * time.Minute,
				Period:       model.PeriodWeek, ResetAt: engine.PeriodEnd(model.PeriodWeek, worldStart)}
		}
		groups = append(groups, g)
		d := 1
		if parent >= 0 {
			d = depth[parent] + 1
		}
		depth = append(depth, d)
		left = append(left, res)
	}
	for i := 0; i < depts; i++ {
		var parents []int
		for p := range groups {
			if depth[p] < 4 {
				parents = append(parents, p)
			}
		}
		parent := -1
		if len(parents) > 0 && rapid.Bool().Draw(t, "nested") {
			parent = rapid.SampledFrom(parents).Draw(t, "parent")
		}
		node(fmt.Sprintf("d%d", i), true, parent)
	}
	for i := 0; i < teams; i++ {
		parent := rapid.IntRange(-1, depts-1).Draw(t, "team's department")
		node(fmt.Sprintf("g%d", i), false, parent)
	}
	// The teams keep their indexes after the departments; queues follow.
	for q := range w.s.Queues {
		w.s.Queues[q].Group += depts
	}
	w.s.Groups = groups
	return w
}

// levelUse is, per node, the GPUs its subtree holds in running.
func levelUse(s *engine.Snapshot, running []engine.Placement) []model.MilliGPU {
	use := make([]model.MilliGPU, len(s.Groups))
	for _, r := range running {
		for _, g := range pathOf(s, s.Queues[r.Queue].Group) {
			use[g] += r.Size
		}
	}
	return use
}

// pausedPath reports whether a level on g's path is paused (limit 0).
func pausedPath(s *engine.Snapshot, g int) bool {
	for _, n := range pathOf(s, g) {
		if s.Groups[n].Limit == 0 {
			return true
		}
	}
	return false
}

func checkTreeLimits(t *rapid.T, pre, post *engine.Snapshot) {
	use := levelUse(pre, post.Running)
	for g := range post.Groups {
		if use[g] > post.Groups[g].Limit && !pausedPath(post, g) {
			t.Fatalf("%s holds %s GPUs above its limit of %s", post.Groups[g].Name, use[g], post.Groups[g].Limit)
		}
	}
	poolUsed := make([]model.MilliGPU, len(post.Pools))
	for _, r := range post.Running {
		poolUsed[r.Pool] += r.Size
	}
	for p := range post.Pools {
		if poolUsed[p] > post.Pools[p].Capacity {
			t.Fatalf("pool %s holds %s of %s GPUs", post.Pools[p].Name, poolUsed[p], post.Pools[p].Capacity)
		}
	}
}

// guaranteedAt restates the rule of reservations bottom up: the lowest
// level of g's path whose reservation guarantees a new task of size, or
// -1. The team guarantees it within its own reservation; a department
// when its reservation has room for it after what it promised its other
// children (each what it has not used of its own reservation).
func guaranteedAt(s *engine.Snapshot, use []model.MilliGPU, g int, size model.MilliGPU) int {
	path := pathOf(s, g)
	if use[g]+size <= s.Groups[g].Reservation {
		return g
	}
	for k := 1; k < len(path); k++ {
		a := path[k]
		room := s.Groups[a].Reservation - use[a] - size
		for c := range s.Groups {
			if p, ok := s.Groups[c].ParentIndex(); ok && p == a && c != path[k-1] {
				room -= max(0, s.Groups[c].Reservation-use[c])
			}
		}
		if room >= 0 {
			return a
		}
	}
	return -1
}

// checkTreeReservations judges the allocation the pass reached before it
// lent (the running work after the pass, less what the lend phase
// placed), as checkReservationsFilled does for flat estates.
func checkTreeReservations(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions, post *engine.Snapshot) {
	lent := map[string]bool{}
	fresh := map[string]bool{}
	for _, p := range d.Placements {
		fresh[p.TaskID] = true
		if p.Phase == engine.PhaseLend {
			lent[p.TaskID] = true
		}
	}
	requeued := make([]bool, len(pre.Queues))
	for _, p := range d.Preemptions {
		requeued[p.Queue] = true
	}
	var running []engine.Placement
	for _, r := range post.Running {
		if !lent[r.TaskID] {
			running = append(running, r)
		}
	}
	use := levelUse(pre, running)
	poolUsed := make([]model.MilliGPU, len(pre.Pools))
	rate := make([]int64, len(pre.Groups))
	budgeted := make([]int, len(pre.Groups))
	for _, r := range running {
		poolUsed[r.Pool] += r.Size
		if wt := pre.Profiles[pre.Queues[r.Queue].Profile].WeightMilli; wt > 0 {
			for _, n := range pathOf(pre, pre.Queues[r.Queue].Group) {
				rate[n] += wt
				budgeted[n]++
			}
		}
	}
	for q := range post.Queues {
		if requeued[q] {
			continue
		}
		queue := &post.Queues[q]
		var head *engine.Task
		for i := range queue.Waiting {
			if head == nil || queue.Waiting[i].Seq < head.Seq {
				head = &queue.Waiting[i]
			}
		}
		for i := range pre.Queues[q].Waiting {
			if tk := &pre.Queues[q].Waiting[i]; lent[tk.ID] && (head == nil || tk.Seq < head.Seq) {
				head = tk
			}
		}
		if head == nil {
			continue
		}
		g, size := queue.Group, head.Size.Total()
		by := guaranteedAt(pre, use, g, size)
		if by < 0 || pausedPath(pre, g) {
			continue
		}
		allowed := true
		weight := pre.Profiles[queue.Profile].WeightMilli
		for _, n := range pathOf(pre, g) {
			if use[n]+size > pre.Groups[n].Limit {
				allowed = false
			}
			if b := pre.Groups[n].Budget; b != nil && weight > 0 {
				if b.Remaining() == 0 || (budgeted[n] > 0 && lastsHours(b.Remaining(), rate[n]+weight) < b.LowWatermark.Hours()) {
					allowed = false
				}
			}
		}
		if !allowed {
			continue
		}
		shares := func(n int) bool {
			for _, a := range pathOf(pre, g) {
				if a == n {
					return true
				}
			}
			return false
		}
		for _, p := range pre.Profiles[queue.Profile].Pools {
			if !pre.Pools[p].Kind.CanRun(head.Size) || size > pre.Pools[p].Capacity {
				continue
			}
			free := pre.Pools[p].Capacity - poolUsed[p]
			if free >= size {
				t.Fatalf("%s's head %s (%s GPUs), guaranteed by %s, waits while pool %s has %s GPUs free",
					pre.Groups[g].Name, head.ID, size, pre.Groups[by].Name, pre.Pools[p].Name, free)
			}
			// One running task outside by's subtree whose loss leaves every
			// level the claimant does not share at or above its reservation.
			for _, r := range running {
				if r.Pool != p || fresh[r.TaskID] || free+r.Size < size {
					continue
				}
				vp := pathOf(pre, pre.Queues[r.Queue].Group)
				ok := true
				for _, n := range vp {
					if n == by {
						ok = false
					}
				}
				for _, n := range vp {
					if !ok || shares(n) {
						break
					}
					if use[n]-r.Size < pre.Groups[n].Reservation {
						ok = false
						break
					}
				}
				if ok {
					t.Fatalf("%s's head %s (%s GPUs), guaranteed by %s, waits while reclaiming %s (%s GPUs of %s) on pool %s would make room",
						pre.Groups[g].Name, head.ID, size, pre.Groups[by].Name, r.TaskID, r.Size, pre.Queues[r.Queue].Name, pre.Pools[p].Name)
				}
			}
		}
	}
}

// atLeastChecks raises rapid's number of checks to n for the test, unless
// it was asked for more (-rapid.checks).
func atLeastChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil {
		t.Fatal("rapid registers no -rapid.checks flag")
	}
	was := f.Value.String()
	if now, err := strconv.Atoi(was); err == nil && now >= n {
		return
	}
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(was) })
}
