package engine_test

import (
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
)

// checkBudgets: a group whose budget is used up starts nothing budgeted
// and has nothing budgeted running after the pass. Weight-0 work is never
// preempted or held for a budget. And the start check: when a group
// started budgeted work and has two or more budgeted tasks running after
// the pass, the remaining budget lasts the low watermark at its rate (the
// last start was checked at exactly that rate, since nothing of a group
// that starts work is preempted later in the same pass).
func checkBudgets(t *rapid.T, pre *engine.Snapshot, d *engine.Decisions, post *engine.Snapshot) {
	weightOf := func(q int) int64 { return pre.Profiles[pre.Queues[q].Profile].WeightMilli }
	groupOf := func(q int) int { return pre.Queues[q].Group }
	for _, p := range d.Preemptions {
		if p.Cause == engine.CauseBudgetUsed && weightOf(p.Queue) == 0 {
			t.Fatalf("weight-0 task %s preempted for a budget", p.TaskID)
		}
	}
	for _, b := range d.Blocked {
		if (b.Constraint == engine.HeldByBudgetUsed || b.Constraint == engine.HeldByLowWatermark) && weightOf(b.Queue) == 0 {
			t.Fatalf("weight-0 queue %s held by a budget: %s", pre.Queues[b.Queue].Name, b.Reason)
		}
	}
	startedBudgeted := make([]int, len(pre.Groups))
	for _, p := range d.Placements {
		if weightOf(p.Queue) > 0 {
			startedBudgeted[groupOf(p.Queue)]++
		}
	}
	rate := make([]int64, len(pre.Groups))
	running := make([]int, len(pre.Groups))
	for _, r := range post.Running {
		if w := weightOf(r.Queue); w > 0 {
			rate[groupOf(r.Queue)] += w
			running[groupOf(r.Queue)]++
		}
	}
	for g := range pre.Groups {
		b := pre.Groups[g].Budget
		if b == nil {
			continue
		}
		if b.Remaining() == 0 && (startedBudgeted[g] > 0 || running[g] > 0) {
			t.Fatalf("group %s has used its budget, yet started %d and still runs %d budgeted tasks", pre.Groups[g].Name, startedBudgeted[g], running[g])
		}
		if startedBudgeted[g] > 0 && running[g] >= 2 && lastsHours(b.Remaining(), rate[g]) < b.LowWatermark.Hours() {
			t.Fatalf("group %s started budgeted work whose remaining budget (%d µh) lasts under the low watermark %s at rate %d", pre.Groups[g].Name, b.Remaining(), b.LowWatermark, rate[g])
		}
	}
}

// lastsHours is how long rem micro budget-hours last at rateMilli
// thousandths of a budget hour per hour: the rule of the pass's start check
// (a start needs the remaining budget to last the low watermark), restated
// here because the engine does not export it. It keeps the pass's float
// arithmetic so that the checks agree with the pass exactly at the boundary.
func lastsHours(rem, rateMilli int64) float64 {
	return (float64(rem) / 1e6) / (float64(rateMilli) / 1000)
}

// checkLedger checks the ledger arithmetic: GPU time accumulated step by
// step as the clock advanced equals the sum over the recorded placement
// intervals (closed, and open ones up to now), exactly in milli-GPU ×
// microseconds; MicroGPUHours over the intervals rounds each one down, so
// it falls short of the exact figure by less than one unit per interval;
// and cutting every interval at day boundaries with Overlap loses nothing.
func (w *world) checkLedger(t *rapid.T) {
	var exact, micro int64
	for _, iv := range w.intervals {
		end := iv.end
		if end.IsZero() {
			end = w.s.Now
		}
		d := end.Sub(iv.start)
		exact += int64(iv.size) * d.Microseconds()
		micro += engine.MicroGPUHours(d, iv.size)

		var cut time.Duration
		for day := engine.PeriodStart(model.PeriodDay, iv.start); day.Before(end); day = engine.PeriodEnd(model.PeriodDay, day) {
			cut += engine.Overlap(iv.start, iv.end, day, earlier(engine.PeriodEnd(model.PeriodDay, day), w.s.Now))
		}
		if cut != d {
			t.Fatalf("interval %+v cut at day boundaries sums to %s, want %s", iv, cut, d)
		}
	}
	if exact != w.exact {
		t.Fatalf("GPU time accumulated step by step is %d mGPU·µs, the placement intervals sum to %d", w.exact, exact)
	}
	const perMicroHour = 3_600_000 // mGPU·µs in one µGPU-h
	if micro*perMicroHour > exact || exact-micro*perMicroHour >= int64(len(w.intervals)+1)*perMicroHour {
		t.Fatalf("MicroGPUHours over %d intervals = %d µGPU-h, exact %d mGPU·µs", len(w.intervals), micro, exact)
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
