package platformtest

import (
	"time"

	"github.com/klique-ai/klique/internal/testclock"
)

// Clock is a settable clock, to share between the platform service, the
// authenticator and an engine loop, so that a test moves time for all of
// them at once instead of sleeping: internal/testclock's.
type Clock = testclock.Clock

// NewClock returns a clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return testclock.New(start) }
