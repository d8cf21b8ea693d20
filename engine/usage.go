package engine

import (
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// BudgetUsed computes what each budgeted policy has been charged in its
// current period up to now: for every ledger interval of the policy, the
// hours it held capacity inside the period, less the time the engine was
// disabled, times the profile's time weight. Intervals of other policies
// and weight-0 intervals are ignored. It is BudgetUsedInTree for a flat
// estate.
func BudgetUsed(policies []*model.ResourcePolicy, intervals []*model.Placement, pauses []*model.EnginePause, now time.Time) map[string]int64 {
	return BudgetUsedInTree(policies, nil, intervals, pauses, now)
}

// BudgetUsedInTree is BudgetUsed for an organisation tree: parents maps a
// policy's id to the id of the policy of the department it sits in (absent
// for a node under the tenant). A department's time budget covers its
// teams' work, so an interval of a team's policy is charged to the team's
// budget and to every budgeted department above it, each in its own
// period. The caller gives the intervals of every policy under a budgeted
// department, budgeted or not (BudgetedInTree lists them). Weight-0
// intervals are exempt at every level.
func BudgetUsedInTree(policies []*model.ResourcePolicy, parents map[string]string, intervals []*model.Placement, pauses []*model.EnginePause, now time.Time) map[string]int64 {
	starts := map[string]time.Time{}
	for _, p := range policies {
		if p.Budget != nil {
			starts[p.ID] = PeriodStart(p.Budget.Period, now)
		}
	}
	used := map[string]int64{}
	for _, iv := range intervals {
		if iv.WeightMilli == 0 {
			continue
		}
		// The interval's policy, then its departments, bounded by the
		// number of policies so that a cycle in parents cannot loop.
		id := iv.PolicyID
		for steps := 0; id != "" && steps <= len(policies); steps++ {
			if start, ok := starts[id]; ok {
				if held := chargedHeld(iv, pauses, start, now); held > 0 {
					used[id] += MicroBudgetHours(held, iv.WeightMilli)
				}
			}
			id = parents[id]
		}
	}
	return used
}

// BudgetedInTree lists the ids of the policies whose ledger intervals a
// budget check reads: those with a time budget and, in a tree (parents as
// for BudgetUsedInTree), every policy below a department with one.
func BudgetedInTree(policies []*model.ResourcePolicy, parents map[string]string) []string {
	budgeted := map[string]bool{}
	for _, p := range policies {
		budgeted[p.ID] = p.Budget != nil
	}
	var ids []string
	for _, p := range policies {
		id := p.ID
		for steps := 0; id != "" && steps <= len(policies); steps++ {
			if budgeted[id] {
				ids = append(ids, p.ID)
				break
			}
			id = parents[id]
		}
	}
	return ids
}

// chargedHeld is how long the interval held capacity in the period that
// starts at start, up to now, less the time the engine was disabled.
func chargedHeld(iv *model.Placement, pauses []*model.EnginePause, start, now time.Time) time.Duration {
	var end time.Time
	if iv.EndedAt != nil {
		end = *iv.EndedAt
	}
	held := Overlap(iv.StartedAt, end, start, now)
	if held <= 0 {
		return 0
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
	return held
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
