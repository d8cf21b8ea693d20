package engine_test

import (
	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
)

// checkPass checks the invariants of one pass: pre is the snapshot the pass
// decided from, d its decisions, and the world is as it is after applying
// them. The checks run in this order; each stops the test at the first
// broken invariant.
func (w *world) checkPass(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions) {
	post := &w.s
	checkOnePlacePerTask(t, d, post)
	checkPoolKinds(t, pre, d)
	checkPausedGroups(t, pre, d)
	checkCapacityAndLimits(t, pre, post)
	checkUnplaceableFail(t, pre, d, post)
	checkLoweredCapacityAndLimits(t, pre, d)
	checkReclaimKeepsReservations(t, pre, d)
	checkReclaimPlacesClaimant(t, pre, d)
	checkQueueOrder(t, pre, d, post, w.variable)
	checkBudgets(t, pre, d, post)
	checkBlocked(t, pre, d, post)
	checkReservationsFilled(t, pre, d, post)
}

// checkOnePlacePerTask: no task is both placed and waiting, placed twice,
// or preempted and placed in the same pass (a preemption loop).
func checkOnePlacePerTask(t *rapid.T, d *engine.Decisions, post *engine.Snapshot) {
	placed := map[string]engine.Place{}
	for _, p := range d.Placements {
		if _, dup := placed[p.TaskID]; dup {
			t.Fatalf("%s placed twice in one pass", p.TaskID)
		}
		placed[p.TaskID] = p
	}
	preempted := map[string]engine.Preemption{}
	for _, p := range d.Preemptions {
		if _, dup := preempted[p.TaskID]; dup {
			t.Fatalf("%s preempted twice in one pass", p.TaskID)
		}
		if _, both := placed[p.TaskID]; both {
			t.Fatalf("%s both preempted and placed in one pass", p.TaskID)
		}
		preempted[p.TaskID] = p
	}
	for q := range post.Queues {
		for _, task := range post.Queues[q].Waiting {
			if _, ok := placed[task.ID]; ok {
				t.Fatalf("%s is placed and still waiting", task.ID)
			}
		}
	}
}

// checkPoolKinds: the pass never places a task on a pool whose kind cannot
// run its size (multi-node work only where the environment places a gang
// whole), whichever rank of its profile's order the pool is at.
func checkPoolKinds(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions) {
	for _, p := range d.Placements {
		for _, task := range pre.Queues[p.Queue].Waiting {
			if task.ID == p.TaskID && !pre.Pools[p.Pool].Kind.CanRun(task.Size) {
				t.Fatalf("%s (%s GPUs) placed on pool %s, a %s pool, which cannot run it", task.ID, task.Size, pre.Pools[p.Pool].Name, pre.Pools[p.Pool].Kind)
			}
		}
	}
}

// checkPausedGroups: a group whose limit is 0 is paused: it is never given
// new GPUs, its running work is never preempted for its limit, and none of
// its waiting work fails for its size.
func checkPausedGroups(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions) {
	paused := func(q int) bool { return pre.Groups[pre.Queues[q].Group].Limit == 0 }
	for _, p := range d.Placements {
		if paused(p.Queue) {
			t.Fatalf("%s placed for paused group %s", p.TaskID, pre.Groups[pre.Queues[p.Queue].Group].Name)
		}
	}
	for _, p := range d.Preemptions {
		if paused(p.Queue) && p.Cause == engine.CauseLimit {
			t.Fatalf("%s of paused group %s preempted for its limit: %s", p.TaskID, pre.Groups[pre.Queues[p.Queue].Group].Name, p.Reason)
		}
	}
	for _, b := range d.Blocked {
		if paused(b.Queue) && b.Constraint != engine.HeldByPaused && b.Constraint != engine.HeldByNoPool &&
			b.Constraint != engine.HeldByPoolKind && b.Constraint != engine.HeldByTooLarge {
			t.Fatalf("the head of paused group %s's queue %s is held by %s: %s", pre.Groups[pre.Queues[b.Queue].Group].Name, pre.Queues[b.Queue].Name, b.Constraint, b.Reason)
		}
	}
}

// checkCapacityAndLimits: no pool above its declared capacity; no group
// above its limit, even after an admin lowered one below what it held
// (the pass preempts down to it), except a paused group (limit 0), whose
// running work runs to its end (checkPausedGroups: it gains none).
func checkCapacityAndLimits(t *rapid.T, pre *engine.Snapshot, post *engine.Snapshot) {
	groupOf := func(q int) int { return pre.Queues[q].Group }
	poolUsed := make([]model.MilliGPU, len(post.Pools))
	groupUse := make([]model.MilliGPU, len(post.Groups))
	for _, r := range post.Running {
		poolUsed[r.Pool] += r.Size
		groupUse[groupOf(r.Queue)] += r.Size
	}
	for p := range post.Pools {
		if poolUsed[p] > post.Pools[p].Capacity {
			t.Fatalf("pool %s holds %s of %s GPUs", post.Pools[p].Name, poolUsed[p], post.Pools[p].Capacity)
		}
	}
	for g := range post.Groups {
		if groupUse[g] > post.Groups[g].Limit && post.Groups[g].Limit > 0 {
			t.Fatalf("group %s holds %s GPUs above its limit of %s", post.Groups[g].Name, groupUse[g], post.Groups[g].Limit)
		}
	}
}

// checkQueueOrder: within a queue of a fixed-size profile (variable marks
// the others), every task placed in the pass comes before (smaller Seq)
// every task still waiting, including tasks the pass preempted back into
// the queue; and a queue's placements are made in queue order.
func checkQueueOrder(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions, post *engine.Snapshot, variable []bool) {
	lastPlaced := make([]int64, len(pre.Queues))
	for i := range lastPlaced {
		lastPlaced[i] = -1
	}
	for _, p := range d.Placements {
		seq := seqOf(pre, p.Queue, p.TaskID)
		if seq < lastPlaced[p.Queue] {
			t.Fatalf("queue %s placed %s out of queue order", pre.Queues[p.Queue].Name, p.TaskID)
		}
		lastPlaced[p.Queue] = seq
	}
	for q := range post.Queues {
		if lastPlaced[q] < 0 || len(post.Queues[q].Waiting) == 0 || variable[pre.Queues[q].Profile] {
			continue
		}
		if first := post.Queues[q].Waiting[0]; first.Seq < lastPlaced[q] {
			t.Fatalf("queue %s placed Seq %d while Seq %d (%s) still waits: queue order inverted", post.Queues[q].Name, lastPlaced[q], first.Seq, first.ID)
		}
	}
}

// checkBlocked: every held queue is named once, with a task that is still
// waiting in it.
func checkBlocked(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions, post *engine.Snapshot) {
	seenBlocked := map[int]bool{}
	for _, b := range d.Blocked {
		if seenBlocked[b.Queue] {
			t.Fatalf("queue %s blocked twice", pre.Queues[b.Queue].Name)
		}
		seenBlocked[b.Queue] = true
		if seqOf(post, b.Queue, b.TaskID) < 0 {
			t.Fatalf("blocked names %s, which is not waiting in queue %s", b.TaskID, pre.Queues[b.Queue].Name)
		}
	}
}

func seqOf(s *engine.Snapshot, q int, id string) int64 {
	for _, task := range s.Queues[q].Waiting {
		if task.ID == id {
			return task.Seq
		}
	}
	return -1
}

// unplaceable is the rule of failures restated: a task larger than its
// group's limit (unless the limit is 0: the group is paused), or one no
// pool of its profile can run by its kind (unless the profile lists
// none), or larger than every pool of its profile that can (unless they
// all declare 0 GPUs).
func unplaceable(s *engine.Snapshot, q int, size model.Size) bool {
	g := &s.Groups[s.Queues[q].Group]
	if g.Limit > 0 && size.Total() > g.Limit {
		return true
	}
	pools := s.Profiles[s.Queues[q].Profile].Pools
	var largest model.MilliGPU
	kindCanRun := false
	for _, p := range pools {
		if s.Pools[p].Kind.CanRun(size) {
			kindCanRun = true
			largest = max(largest, s.Pools[p].Capacity)
		}
	}
	if len(pools) > 0 && !kindCanRun {
		return true
	}
	return largest > 0 && size.Total() > largest
}

// checkUnplaceableFail: every failure is a task that was waiting and can
// never be placed; no task that was waiting and can never be placed is
// still waiting after the pass (so none holds its queue).
func checkUnplaceableFail(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions, post *engine.Snapshot) {
	failed := map[string]bool{}
	for _, f := range d.Failures {
		failed[f.TaskID] = true
		found := false
		for _, task := range pre.Queues[f.Queue].Waiting {
			if task.ID == f.TaskID {
				found = true
				if !unplaceable(pre, f.Queue, task.Size) {
					t.Fatalf("failed %s (%s GPUs) in %s, which could be placed", task.ID, task.Size, pre.Queues[f.Queue].Name)
				}
			}
		}
		if !found {
			t.Fatalf("failed %s, which was not waiting in %s", f.TaskID, pre.Queues[f.Queue].Name)
		}
	}
	for q := range pre.Queues {
		for _, task := range pre.Queues[q].Waiting {
			if !failed[task.ID] && unplaceable(pre, q, task.Size) {
				t.Fatalf("%s (%s GPUs) can never be placed in %s and was not failed", task.ID, task.Size, pre.Queues[q].Name)
			}
		}
	}
	for q := range post.Queues {
		for _, task := range post.Queues[q].Waiting {
			if failed[task.ID] {
				t.Fatalf("failed %s is still waiting", task.ID)
			}
		}
	}
}

// checkLoweredCapacityAndLimits: the pass preempts for capacity only on a
// pool over its capacity (after budget preemptions), and for a limit only
// in a group over it (after those and the capacity preemptions), enough to
// fit, and no more tasks than needed: giving any one of them back would
// leave the pool, or the group, over.
func checkLoweredCapacityAndLimits(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions) {
	sizeOf := map[string]model.MilliGPU{}
	poolUse := make([]model.MilliGPU, len(pre.Pools))
	groupUse := make([]model.MilliGPU, len(pre.Groups))
	for _, r := range pre.Running {
		sizeOf[r.TaskID] = r.Size
		poolUse[r.Pool] += r.Size
		groupUse[pre.Queues[r.Queue].Group] += r.Size
	}
	byPool := make([][]model.MilliGPU, len(pre.Pools))
	byGroup := make([][]model.MilliGPU, len(pre.Groups))
	for _, p := range d.Preemptions {
		g := pre.Queues[p.Queue].Group
		switch p.Cause {
		case engine.CauseBudgetUsed:
			poolUse[p.Pool] -= sizeOf[p.TaskID]
			groupUse[g] -= sizeOf[p.TaskID]
		case engine.CauseCapacity:
			byPool[p.Pool] = append(byPool[p.Pool], sizeOf[p.TaskID])
			groupUse[g] -= sizeOf[p.TaskID]
		case engine.CauseLimit:
			byGroup[g] = append(byGroup[g], sizeOf[p.TaskID])
		}
	}
	minimal := func(what string, use, ceiling model.MilliGPU, sizes []model.MilliGPU) {
		if len(sizes) == 0 {
			return
		}
		var freed model.MilliGPU
		for _, s := range sizes {
			freed += s
		}
		if use <= ceiling || use-freed > ceiling {
			t.Fatalf("%s held %s of %s GPUs and gave back %s", what, use, ceiling, freed)
		}
		for _, s := range sizes {
			if use-(freed-s) <= ceiling {
				t.Fatalf("%s held %s of %s GPUs and gave back %s, including a %s-GPU task it did not need to", what, use, ceiling, freed, s)
			}
		}
	}
	for p := range pre.Pools {
		minimal("pool "+pre.Pools[p].Name, poolUse[p], pre.Pools[p].Capacity, byPool[p])
	}
	for g := range pre.Groups {
		if pre.Groups[g].Limit > 0 {
			minimal("group "+pre.Groups[g].Name, groupUse[g], pre.Groups[g].Limit, byGroup[g])
		}
	}
}
