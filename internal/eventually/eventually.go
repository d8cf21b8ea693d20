// Package eventually is the one way tests wait for something another
// goroutine or process does: poll a condition until it holds, failing the
// test with what it waited for once a deadline passes. It polls at once,
// then every millisecond, backing off to every 20 ms, so a condition that
// holds soon costs no fixed sleep.
package eventually

import (
	"testing"
	"time"
)

// Timeout is how long True waits.
const Timeout = 10 * time.Second

// True waits up to Timeout for cond to hold; what names it in the failure
// ("the task to finish").
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within waits up to timeout for cond to hold.
func Within(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		if what == "" {
			what = "the condition"
		}
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Poll reports whether cond held within timeout, for a caller that goes on
// either way.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 20*time.Millisecond)
	}
	return true
}
