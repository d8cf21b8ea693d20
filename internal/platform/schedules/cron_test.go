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
