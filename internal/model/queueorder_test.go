package model

import (
	"cmp"
	"testing"
)

// TestQueueKeySortsAsRankThenOrder: the engine orders a queue by the one
// number, so it must compare as (rank, order) does over the ranges the
// store hands out, negative orders (moves to the front) included.
func TestQueueKeySortsAsRankThenOrder(t *testing.T) {
	ranks := []int{0, 1, 2, MaxProjectPriorities - 1, QueueRankUnlisted}
	orders := []int64{-(1 << 43) + 1, -5, -1, 0, 1, 2, 1 << 40, (1 << 43) - 1}
	for _, r1 := range ranks {
		for _, o1 := range orders {
			for _, r2 := range ranks {
				for _, o2 := range orders {
					want := cmp.Or(cmp.Compare(r1, r2), cmp.Compare(o1, o2))
					if got := cmp.Compare(QueueKey(r1, o1), QueueKey(r2, o2)); got != want {
						t.Fatalf("QueueKey(%d, %d) vs QueueKey(%d, %d): %d, want %d", r1, o1, r2, o2, got, want)
					}
				}
			}
		}
	}
}
