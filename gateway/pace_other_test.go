//go:build !linux

package gateway_test

import "time"

// newPacer sleeps until a due time. Outside Linux it has the runtime's
// timer resolution (see pace_linux_test.go), so open-loop figures there are
// coarser.
func newPacer() (wait func(due time.Time) error, release func(), err error) {
	return func(due time.Time) error { time.Sleep(time.Until(due)); return nil }, func() {}, nil
}
