package engine_test

import (
	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
)

// checkReclaimKeepsReservations: nothing is preempted below its group's
// reservation. A group that loses work to reclaim still holds its
// reservation once all of this pass's preemptions are taken away (before
// any placement of its own).
func checkReclaimKeepsReservations(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions) {
	groupOf := func(q int) int { return pre.Queues[q].Group }
	preUse := make([]model.MilliGPU, len(pre.Groups))
	for _, r := range pre.Running {
		preUse[groupOf(r.Queue)] += r.Size
	}
	lost := make([]model.MilliGPU, len(pre.Groups))
	reclaimedFrom := make([]bool, len(pre.Groups))
	for _, p := range d.Preemptions {
		g := groupOf(p.Queue)
		for _, r := range pre.Running {
			if r.TaskID == p.TaskID {
				lost[g] += r.Size
			}
		}
		if p.Cause == engine.CauseReclaim {
			reclaimedFrom[g] = true
			if p.ForGroup < 0 || p.ForGroup == g {
				t.Fatalf("reclaim preemption %+v names no other claimant group", p)
			}
		}
	}
	for g := range pre.Groups {
		if reclaimedFrom[g] && preUse[g]-lost[g] < pre.Groups[g].Reservation {
			t.Fatalf("group %s was reclaimed down to %s GPUs, below its reservation of %s", pre.Groups[g].Name, preUse[g]-lost[g], pre.Groups[g].Reservation)
		}
	}
}

// checkReclaimPlacesClaimant: a pass that preempts for reclaim places the
// claimant on that pool in the same pass, within its reservation; a
// reclaim placement always follows a preemption for its group on its pool.
func checkReclaimPlacesClaimant(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions) {
	groupOf := func(q int) int { return pre.Queues[q].Group }
	type key struct{ group, pool int }
	reclaimPre := map[key]bool{}
	for _, p := range d.Preemptions {
		if p.Cause == engine.CauseReclaim {
			reclaimPre[key{p.ForGroup, p.Pool}] = true
		}
	}
	reclaimPlace := map[key]bool{}
	for _, p := range d.Placements {
		if p.Phase == engine.PhaseReclaim {
			if p.Borrowed {
				t.Fatalf("reclaim placement %+v is borrowed", p)
			}
			k := key{groupOf(p.Queue), p.Pool}
			if !reclaimPre[k] {
				t.Fatalf("reclaim placement %+v follows no preemption for its group on its pool", p)
			}
			reclaimPlace[k] = true
		}
	}
	for k := range reclaimPre {
		if !reclaimPlace[k] {
			t.Fatalf("work was preempted on pool %s for group %s, which placed nothing there (a preemption loop)", pre.Pools[k.pool].Name, pre.Groups[k.group].Name)
		}
	}
}

// checkReservationsFilled states the reclaim guarantee precisely.
//
// Take the allocation the pass reaches before it lends: the work running
// after the pass without the pass's lend placements (lending comes after
// reclaim and only adds work). In that allocation, let g be a group and q a
// queue of g whose profile lists pools, and h the first task waiting in q
// (preempted tasks included, in their old order), such that
//
//   - h keeps g within its reservation: use(g) + size(h) ≤ reservation(g);
//   - g's time budget allows h to start (the start check at g's rate).
//
// Then on no pool p of q's profile is there a set V of tasks running on p
// since before the pass such that, with V removed, every group still holds
// at least its reservation and p has size(h) GPUs free. In words: a group
// below its reservation whose head fits within it is never left waiting
// while capacity it could reclaim exists on its profile's pools.
//
// The allocation before lending is the right one to judge: reclaim must be
// judged on what it saw, and a later pass reclaims work that lending gives a
// group beyond its reservation.
func checkReservationsFilled(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions, post *engine.Snapshot) {
	groupOf := func(q int) int { return pre.Queues[q].Group }
	lent := map[string]bool{}
	for _, p := range d.Placements {
		if p.Phase == engine.PhaseLend {
			lent[p.TaskID] = true
		}
	}
	freshTask := map[string]bool{}
	for _, p := range d.Placements {
		freshTask[p.TaskID] = true
	}
	poolUsed := make([]model.MilliGPU, len(post.Pools))
	use := make([]model.MilliGPU, len(post.Groups))
	rate := make([]int64, len(post.Groups))
	budgeted := make([]int, len(post.Groups))
	var running []engine.Placement
	for _, r := range post.Running {
		if lent[r.TaskID] {
			continue
		}
		running = append(running, r)
		poolUsed[r.Pool] += r.Size
		g := groupOf(r.Queue)
		use[g] += r.Size
		if w := pre.Profiles[pre.Queues[r.Queue].Profile].WeightMilli; w > 0 {
			rate[g] += w
			budgeted[g]++
		}
	}
	// A queue the pass preempted work from places nothing more in that
	// pass (its order holds); after a lowered capacity or limit that can be
	// a group below its reservation, whose requeued work goes next pass.
	requeued := make([]bool, len(pre.Queues))
	for _, p := range d.Preemptions {
		requeued[p.Queue] = true
	}
	for q := range post.Queues {
		if requeued[q] {
			continue
		}
		queue := &post.Queues[q]
		// The head before lending: the first of what waits now and what
		// lending placed.
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
		g := queue.Group
		size := head.Size.Total()
		if use[g]+size > pre.Groups[g].Reservation || pre.Groups[g].Paused() {
			continue
		}
		weight := pre.Profiles[queue.Profile].WeightMilli
		if b := pre.Groups[g].Budget; b != nil && weight > 0 {
			if b.Remaining() == 0 || (budgeted[g] > 0 && lastsHours(b.Remaining(), rate[g]+weight) < b.LowWatermark.Hours()) {
				continue
			}
		}
		for _, p := range pre.Profiles[queue.Profile].Pools {
			free := pre.Pools[p].Capacity - poolUsed[p]
			if size > pre.Pools[p].Capacity || !pre.Pools[p].Kind.CanRun(head.Size) {
				continue
			}
			if canFree(pre, running, freshTask, use, p, size-free) {
				t.Fatalf("group %s (%s of reservation %s) waits with %s (%s GPUs) in %s, while pool %s could be freed for it by reclaiming work above other groups' reservations",
					pre.Groups[g].Name, use[g], pre.Groups[g].Reservation, head.ID, size, queue.Name, pre.Pools[p].Name)
			}
		}
	}
}

// canFree reports whether need GPUs can be freed on pool p by removing work
// running since before the pass, keeping every group at or above its
// reservation. It is an exact subset-sum over each group's tasks on p (in
// eighths of a GPU), combined across groups.
func canFree(pre *engine.Snapshot, running []engine.Placement, fresh map[string]bool, use []model.MilliGPU, p int, need model.MilliGPU) bool {
	if need <= 0 {
		return true
	}
	const unit = 125
	target := int((need + unit - 1) / unit)
	reach := make([]bool, target+1)
	reach[0] = true
	for g := range pre.Groups {
		surplus := int((use[g] - pre.Groups[g].Reservation) / unit)
		if surplus <= 0 {
			continue
		}
		// Sums of g's tasks on p within its surplus.
		sums := make([]bool, surplus+1)
		sums[0] = true
		for _, r := range running {
			if r.Pool != p || pre.Queues[r.Queue].Group != g || fresh[r.TaskID] {
				continue
			}
			s := int(r.Size / unit)
			for v := surplus; v >= s; v-- {
				sums[v] = sums[v] || sums[v-s]
			}
		}
		next := make([]bool, target+1)
		for a := range reach {
			if !reach[a] {
				continue
			}
			for b, ok := range sums {
				if ok {
					next[min(a+b, target)] = true
				}
			}
		}
		reach = next
	}
	return reach[target]
}
