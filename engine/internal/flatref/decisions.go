package flatref

import "time"

// Phase is the step of a pass that made a placement.
type Phase string

const (
	PhaseReservation Phase = "reservation"
	PhaseReclaim     Phase = "reclaim"
	PhaseLend        Phase = "lend"
)

// Decisions are what one pass decided.
type Decisions struct {
	// Preemptions in the order the pass made them. A preemption always
	// comes before the placement it made room for.
	Preemptions []Preemption
	// Placements in the order the pass made them.
	Placements []Place
	// Blocked says, for every queue that still has work waiting, why its
	// head waits.
	Blocked []Blocked
	// Failures are waiting tasks that no pass could place as the estate
	// stands (larger than every pool of their profile, or than their
	// group's limit), in queue order per queue. They end instead of
	// holding every task behind them.
	Failures []Failure
}

// Failure ends a waiting task that can never be placed: an estate change
// (a pool shrunk or taken off its profile, a limit lowered) made it larger
// than anything that could hold it. Enqueue refuses such a task; this is
// the same rule for tasks enqueued before the change.
type Failure struct {
	TaskID string
	Queue  int
	// Reason says why, and what to change.
	Reason string
}

// Place puts a waiting task on a pool.
type Place struct {
	TaskID string
	Queue  int
	Pool   int
	Phase  Phase
	// Borrowed is true when the task takes its group above its reservation.
	Borrowed bool
}

// Preemption stops a placed task and sends it back to the front of its
// queue, in its old order.
type Preemption struct {
	TaskID string
	Queue  int
	Pool   int
	Cause  Cause
	// ForGroup is the group whose reservation the preemption fills (for
	// CauseReclaim), or -1.
	ForGroup int
	Reason   string
}

// Cause says why a task was preempted.
type Cause string

const (
	CauseReclaim    Cause = "reclaimed"
	CauseBudgetUsed Cause = "budget"
	// CauseCapacity: the pool's declared capacity was lowered below the
	// work placed on it.
	CauseCapacity Cause = "capacity"
	// CauseLimit: the group's limit was lowered below the work it holds.
	CauseLimit Cause = "limit"
)

// Constraint names what holds a queue's head.
type Constraint string

const (
	// HeldByLimit: the group would go above its limit.
	HeldByLimit Constraint = "group_at_limit"
	// HeldByBudgetUsed: the group's time budget is used up.
	HeldByBudgetUsed Constraint = "budget_used_up"
	// HeldByLowWatermark: the remaining budget would not last the low
	// watermark at the group's rate with the task.
	HeldByLowWatermark Constraint = "budget_low_watermark"
	// HeldByPoolsFull: every pool of the profile is full.
	HeldByPoolsFull Constraint = "pools_full"
	// HeldByTooLarge: no pool of the profile declares enough capacity for
	// the task, even empty.
	HeldByTooLarge Constraint = "too_large"
	// HeldByNoPool: the profile lists no pool.
	HeldByNoPool Constraint = "no_pool"
	// HeldByPaused: an admin paused the group (its limit is 0).
	HeldByPaused Constraint = "group_paused"
	// HeldByPoolKind: no pool of the profile is of a kind that can run
	// the task's size (multi-node work on bare-metal or cloud pools).
	HeldByPoolKind Constraint = "pool_kind"
)

// Blocked is why the head of a queue waits after a pass.
type Blocked struct {
	Queue      int
	TaskID     string
	Constraint Constraint
	// Reason is a sentence a developer can act on.
	Reason string
	// Until is when a budget constraint lifts by itself (the period reset),
	// zero otherwise. A head held by the low watermark may start sooner:
	// once the group's running budgeted work ends (its reason says so).
	Until time.Time
}
