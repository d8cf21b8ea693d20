package gateway_test

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// newPacer returns a function that blocks until a due time, to within some
// tens of microseconds. time.Sleep cannot: when no goroutine is runnable,
// Go's runtime waits in epoll with a millisecond's resolution, so a sleep of
// 200 µs lasts about a millisecond, and an open loop paced by it sends its
// calls in bursts of five each millisecond instead of one every 200 µs
// (each call then counted late by up to a millisecond, both ways). The
// pacer waits on a timerfd(2) in Go's network poller instead: the poller
// wakes when the timer fires, and no thread or processor is held while it
// waits.
func newPacer() (wait func(due time.Time) error, release func(), err error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("timerfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "pacer")
	var expirations [8]byte
	wait = func(due time.Time) error {
		d := time.Until(due)
		if d <= 0 {
			return nil
		}
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
		if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
			return fmt.Errorf("timerfd_settime: %w", err)
		}
		if _, err := f.Read(expirations[:]); err != nil {
			return fmt.Errorf("read the timerfd: %w", err)
		}
		return nil
	}
	return wait, func() { _ = f.Close() }, nil
}
