//go:build !linux

package pgroup

import "time"

// CPUTime is not read outside Linux: ok is false.
func (p *Proc) CPUTime() (time.Duration, bool) { return 0, false }
