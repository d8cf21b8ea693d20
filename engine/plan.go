package engine

import (
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// A Plan is one pass over one tenant, ready to apply: the decisions, the
// snapshot and model they were made on, what the audit trail and the
// ledger need to know of each task, and the budget alerts to raise. The
// loop builds it; a planner (the allocation domain) is the only writer,
// and applies it in one transaction (see the loop's Planner).
type Plan struct {
	TenantID string
	Now      time.Time
	Model    *Model
	Snapshot *Snapshot
	// Decisions are the pass's. A planner that finds the engine disabled
	// when it applies them applies Disabled(Snapshot) instead.
	Decisions *Decisions
	// Disabled says the snapshot was read with the engine disabled (so
	// Decisions hold every queue already).
	Disabled bool
	// Tasks are the tasks of the snapshot by id.
	Tasks map[string]TaskRef
	// Alerts are the budget alerts to raise with this pass.
	Alerts []Alert
	// Lease is the engine lease the pass runs under: the planner renews it
	// in its transaction and writes nothing if it was lost.
	Lease Lease
	// EstateVersion is the version of the allocation model the pass read.
	// The planner fails tasks (Decisions.Failures) only if it is still the
	// current one: a failure cannot be undone, so one decided on an estate
	// an admin has changed since is left to the next pass.
	EstateVersion int64
}

// TaskRef is what applying a decision needs of a task beyond its place in
// the snapshot: its name for the audit trail, and its owner, project and
// size for the ledger.
type TaskRef struct {
	Name      string
	OwnerID   string
	ProjectID string
	Size      model.Size
}

// Lease names the lease that lets one replica at a time run passes.
type Lease struct {
	Name   string
	Holder string
	TTL    time.Duration
}

// Applied says what applying a plan did.
type Applied struct {
	Placed, Preempted, Failed int
	// Disabled: the engine was disabled when the plan was applied (or
	// already when it was made): nothing was placed or preempted.
	Disabled bool
	// LeaseLost: another replica holds the engine lease; nothing was
	// written.
	LeaseLost bool
}

// ConstraintDisabled holds every queue while an admin has the engine
// disabled.
const ConstraintDisabled Constraint = "engine_disabled"

// PreemptedPrefix starts the reason a preempted task carries back to its
// queue, so that what a developer sees says both why it was stopped and why
// it waits now.
const PreemptedPrefix = "preempted: "

// Disabled holds every queue with waiting work: nothing is placed or
// preempted while the engine is disabled.
func Disabled(s *Snapshot) *Decisions {
	d := &Decisions{}
	for q := range s.Queues {
		if len(s.Queues[q].Waiting) > 0 {
			d.Blocked = append(d.Blocked, Blocked{Queue: q, TaskID: s.Queues[q].Waiting[0].ID, Constraint: ConstraintDisabled,
				Reason: "the compute policy engine is disabled by an admin; nothing is placed until it is enabled again"})
		}
	}
	return d
}

// MorePending reports whether some queue placed every task the pass read
// of it while more may wait behind: another pass should follow at once.
func MorePending(s *Snapshot, d *Decisions, perQueue int) bool {
	placed := make(map[int]int)
	for _, p := range d.Placements {
		placed[p.Queue]++
	}
	// A failed task leaves its queue too: a queue whose tasks were all
	// placed or failed may have more behind them.
	for _, f := range d.Failures {
		placed[f.Queue]++
	}
	for q, n := range placed {
		if len(s.Queues[q].Waiting) >= perQueue && n == len(s.Queues[q].Waiting) {
			return true
		}
	}
	return false
}

// Alert is a budget alert: a group's use reached its policy's alert
// threshold, or used the budget up, in the current period.
type Alert struct {
	// Key names the alert once per tenant, policy, period and level, so
	// that it is raised once.
	Key      string
	PolicyID string
	GroupID  string
	Group    string
	// Detail is the sentence the audit trail records.
	Detail string
}

// BudgetAlerts lists the alerts a snapshot's budgets call for: one when a
// group's use reaches its policy's alert threshold, another when the
// budget is used up. The loop raises each once per period.
func BudgetAlerts(tenantID string, m *Model, snap *Snapshot, now time.Time) []Alert {
	var out []Alert
	for g, grp := range snap.Groups {
		b := grp.Budget
		if b == nil || b.Total <= 0 {
			continue
		}
		pol := m.Policies[g]
		period := PeriodStart(b.Period, now).Format(time.RFC3339)
		level, what := "", ""
		switch {
		case b.Used >= b.Total:
			level, what = "used_up", "has used up"
		case b.Used*100 >= b.Total*int64(pol.AlertThresholdPercent):
			level, what = "threshold", fmt.Sprintf("has used %d%% of", b.Used*100/b.Total)
		default:
			continue
		}
		detail := fmt.Sprintf("group %s %s its %s time budget of %s h; it resets %s", grp.Name, what,
			periodAdjective(b.Period),
			FormatMicroHours(b.Total), resetText(b))
		out = append(out, Alert{Key: tenantID + "/" + pol.ID + "/" + period + "/" + level, PolicyID: pol.ID,
			GroupID: pol.GroupID, Group: grp.Name, Detail: detail})
	}
	return out
}
