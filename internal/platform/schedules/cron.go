package schedules

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser reads the standard 5 fields (minute, hour, day of month,
// month, day of week) and the descriptors (@daily, @every 1h).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a cron expression, in UTC. Seconds (a sixth field) and
// time zones are refused with what to write instead.
func ParseCron(expr string) (cron.Schedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf("the cron expression is empty: give 5 fields (minute hour day-of-month month day-of-week), such as '0 3 * * *', or a descriptor such as @daily")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("cron expression %q: schedules run in UTC; remove the time zone and give the time in UTC", expr)
	}
	if !strings.HasPrefix(expr, "@") {
		switch n := len(strings.Fields(expr)); {
		case n == 6:
			return nil, fmt.Errorf("cron expression %q has 6 fields: seconds are not supported; give 5 fields (minute hour day-of-month month day-of-week), such as '*/5 * * * *'", expr)
		case n != 5:
			return nil, fmt.Errorf("cron expression %q has %d fields: give 5 (minute hour day-of-month month day-of-week), such as '0 3 * * *', or a descriptor such as @daily", expr, n)
		}
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %v; give 5 fields (minute hour day-of-month month day-of-week) or a descriptor such as @hourly", expr, err)
	}
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("cron expression %q never fires (a date that does not exist, such as 30 February)", expr)
	}
	return s, nil
}

// NextRun is the first firing of expr strictly after t, in UTC.
func NextRun(expr string, t time.Time) (time.Time, error) {
	s, err := ParseCron(expr)
	if err != nil {
		return time.Time{}, err
	}
	return s.Next(t.UTC()).UTC(), nil
}
