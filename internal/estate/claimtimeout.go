package estate

import (
	"fmt"
	"strings"
	"time"
)

// Bounds of a pool's claim timeout when it is on: shorter than a minute
// would send work back while a worker restarts or a pod is scheduled;
// longer than a week is as good as never.
const (
	MinClaimTimeout = time.Minute
	MaxClaimTimeout = 7 * 24 * time.Hour
)

// ParseClaimTimeout reads a pool's claimTimeout as written in an estate
// file: a Go duration ("5m", "1h30m") in whole seconds, or "off" (also "0").
func ParseClaimTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "off" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("claimTimeout %q is not a duration: write it like 5m, 90s or 1h30m, or off", s)
	}
	return d, CheckClaimTimeout(d)
}

// CheckClaimTimeout says what is wrong with a claim timeout, if anything:
// 0 (off), or whole seconds from MinClaimTimeout to MaxClaimTimeout.
func CheckClaimTimeout(d time.Duration) error {
	if d == 0 {
		return nil
	}
	if d < MinClaimTimeout || d > MaxClaimTimeout || d%time.Second != 0 {
		return fmt.Errorf("claimTimeout %s must be whole seconds from %s to %s, or off",
			FormatClaimTimeout(d), FormatClaimTimeout(MinClaimTimeout), FormatClaimTimeout(MaxClaimTimeout))
	}
	return nil
}

// FormatClaimTimeout writes a claim timeout as an estate file does: "off",
// or a duration without zero units ("5m", "1h30m", "168h").
func FormatClaimTimeout(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
