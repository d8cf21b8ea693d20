// Package engine is the compute policy engine. Its core is a pure pass:
//
//	Pass(snapshot) → decisions
//
// A snapshot holds the pools and their declared capacity, the profiles and
// their ordered pools, the groups (one per resource policy) with their
// reservations, limits and time budgets, the compute resources (queues) with
// their waiting tasks in queue order, and the work holding capacity now. The
// pass reads no clock, does no I/O and never ranges over a map, so the same
// snapshot always gives the same decisions. The package imports only
// model-level packages (model, estate); the loop around it (engine/loop)
// reads snapshots from the store and hands each pass's Plan to the
// platform's allocation domain, which applies it in one transaction.
//
// The rules of a pass, in order (docs/engine.md says them in full):
//
//  0. Unplaceable work fails: a waiting task larger than every pool of its
//     profile, or than its group's limit, or one no pool of its profile
//     can run by its kind (model.PoolKind.CanRun), is failed rather than
//     left to hold its queue. A group whose limit is 0 is paused: its work
//     waits, nothing of it is placed, and its running work is kept. Budgets used up: a group whose time budget is spent
//     has its running budgeted work preempted, newest first. Over capacity
//     or limit: a pool whose capacity, or a group whose limit, was lowered
//     below what it holds has the fewest tasks needed preempted, borrowed
//     work first, newest first.
//  1. Fill reservations: place waiting work of groups below their
//     reservation, as long as each task keeps its group within it; every
//     profile's first pool first, then second pools, then the rest.
//  2. Reclaim: for a group still below its reservation with work waiting,
//     preempt work of groups above their reservation on the pools the
//     waiting task may use, newest first, never below the victim's own
//     reservation, only as much as the task needs, and only when the task
//     then fits.
//  3. Lend: place the remaining work on idle capacity up to each group's
//     limit and within its time budget, first pool first.
//
// Within a pool, profiles are served in the pool's execution priority;
// within a profile, queues in the profile's queuing priority; within a
// queue, tasks in queue order, and the head of a queue blocks the tasks
// behind it.
//
// Groups form the organisation tree (Group.Parent, tree.go): a team's work
// counts at every level of its path, limits and budgets hold at every
// level, reservations are filled bottom up (a department guarantees what
// it has not promised its other children), a department's idle reserve is
// lent to its own teams first and lending among siblings is shared by
// weight, and reclaim takes from outside the department first. A flat
// estate, every group under the tenant, decides as before the tree.
package engine

import (
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// Snapshot is everything one pass decides from. Slices are ordered as the
// pass must walk them; references between objects are indices into the
// snapshot's slices, so the pass never looks anything up by key.
type Snapshot struct {
	// Now is the instant the pass decides at.
	Now time.Time
	// Pools in the order passes visit them at each pool rank (by name).
	Pools    []Pool
	Profiles []Profile
	Groups   []Group
	Queues   []Queue
	// Running is the work holding capacity: placed on a pool, whether or
	// not a worker has started it yet.
	Running []Placement
}

// Pool is capacity in one environment.
type Pool struct {
	ID   string
	Name string
	// Kind is the pool's environment: it says which sizes the pool can
	// run (model.PoolKind.CanRun); the pass never places work on a pool
	// that cannot run it.
	Kind model.PoolKind
	// Capacity is the declared capacity. The pool is full when the sizes of
	// the work placed on it add up to this.
	Capacity model.MilliGPU
	// Profiles are the profiles linked to the pool, in its execution
	// priority.
	Profiles []int
	// CreatedAt is when the pool was declared: a pool no worker ever
	// served has been without one since then.
	CreatedAt time.Time
	// Workers is what the fleet knows of the pool's workers (SetPoolWorkers).
	Workers PoolWorkers
}

// Profile is a task size with its ordered pools.
type Profile struct {
	ID   string
	Name string
	// Pools in the order work is placed: first pool first.
	Pools []int
	// Queues are the compute resources on the profile in queuing priority.
	Queues []int
	// WeightMilli is the time weight in thousandths: budget hours that one
	// hour of a task on this profile costs, times 1000. 0 exempts.
	WeightMilli int64
}

// Group is one group's resource policy.
type Group struct {
	ID   string
	Name string
	// Reservation is the GPUs the group is guaranteed; Limit the most it may
	// hold at once, borrowed included. A limit of 0 pauses the group
	// (Paused).
	Reservation model.MilliGPU
	Limit       model.MilliGPU
	// Budget is nil for a policy without a time budget.
	Budget *Budget
	// Parent is the department the node sits in, as its index in
	// Snapshot.Groups plus one, or 0 for a node directly under the tenant
	// (ParentIndex reads it). Plus one, so that a Group written without it,
	// as every group of a flat estate is, sits at the top of the tree.
	Parent int
	// Department marks a node of the organisation tree above teams: it has
	// no compute resources of its own; its reservation, limit and budget
	// cover its children's work.
	Department bool
	// Weight is the node's share of idle GPUs lent among its siblings (fair
	// sharing: the next GPU goes to the sibling using the least per unit of
	// weight). 0 counts as 1.
	Weight int64
}

// ParentIndex is the index in Snapshot.Groups of the department g sits in,
// and false for a node directly under the tenant.
func (g *Group) ParentIndex() (int, bool) { return g.Parent - 1, g.Parent > 0 }

// Budget is a group's time budget in the current period.
type Budget struct {
	// Total and Used are budget hours in millionths (micro budget-hours):
	// the period's budget, and what the group's work has been charged so
	// far in this period, up to the snapshot's Now.
	Total int64
	Used  int64
	// LowWatermark is how long the remaining budget must last, at the
	// group's rate with a new task, for the task to start.
	LowWatermark time.Duration
	// Period and ResetAt say which budget it is and when it renews, for the
	// reasons the pass gives.
	Period  model.BudgetPeriod
	ResetAt time.Time
}

// Remaining is the budget left, in micro budget-hours (0 when used up).
func (b *Budget) Remaining() int64 {
	if b.Used >= b.Total {
		return 0
	}
	return b.Total - b.Used
}

// Queue is a compute resource: one group's policy joined to one profile.
type Queue struct {
	ID      string
	Name    string
	Group   int
	Profile int
	// Waiting are the tasks waiting in the queue, in queue order. The loop
	// may give only the first few: the pass places no task past the first
	// it cannot place, and reads the others only to fail those no pool or
	// limit could ever hold, which Sizes spares it.
	Waiting []Task
	// Sizes, when set (SumUpWaiting) and still of Waiting, are the largest
	// sizes in Waiting.
	Sizes *WaitingSizes
}

// WaitingSizes are the largest sizes among a queue's waiting tasks: the
// largest single-node and the largest multi-node one. A pass fails the
// waiting tasks that no pool or limit could ever hold (failUnplaceable),
// and whether a task can be held depends only on its size, and only the
// more as the size grows. So when the largest of each kind can be held,
// every task can, and the pass need not read each waiting task: a million
// of them cost it what the heads of their queues cost.
type WaitingSizes struct {
	// first and n are the Waiting the sizes were taken of (its first task
	// and its length): a pass reads Waiting itself when they do not match.
	first               *Task
	n                   int
	single, multi       model.Size
	hasSingle, hasMulti bool
}

// SumUpWaiting sets the Sizes of every queue from its Waiting. A snapshot's
// builder calls it once Waiting is final (Model.Snapshot does): Waiting
// must not change afterwards, other than by being replaced.
func (s *Snapshot) SumUpWaiting() {
	for q := range s.Queues {
		w := s.Queues[q].Waiting
		sz := &WaitingSizes{n: len(w)}
		if len(w) > 0 {
			sz.first = &w[0]
		}
		for i := range w {
			size := w[i].Size
			if size.MultiNode() {
				if !sz.hasMulti || size.Total() > sz.multi.Total() {
					sz.multi, sz.hasMulti = size, true
				}
			} else if !sz.hasSingle || size.Total() > sz.single.Total() {
				sz.single, sz.hasSingle = size, true
			}
		}
		s.Queues[q].Sizes = sz
	}
}

// of reports whether the sizes were taken of w.
func (sz *WaitingSizes) of(w []Task) bool {
	if sz == nil || sz.n != len(w) {
		return false
	}
	return len(w) == 0 || sz.first == &w[0]
}

// Task is a waiting task.
type Task struct {
	ID   string
	Size model.Size
	// Seq is the task's place in queue order.
	Seq int64
}

// Placement is a task holding capacity on a pool.
type Placement struct {
	TaskID string
	Queue  int
	Pool   int
	Size   model.MilliGPU
	// Shape is the size as nodes × GPUs per node (Size is its total): a
	// task the pass sends back is held to the pool-kind rule again.
	Shape model.Size
	// PlacedAt and Seq order preemption: the newest placed goes first.
	PlacedAt time.Time
	Seq      int64
	// Claimed: a worker has claimed the task (it runs). Unclaimed work
	// waits in the pool's hidden queue.
	Claimed bool
}

// Paused reports whether an admin paused the group by setting its limit
// to 0: nothing of it is placed, its waiting work waits (it is never
// failed for its size), and its running work is not preempted for the
// limit but runs to its end.
func (g *Group) Paused() bool { return g.Limit == 0 }
