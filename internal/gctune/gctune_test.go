package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

func TestPercentRaisesTheHeapGoalToTheFloor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{4 * mib, 64 * mib, 1500},  // goal 4 MiB * 16 = 64 MiB
		{10 * mib, 64 * mib, 500},  // 540 rounded down to a multiple of 50
		{32 * mib, 64 * mib, 100},  // the default already reaches the floor
		{200 * mib, 64 * mib, 100}, // a large heap is collected as before
		{1, 64 * mib, maxPercent},  // a near-empty heap: bounded
		{0, 64 * mib, maxPercent},  // no measure yet
		{30 * mib, 64 * mib, 100},  // 113 rounds down to 100
	} {
		if got := Percent(c.live, c.floor); got != c.want {
			t.Errorf("Percent(live %d MiB, floor %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
		if got := Percent(c.live, c.floor); c.live > 0 && c.floor > 2*c.live && got < maxPercent {
			if goal := c.live * uint64(100+got) / 100; goal > c.floor || goal+c.live/2 < c.floor {
				t.Errorf("live %d B, floor %d B: GOGC %d gives a goal of %d B, not just under the floor", c.live, c.floor, got, goal)
			}
		}
	}
}

// Start sets GOGC from the live heap after each collection, and an
// operator's GOGC wins.
func TestStartTunesAfterEachCollectionUnlessGOGCIsSet(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		// The test's own environment decides: Start must refuse.
		if Start(DefaultFloor) {
			t.Fatal("Start tuned although GOGC or GOMEMLIMIT is set")
		}
		return
	}
	t.Setenv("GOGC", "200")
	if Start(DefaultFloor) {
		t.Fatal("Start tuned although GOGC is set")
	}
	os.Unsetenv("GOGC")
	if Start(0) {
		t.Fatal("Start tuned with a floor of 0")
	}
	defer debug.SetGCPercent(100)
	if !Start(DefaultFloor) {
		t.Fatal("Start refused with nothing set")
	}
	// This test's live heap is a few MiB: GOGC is raised well above 100.
	// The tuning runs after a cycle: each look collects, and the next
	// sees what the last one's tuning set.
	if !eventually.Poll(10*time.Second, func() bool { runtime.GC(); return gogc() > 100 }) {
		t.Fatalf("GOGC is still %d after collections with a live heap far under the floor", gogc())
	}
	// A floor under twice the live heap brings it back to the default at
	// the next collection.
	var ballast = make([][]byte, 0, 64)
	for i := 0; i < 64; i++ {
		ballast = append(ballast, make([]byte, 1<<20))
	}
	Start(1 << 20)
	if !eventually.Poll(10*time.Second, func() bool { runtime.GC(); return gogc() == 100 }) {
		t.Fatalf("GOGC is %d with a floor of 1 MiB and 64 MiB live, want 100", gogc())
	}
	runtime.KeepAlive(ballast)
}

// gogc is the collector's GOGC as the runtime reports it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
