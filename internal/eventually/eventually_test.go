package eventually

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	if !Poll(5*time.Second, func() bool { return n.Add(1) >= 5 }) {
		t.Fatal("a condition that holds at the fifth look timed out")
	}
	if n.Load() != 5 {
		t.Errorf("looked %d times; want 5", n.Load())
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s for five looks", d)
	}
}

func TestPollGivesUpAtItsDeadline(t *testing.T) {
	start := time.Now()
	if Poll(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %s; want about 50ms", d)
	}
}
