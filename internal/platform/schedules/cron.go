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

// Interval is the shortest time between two firings of a cron
// expression: an @every's interval, or for the others the shortest gap
// between two of its times of day (from one day's last to the next day's
// first too, as if every day fired: a lower bound).
func Interval(expr string) (time.Duration, error) {
	s, err := ParseCron(expr)
	if err != nil {
		return 0, err
	}
	expr = strings.TrimSpace(expr)
	if rest, ok := strings.CutPrefix(expr, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return 0, fmt.Errorf("cron expression %q: %v; give @every and a duration such as 15m", expr, err)
		}
		return d, nil
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return 0, fmt.Errorf("cron expression %q: unexpected schedule %T", expr, s)
	}
	var times []int // minutes of the day it fires at, in order
	for h := 0; h < 24; h++ {
		if spec.Hour&(1<<uint(h)) == 0 {
			continue
		}
		for m := 0; m < 60; m++ {
			if spec.Minute&(1<<uint(m)) != 0 {
				times = append(times, h*60+m)
			}
		}
	}
	if len(times) == 0 {
		return 0, fmt.Errorf("cron expression %q never fires", expr)
	}
	gap := 24*60 - times[len(times)-1] + times[0]
	for i := 1; i < len(times); i++ {
		gap = min(gap, times[i]-times[i-1])
	}
	return time.Duration(gap) * time.Minute, nil
}

// CheckInterval refuses a cron expression that fires more often than
// min, or whose @every is not a positive duration, saying what to give
// instead.
func CheckInterval(expr string, min time.Duration) error {
	d, err := Interval(expr)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("cron expression %q: give a positive interval of at least %s, such as @every %s", strings.TrimSpace(expr), Short(min), Short(min))
	}
	if d < min {
		return fmt.Errorf("cron expression %q fires every %s: schedules fire at most once every %s here; give an interval of at least %s, such as @every %s",
			strings.TrimSpace(expr), Short(d), Short(min), Short(min), Short(min))
	}
	return nil
}

// Short writes a duration without its zero units: 1m, not 1m0s.
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
