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
	checkCapacityAndLimits(t, pre, post)
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

// checkCapacityAndLimits: no pool above its declared capacity; no group
// above its limit.
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
		if groupUse[g] > post.Groups[g].Limit {
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
