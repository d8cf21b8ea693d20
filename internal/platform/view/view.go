// Package view holds the read models that more than one domain of the
// platform builds or shows: a group's use against its policy, a worker as
// the orchestration view shows it, a page of a task's log. They are plain
// values; the domains fill them.
package view

import (
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
)

// PolicyView is a group's use against its policy: what a team lead and its
// developers see, and what admins see for every group.
type PolicyView struct {
	Policy *model.ResourcePolicy
	Group  *model.Group
	// Held is the GPUs the group's work holds now (placed or running);
	// Borrowed is the part above its reservation.
	Held, Borrowed model.MilliGPU
	// Holding counts the group's tasks that hold capacity (placed or
	// running); Waiting those queued.
	Holding int
	Waiting int
	Budget  *BudgetView
	// ComputeResources are the policy's compute resources.
	ComputeResources []*model.ComputeResource
}

// BudgetView is a time budget in its current period.
type BudgetView struct {
	Period model.BudgetPeriod
	// Total, Used and Left are in micro budget-hours.
	Total, Used, Left int64
	// BurnRateMilli is budget hours per hour, in thousandths, of the
	// group's running budgeted work.
	BurnRateMilli int64
	// RunsOutAt is when the budget is projected to run out at the current
	// burn rate, nil when it will not before the reset.
	RunsOutAt *time.Time
	ResetsAt  time.Time
	// AlertThresholdPercent and Alert: the share of the budget used that
	// raises an alert, and whether it is reached.
	AlertThresholdPercent int
	Alert                 bool
	UsedUp                bool
}

// Budget is a policy's time budget in its current period, given what the
// period has used and the burn rate (budget hours per hour, in
// thousandths) of the group's running budgeted work.
func Budget(pol *model.ResourcePolicy, used, rateMilli int64, now time.Time) *BudgetView {
	b := pol.Budget
	v := &BudgetView{Period: b.Period, Total: b.MilliHours * 1000, Used: used, BurnRateMilli: rateMilli,
		ResetsAt: engine.PeriodEnd(b.Period, now), AlertThresholdPercent: pol.AlertThresholdPercent}
	v.Left = max(0, v.Total-v.Used)
	v.UsedUp = v.Left == 0
	v.Alert = v.Used*100 >= v.Total*int64(pol.AlertThresholdPercent)
	if rateMilli > 0 && !v.UsedUp {
		hours := (float64(v.Left) / 1e6) / (float64(rateMilli) / 1000)
		at := now.Add(time.Duration(hours * float64(time.Hour)))
		if at.Before(v.ResetsAt) {
			v.RunsOutAt = &at
		}
	}
	return v
}

// WorkerView is a registered worker as the orchestration view shows it.
type WorkerView struct {
	*model.Worker
	PoolName string
	// Online is false when the worker has missed its heartbeats for longer
	// than a lease.
	Online bool
}

// LogPage is a page of a task's log.
type LogPage struct {
	Lines     []model.LogLine
	LastSeq   int64
	Truncated bool
}

// Workers lists workers as the orchestration view shows them: with their
// pool's name, and online while their last heartbeat is within a lease.
func Workers(ws []*model.Worker, e *estate.Estate, now time.Time, lease time.Duration) []*WorkerView {
	out := make([]*WorkerView, 0, len(ws))
	for _, w := range ws {
		v := &WorkerView{Worker: w, Online: now.Sub(w.LastHeartbeatAt) <= lease}
		if pool := e.Pool(w.PoolID); pool != nil {
			v.PoolName = pool.Name
		}
		out = append(out, v)
	}
	return out
}
