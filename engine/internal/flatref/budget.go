package flatref

import (
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// Periods of time budgets follow the UTC calendar: a day from midnight, a
// week from Monday, a month from the 1st. Unused hours do not roll over.

// PeriodStart returns the start of the budget period that holds t.
func PeriodStart(p model.BudgetPeriod, t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case model.PeriodWeek:
		// Go's weeks start on Sunday (0); budget weeks on Monday.
		back := (int(day.Weekday()) + 6) % 7
		return day.AddDate(0, 0, -back)
	case model.PeriodMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return day
}

// PeriodEnd returns the start of the period after the one that holds t:
// when the budget resets.
func PeriodEnd(p model.BudgetPeriod, t time.Time) time.Time {
	start := PeriodStart(p, t)
	switch p {
	case model.PeriodWeek:
		return start.AddDate(0, 0, 7)
	case model.PeriodMonth:
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}

// Overlap returns how much of [start, end) falls in [from, to), zero when
// they do not meet. A zero end means the interval is still open and counts
// up to to.
func Overlap(start, end, from, to time.Time) time.Duration {
	if end.IsZero() || end.After(to) {
		end = to
	}
	if start.Before(from) {
		start = from
	}
	if !end.After(start) {
		return 0
	}
	return end.Sub(start)
}

// MicroBudgetHours is the budget a task is charged for holding capacity for
// d on a profile of weight weightMilli: hours × weight, whatever its GPU
// count, in millionths of a budget hour. It rounds down to the microsecond.
func MicroBudgetHours(d time.Duration, weightMilli int64) int64 {
	// hours × weight × 1e6 = µs / 3.6e9 × weightMilli / 1000 × 1e6
	//                      = µs × weightMilli / 3.6e6
	us := d.Microseconds()
	// Split to keep the product within int64 for long durations.
	return (us/3_600_000)*weightMilli + (us%3_600_000)*weightMilli/3_600_000
}

// MicroGPUHours is the GPU-hours of holding size GPUs for d, in millionths
// of a GPU-hour, so that sums stay exact.
func MicroGPUHours(d time.Duration, size model.MilliGPU) int64 {
	us := d.Microseconds()
	return (us/3_600_000)*int64(size) + (us%3_600_000)*int64(size)/3_600_000
}

// PeriodFloor is the earliest start of a budget period any of the policies
// is in: how far back budget use and engine pauses matter.
func PeriodFloor(policies []*model.ResourcePolicy, now time.Time) time.Time {
	floor := now
	for _, p := range policies {
		if p.Budget != nil {
			if s := PeriodStart(p.Budget.Period, now); s.Before(floor) {
				floor = s
			}
		}
	}
	return floor
}

// Budgeted lists the ids of the policies with a time budget: the ledger
// intervals a budget check reads are theirs.
func Budgeted(policies []*model.ResourcePolicy) []string {
	var ids []string
	for _, p := range policies {
		if p.Budget != nil {
			ids = append(ids, p.ID)
		}
	}
	return ids
}
