package engine

import (
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// BudgetUsed computes what each budgeted policy has been charged in its
// current period up to now: for every ledger interval of the policy, the
// hours it held capacity inside the period, less the time the engine was
// disabled, times the profile's time weight. Intervals of other policies
// and weight-0 intervals are ignored.
func BudgetUsed(policies []*model.ResourcePolicy, intervals []*model.Placement, pauses []*model.EnginePause, now time.Time) map[string]int64 {
	starts := map[string]time.Time{}
	for _, p := range policies {
		if p.Budget != nil {
			starts[p.ID] = PeriodStart(p.Budget.Period, now)
		}
	}
	used := map[string]int64{}
	for _, iv := range intervals {
		start, ok := starts[iv.PolicyID]
		if !ok || iv.WeightMilli == 0 {
			continue
		}
		var end time.Time
		if iv.EndedAt != nil {
			end = *iv.EndedAt
		}
		held := Overlap(iv.StartedAt, end, start, now)
		if held <= 0 {
			continue
		}
		// Cut out the time the engine was disabled.
		from := maxTime(iv.StartedAt, start)
		to := now
		if iv.EndedAt != nil && iv.EndedAt.Before(to) {
			to = *iv.EndedAt
		}
		for _, p := range pauses {
			var pend time.Time
			if p.EndedAt != nil {
				pend = *p.EndedAt
			}
			held -= Overlap(p.StartedAt, pend, from, to)
		}
		if held > 0 {
			used[iv.PolicyID] += MicroBudgetHours(held, iv.WeightMilli)
		}
	}
	return used
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
