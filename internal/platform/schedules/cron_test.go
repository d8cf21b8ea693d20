package schedules

import (
	"strings"
	"testing"
	"time"
)

func TestCronExpressionsAndTheirNextRuns(t *testing.T) {
	at := time.Date(2026, 3, 14, 10, 7, 30, 0, time.UTC)
	cases := []struct {
		expr string
		want time.Time
	}{
		{"*/5 * * * *", time.Date(2026, 3, 14, 10, 10, 0, 0, time.UTC)},
		{"0 3 * * *", time.Date(2026, 3, 15, 3, 0, 0, 0, time.UTC)},
		{"30 9 * * 1", time.Date(2026, 3, 16, 9, 30, 0, 0, time.UTC)}, // the next Monday
		{"@daily", time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)},
		{"@hourly", time.Date(2026, 3, 14, 11, 0, 0, 0, time.UTC)},
		{"@every 90m", at.Add(90 * time.Minute)},
		{"0 0 1 * *", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := NextRun(c.expr, at)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("%q after %s: %s, want %s", c.expr, at, got, c.want)
		}
	}
	// The next run is in UTC whatever the zone of the time given.
	local := at.In(time.FixedZone("X", 5*3600))
	if got, _ := NextRun("0 3 * * *", local); !got.Equal(time.Date(2026, 3, 15, 3, 0, 0, 0, time.UTC)) || got.Location() != time.UTC {
		t.Errorf("from a zoned time: %s", got)
	}
}

func TestCronRefusalsSayWhatToWrite(t *testing.T) {
	cases := map[string]string{
		"":                      "empty",
		"0 */5 * * * *":         "seconds are not supported",
		"* * *":                 "3 fields",
		"61 * * * *":            "give 5 fields",
		"CRON_TZ=UTC 0 3 * * *": "UTC",
		"@fortnightly":          "descriptor",
		"0 0 30 2 *":            "never fires",
	}
	for expr, want := range cases {
		_, err := ParseCron(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", expr, err, want)
		}
	}
}

// The shortest time between two firings of a cron expression, which
// CheckInterval holds to the minimum interval (issue 39 defect 9): an
// @every's interval (refused when not positive), and for the others the
// shortest gap between two times of day, across midnight too.
func TestCronIntervals(t *testing.T) {
	for _, c := range []struct {
		expr string
		want time.Duration
	}{
		{"* * * * *", time.Minute},
		{"*/5 * * * *", 5 * time.Minute},
		{"0 3 * * *", 24 * time.Hour},
		{"@hourly", time.Hour},
		{"@daily", 24 * time.Hour},
		{"@every 90s", 90 * time.Second},
		{"@every 1ms", time.Millisecond},
		{"0,59 0,23 * * *", time.Minute}, // 23:59, then 00:00
		{"0 9,17 * * 1-5", 8 * time.Hour},
	} {
		got, err := Interval(c.expr)
		if err != nil || got != c.want {
			t.Errorf("Interval(%q) = %s, %v; want %s", c.expr, got, err, c.want)
		}
	}
	for _, c := range []struct{ expr, want string }{
		{"@every 1s", "fires every 1s: schedules fire at most once every 1m here; give an interval of at least 1m, such as @every 1m"},
		{"@every 0s", "give a positive interval of at least 1m"},
		{"@every -1s", "give a positive interval of at least 1m"},
		{"*/10 * * * * *", "seconds are not supported"},
	} {
		err := CheckInterval(c.expr, time.Minute)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckInterval(%q): %v; want it refused with %q", c.expr, err, c.want)
		}
	}
	for _, expr := range []string{"* * * * *", "@every 1m", "@every 1h30m", "0 3 * * *"} {
		if err := CheckInterval(expr, time.Minute); err != nil {
			t.Errorf("CheckInterval(%q): %v; want it accepted", expr, err)
		}
	}
	if err := CheckInterval("*/2 * * * *", 5*time.Minute); err == nil || !strings.Contains(err.Error(), "fires every 2m") {
		t.Errorf("every 2 minutes under a minimum of 5m: %v", err)
	}
}
