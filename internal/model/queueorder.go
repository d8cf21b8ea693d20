package model

// QueueRankUnlisted is the queue rank of a task whose project is not in its
// team's project priority, or that has no project: such tasks wait behind
// the listed projects' tasks, in queue order among themselves.
const QueueRankUnlisted = 1 << 16

// MaxProjectPriorities bounds a team's project priority list, so a listed
// project's rank (its index in the list) stays below QueueRankUnlisted.
const MaxProjectPriorities = 1000

// QueueKey folds a task's queue rank and queue order into one number that
// sorts as (rank, order) does: the engine's snapshot orders waiting tasks,
// and compares a task sent back to its queue with the queue's head, by
// it. Ranks are below 2^17 and orders within ±2^43 (order starts as the
// queue sequence number, far below that), so the key never overflows.
func QueueKey(rank int, order int64) int64 {
	return int64(rank)<<44 + order
}
