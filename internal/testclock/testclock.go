// Package testclock is the settable clock tests give to a component that
// takes a Now func() time.Time, so that a test lets time pass for a rule
// (a lease expiring, a status interval, a rate window) by moving the clock
// instead of sleeping. It is safe for concurrent use.
package testclock

import (
	"sync"
	"time"
)

// Clock reads the time it was last set or moved to.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads start until it is moved.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
