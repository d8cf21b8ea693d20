// Package gctune keeps the Go collector from running many times a second
// in a process whose live heap is small but whose allocation rate is high.
//
// The LLM gateway is such a process: a few megabytes live, and 17 to 20 KB
// allocated per call (two HTTP legs, the limiter, the ledger row). With the
// collector at its default (GOGC=100) the heap goal is twice the live heap,
// so at 5,000 calls a second it collected about 28 times a second, and each
// collection's stop-the-world phases and assists fell on calls in flight:
// they were the largest part of the gateway's tail latency. A floor on the
// heap goal spaces collections out: the collector runs when the heap
// reaches max(floor, what GOGC=100 gives), so a small live heap is
// collected a few times a second instead, and a large one exactly as
// before. The price is up to floor bytes of memory that would otherwise
// have been returned sooner.
//
// This is the "GC tuner" technique (the heap goal is raised by adjusting
// GOGC after each collection from the live heap the collector measured).
// It stays out of the way of an operator's own choice: when GOGC or
// GOMEMLIMIT is set in the environment, nothing is tuned.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultFloor is the heap goal below which `klique serve` does not collect.
const DefaultFloor = 64 << 20

// maxPercent bounds GOGC, so that a near-empty heap is still collected
// before it grows far past the floor.
const maxPercent = 5000

var (
	once  sync.Once
	floor atomic.Uint64
	// percent is the GOGC last set, to skip setting it when unchanged.
	percent atomic.Int64
)

// Start keeps the heap goal at least floorBytes for the life of the
// process. It returns false, and changes nothing, when floorBytes is 0 or
// the environment sets GOGC or GOMEMLIMIT. Calling it again changes the
// floor.
func Start(floorBytes uint64) bool {
	if floorBytes == 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	floor.Store(floorBytes)
	once.Do(func() {
		percent.Store(100)
		tune()
		arm()
	})
	return true
}

// arm runs tune after the next collection: a sentinel object is made
// unreachable at once, and its cleanup runs once a collection has found it
// so, then arms the next.
func arm() {
	sentinel := new([16]byte) // not a tiny allocation, which may never be cleaned up
	runtime.AddCleanup(sentinel, func(struct{}) {
		tune()
		arm()
	}, struct{}{})
}

// tune sets GOGC so that the next heap goal is at least the floor.
func tune() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	live := uint64(1)
	if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > 0 {
		live = s[0].Value.Uint64()
	}
	p := Percent(live, floor.Load())
	if percent.Swap(int64(p)) != int64(p) {
		debug.SetGCPercent(p)
	}
}

// Percent is the GOGC that makes the heap goal, live*(1+GOGC/100), at least
// floor: never below Go's default of 100, never above maxPercent. It is
// rounded down to a multiple of 50 so that small changes in the live heap
// do not reset it after every collection.
func Percent(live, floor uint64) int {
	if live == 0 {
		live = 1
	}
	if floor <= 2*live {
		return 100
	}
	p := (floor - live) * 100 / live
	if p > maxPercent {
		return maxPercent
	}
	p -= p % 50
	if p < 100 {
		return 100
	}
	return int(p)
}
