package flatref

import (
	"fmt"

	"github.com/klique-ai/klique/internal/model"
)

// The part of a pass that answers estate changes under running and waiting
// work (docs/engine.md, "Estate changes under running and waiting work"):
// waiting work that can never be placed fails, and work over a lowered
// capacity or limit is preempted.

// failUnplaceable takes out of each queue the waiting tasks no pass could
// place as the estate stands, as failures: a task larger than its group's
// limit, or than every pool of its profile. Left waiting, such a task would
// hold every task behind it for ever. A limit of 0, and a profile whose
// pools all declare 0 GPUs (or that lists none), close rather than shrink:
// the work waits for them to reopen.
func (st *state) failUnplaceable() {
	for q := range st.s.Queues {
		queue := &st.s.Queues[q]
		st.waiting[q] = queue.Waiting
		if sz := queue.Sizes; sz.of(queue.Waiting) &&
			(!sz.hasSingle || st.unplaceable(queue, sz.single) == "") &&
			(!sz.hasMulti || st.unplaceable(queue, sz.multi) == "") {
			// The largest of each kind can be held, so every task can
			// (WaitingSizes).
			continue
		}
		var kept []Task
		// The verdict depends on the queue and the task's size alone, and
		// the tasks of a queue are mostly of one size: it is decided once
		// per run of equal sizes, as this runs over every waiting task.
		var shape model.Size
		reason, decided := "", false
		for i := range queue.Waiting {
			t := &queue.Waiting[i]
			if !decided || t.Size != shape {
				shape, reason, decided = t.Size, st.unplaceable(queue, t.Size), true
			}
			if reason == "" {
				if kept != nil {
					kept = append(kept, *t)
				}
				continue
			}
			if kept == nil {
				kept = append(make([]Task, 0, len(queue.Waiting)-1), queue.Waiting[:i]...)
			}
			st.dec.Failures = append(st.dec.Failures, Failure{TaskID: t.ID, Queue: q, Reason: reason})
		}
		if kept != nil {
			st.waiting[q] = kept
		}
	}
}

// unplaceable says why a task of size shape in queue can never be placed,
// or "" when it can.
func (st *state) unplaceable(queue *Queue, shape model.Size) string {
	g := &st.s.Groups[queue.Group]
	size := shape.Total()
	if !g.Paused() && size > g.Limit {
		return fmt.Sprintf("it can never be placed: it needs %s GPUs, more than group %s's limit of %s GPUs; enqueue it again with at most %s GPUs, or ask an admin to raise the limit",
			size, g.Name, g.Limit, g.Limit)
	}
	if !st.kindCanRun(queue.Profile, shape) {
		return fmt.Sprintf("it can never be placed: %s; enqueue it again on one node, or ask an admin to add such a pool to the profile", st.noPoolCanRun(queue.Profile, shape))
	}
	p := st.largestPool(queue.Profile, shape)
	if p < 0 || size <= st.s.Pools[p].Capacity {
		return ""
	}
	pool := &st.s.Pools[p]
	return fmt.Sprintf("it can never be placed: it needs %s GPUs, and no pool of profile %s declares that many (the largest, %s, declares %s); enqueue it again with at most %s GPUs, or ask an admin for a larger pool on the profile",
		size, st.s.Profiles[queue.Profile].Name, pool.Name, pool.Capacity, pool.Capacity)
}

// largestPool is, among the profile's pools whose kind can run shape, the
// one with the largest declared capacity (the first in the profile's order
// among equals), or -1 when there is none or all of them declare 0 GPUs.
func (st *state) largestPool(pr int, shape model.Size) int {
	best := -1
	for _, p := range st.s.Profiles[pr].Pools {
		if c := st.s.Pools[p].Capacity; c > 0 && st.s.Pools[p].Kind.CanRun(shape) && (best < 0 || c > st.s.Pools[best].Capacity) {
			best = p
		}
	}
	return best
}

// kindCanRun reports whether a pool of the profile can run work of size
// shape by its kind (model.PoolKind.CanRun: multi-node work only where a
// gang is placed whole), or the profile lists none (which closes it rather
// than failing its work). It allocates nothing: the pass asks it of every
// waiting task.
func (st *state) kindCanRun(pr int, shape model.Size) bool {
	pools := st.s.Profiles[pr].Pools
	for _, p := range pools {
		if st.s.Pools[p].Kind.CanRun(shape) {
			return true
		}
	}
	return len(pools) == 0
}

// noPoolCanRun says why no pool of the profile can run work of size shape,
// where kindCanRun says none can.
func (st *state) noPoolCanRun(pr int, shape model.Size) string {
	pools := st.s.Profiles[pr].Pools
	names := make([]string, 0, len(pools))
	kinds := make([]model.PoolKind, 0, len(pools))
	for _, p := range pools {
		names, kinds = append(names, st.s.Pools[p].Name), append(kinds, st.s.Pools[p].Kind)
	}
	return model.NoPoolCanRun(st.s.Profiles[pr].Name, shape, names, kinds)
}

// enforceCapacity preempts work on every pool that holds more than its
// declared capacity, which happens when an admin lowers the capacity below
// what is placed on it. It takes the fewest tasks needed to fit (see shed):
// borrowed work first, newest placed first.
func (st *state) enforceCapacity() {
	for p := range st.s.Pools {
		pool := &st.s.Pools[p]
		over := st.poolUsed[p] - pool.Capacity
		if over <= 0 {
			continue
		}
		on := st.livePlacements(func(pl *live) bool { return int(pl.Pool) == p })
		reason := fmt.Sprintf("pool %s's capacity was lowered to %s GPUs, below the %s GPUs placed on it", pool.Name, pool.Capacity, st.poolUsed[p])
		for _, i := range st.shed(on, over) {
			st.preempt(i, CauseCapacity, -1, reason)
		}
	}
}

// livePlacements returns the indexes of the live placements that match.
func (st *state) livePlacements(match func(*live) bool) []int {
	var out []int
	for i := range st.placements {
		if pl := &st.placements[i]; pl.alive && match(pl) {
			out = append(out, i)
		}
	}
	return out
}

// enforceLimits preempts work of every group that holds more than its
// limit, which happens when an admin lowers the limit below what the group
// holds: the limit is the most a group holds at once, so it takes effect
// at the next pass rather than as its work ends. It takes the fewest tasks
// needed (see shed), newest placed first.
func (st *state) enforceLimits() {
	for g := range st.s.Groups {
		grp := &st.s.Groups[g]
		over := st.groupUse[g] - grp.Limit
		if over <= 0 || grp.Paused() {
			// A paused group's running work runs to its end: the pause
			// stops new work, as draining a pool does.
			continue
		}
		mine := st.livePlacements(func(pl *live) bool { return int(pl.group) == g })
		reason := fmt.Sprintf("group %s's limit was lowered to %s GPUs, below the %s GPUs it held", grp.Name, grp.Limit, st.groupUse[g])
		for _, i := range st.shed(mine, over) {
			st.preempt(i, CauseLimit, -1, reason)
		}
	}
}

// shed picks, among the placements cands, the work to preempt so that need
// GPUs are freed: first work above its group's reservation without taking
// any group below it (borrowed work, the first to give back under the
// seeds' rules, so that no reclaim follows), newest placed first; then, if
// that is not enough, the rest, newest placed first. It then gives back,
// last taken first, every task not needed to free need, so that no task in
// the result could be spared. It sorts cands.
func (st *state) shed(cands []int, need model.MilliGPU) []int {
	st.sortNewestFirst(cands)
	use := append([]model.MilliGPU(nil), st.groupUse...)
	taken := make([]bool, len(cands))
	var chosen []int
	var freed model.MilliGPU
	for k, i := range cands {
		if freed >= need {
			break
		}
		v := &st.placements[i]
		if use[v.group]-v.Size < st.s.Groups[v.group].Reservation {
			continue
		}
		use[v.group] -= v.Size
		taken[k] = true
		chosen = append(chosen, i)
		freed += v.Size
	}
	for k, i := range cands {
		if freed >= need {
			break
		}
		if !taken[k] {
			chosen = append(chosen, i)
			freed += st.placements[i].Size
		}
	}
	keep := make([]bool, len(chosen))
	for k := len(chosen) - 1; k >= 0; k-- {
		if size := st.placements[chosen[k]].Size; freed-size >= need {
			freed -= size
		} else {
			keep[k] = true
		}
	}
	out := chosen[:0]
	for k, i := range chosen {
		if keep[k] {
			out = append(out, i)
		}
	}
	return out
}
