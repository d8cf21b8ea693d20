package engine_test

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
	"github.com/klique-ai/klique/internal/model"
)

func TestPeriodsFollowTheUTCCalendar(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		period     model.BudgetPeriod
		at         string
		start, end string
	}{
		{model.PeriodDay, "2026-11-25T13:45:00Z", "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		{model.PeriodDay, "2026-11-25T00:00:00Z", "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		{model.PeriodWeek, "2026-11-25T13:45:00Z", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"}, // a Wednesday
		{model.PeriodWeek, "2026-11-29T23:59:59Z", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"}, // Sunday ends the week
		{model.PeriodWeek, "2026-11-30T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"}, // Monday starts one
		{model.PeriodMonth, "2026-12-31T23:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{model.PeriodMonth, "2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		// A time in another zone is read in UTC: 01:00 in Berlin on the
		// 26th is still the 25th in UTC.
		{model.PeriodDay, "2026-11-26T01:00:00+02:00", "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
	}
	for _, c := range cases {
		at := utc(c.at)
		if got := engine.PeriodStart(c.period, at); !got.Equal(utc(c.start)) {
			t.Errorf("%s period of %s starts %s, want %s", c.period, c.at, got, c.start)
		}
		if got := engine.PeriodEnd(c.period, at); !got.Equal(utc(c.end)) {
			t.Errorf("%s period of %s ends %s, want %s", c.period, c.at, got, c.end)
		}
	}
}

func TestOverlapCutsIntervalsAtPeriodBoundaries(t *testing.T) {
	h := func(n float64) time.Time { return enginetest.T0.Add(time.Duration(n * float64(time.Hour))) }
	cases := []struct {
		name                 string
		start, end, from, to time.Time
		want                 time.Duration
	}{
		{"inside", h(1), h(2), h(0), h(10), time.Hour},
		{"starts before the range", h(-1), h(2), h(0), h(10), 2 * time.Hour},
		{"ends after the range", h(9), h(12), h(0), h(10), time.Hour},
		{"open, counted up to the end of the range", h(8), time.Time{}, h(0), h(10), 2 * time.Hour},
		{"outside", h(11), h(12), h(0), h(10), 0},
		{"touching the end", h(10), h(12), h(0), h(10), 0},
	}
	for _, c := range cases {
		if got := engine.Overlap(c.start, c.end, c.from, c.to); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestBudgetHoursArePerTaskTimesWeight(t *testing.T) {
	if got := engine.MicroBudgetHours(90*time.Minute, 2000); got != 3_000_000 {
		t.Fatalf("90 min at weight 2 = %d µh, want 3 h", got)
	}
	if got := engine.MicroBudgetHours(time.Hour, 0); got != 0 {
		t.Fatalf("weight 0 charged %d", got)
	}
	// A year at weight 1000 does not overflow.
	if got := engine.MicroBudgetHours(365*24*time.Hour, 1_000_000); got != 365*24*1000*1_000_000 {
		t.Fatalf("a year at weight 1000 = %d", got)
	}
	if got := engine.MicroGPUHours(30*time.Minute, model.GPUs(8)); got != 4_000_000 {
		t.Fatalf("8 GPUs for 30 min = %d µGPU-h, want 4", got)
	}
}
