package loop_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

const flexEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: big, kind: kubernetes, capacity: BIG, gpuClass: h100}
  - {name: small, kind: kubernetes, capacity: 4, gpuClass: h100}
profiles:
  - {name: flex, sizeFromParameter: {parameter: gpus, default: 1}, pools: [big, small]}
groups:
  - {name: A}
policies:
  - group: A
    reservation: 0
    limit: 16
    computeResources: [{name: flex, profile: flex}]
projects:
  - {name: research}
`

// TestShrunkPool: an admin lowers a pool's capacity below what is placed
// on it and below what waits for it. The work over the new capacity is
// preempted at the next pass with a reason naming the change; waiting work
// that no pool of its profile can hold any more fails with the reason,
// instead of holding the task behind it for ever; and the task behind is
// placed.
func TestShrunkPool(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(strings.Replace(flexEstate, "BIG", "8", 1))
		submit := func(gpus string) *model.Task {
			task, err := w.Svc.EnqueueTask(w.Admin, platform.EnqueueInput{Name: "train-" + gpus, Project: "research", ComputeResource: "flex",
				Spec: model.TaskSpec{Command: []string{"true"}, Parameters: map[string]string{"gpus": gpus}}})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		running := submit("8")
		if r := w.pass(); r.Placed != 1 {
			t.Fatalf("report %+v, want the 8-GPU task placed", r)
		}
		big, behind := submit("6"), submit("1")
		if r := w.pass(); r.Placed != 0 {
			t.Fatalf("report %+v, want the 6-GPU head to hold the queue", r)
		}

		w.apply(strings.Replace(flexEstate, "BIG", "4", 1))
		r := w.pass()
		if r.Preempted != 1 || r.Failed != 1 || r.Placed != 0 {
			t.Fatalf("report %+v, want the 8-GPU task preempted and the 6-GPU task failed", r)
		}
		got := w.task(running.ID)
		if got.Status != model.TaskQueued || !strings.Contains(got.Reason, "pool big's capacity was lowered to 4 GPUs, below the 8 GPUs placed on it") {
			t.Fatalf("the placed task is %s: %q, want it requeued with the capacity change named", got.Status, got.Reason)
		}
		got = w.task(big.ID)
		want := "failed: it can never be placed: it needs 6 GPUs, and no pool of profile flex declares that many (the largest, big, declares 4)"
		if got.Status != model.TaskFailed || !strings.HasPrefix(got.Reason, want) || got.FinishedAt == nil {
			t.Fatalf("the 6-GPU task is %s: %q, want failed with %q", got.Status, got.Reason, want)
		}
		if a := w.AuditLog(t); !hasAudit(a, "task.failed", big.ID) {
			t.Fatalf("no task.failed audit entry for the 6-GPU task")
		}

		// The preempted task is now larger than any pool: it fails at the
		// next pass, and the 1-GPU task behind it runs.
		r = w.pass()
		if r.Failed != 1 || r.Placed != 1 {
			t.Fatalf("report %+v, want the 8-GPU task failed and the 1-GPU task placed", r)
		}
		if got := w.task(running.ID); got.Status != model.TaskFailed {
			t.Fatalf("the 8-GPU task is %s: %q", got.Status, got.Reason)
		}
		if got := w.task(behind.ID); got.Status != model.TaskPlaced {
			t.Fatalf("the task behind is %s: %q, want placed", got.Status, got.Reason)
		}
		w.consistent(behind.TenantID)
	})
}

// TestLoweredLimitPreempts: a group's limit lowered below what it holds
// is enforced at the next pass: its newest work is preempted, with the
// change named, until it is within the limit.
func TestLoweredLimitPreempts(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(strings.Replace(flexEstate, "BIG", "8", 1))
		var tasks []*model.Task
		for i := 0; i < 4; i++ {
			task, err := w.Svc.EnqueueTask(w.Admin, platform.EnqueueInput{Name: "train", Project: "research", ComputeResource: "flex",
				Spec: model.TaskSpec{Command: []string{"true"}}})
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, task)
			w.Clock.Add(time.Minute)
			if r := w.pass(); r.Placed != 1 {
				t.Fatalf("report %+v, want one placed", r)
			}
		}
		w.apply(strings.Replace(strings.Replace(flexEstate, "BIG", "8", 1), "limit: 16", "limit: 3", 1))
		if r := w.pass(); r.Preempted != 1 {
			t.Fatalf("report %+v, want one task preempted", r)
		}
		got := w.task(tasks[3].ID)
		if got.Status != model.TaskQueued || !strings.Contains(got.Reason, "group A's limit was lowered to 3 GPUs, below the 4 GPUs it held") {
			t.Fatalf("the newest task is %s: %q, want it requeued with the limit change named", got.Status, got.Reason)
		}
		for _, task := range tasks[:3] {
			if got := w.task(task.ID); got.Status != model.TaskPlaced {
				t.Fatalf("older task %s is %s, want still placed", task.ID, got.Status)
			}
		}
		w.consistent(got.TenantID)
	})
}

func hasAudit(entries []*model.AuditEntry, action, id string) bool {
	for _, e := range entries {
		if e.Action == action && e.ObjectID == id {
			return true
		}
	}
	return false
}

// TestLowWatermarkHeadSaysItCanStartSooner: a head held only by the low
// watermark says, in its reason and its queue state, both that it starts
// once the group's running budgeted work ends and that the reset is the
// latest; and it does start once that work ends.
func TestLowWatermarkHeadSaysItCanStartSooner(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		w.apply(strings.Replace(strings.Replace(flexEstate, "BIG", "8", 1), "    limit: 16\n", "    limit: 16\n    timeBudget: {hours: 1, period: week}\n", 1))
		submit := func() *model.Task {
			task, err := w.Svc.EnqueueTask(w.Admin, platform.EnqueueInput{Name: "train", Project: "research", ComputeResource: "flex",
				Spec: model.TaskSpec{Command: []string{"true"}}})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		first := submit()
		if r := w.pass(); r.Placed != 1 {
			t.Fatalf("report %+v, want the first task placed", r)
		}
		// 0.9 of the hour used: 6 minutes left, 3 at the rate with a
		// second task, under the 15-minute watermark.
		w.Clock.Add(54 * time.Minute)
		second := submit()
		if r := w.pass(); r.Placed != 0 {
			t.Fatalf("report %+v, want the second task held", r)
		}
		qs, err := w.Svc.QueueState(w.Admin, second.ComputeResourceID)
		if err != nil {
			t.Fatal(err)
		}
		reset := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		if qs == nil || qs.Constraint != "budget_low_watermark" || !qs.OrWhenRunningWorkEnds() || qs.Until == nil || !qs.Until.Equal(reset) ||
			!strings.Contains(qs.Reason, "it can start once the group's running budgeted work ends") || !strings.Contains(qs.Reason, "or when the budget resets Monday 2026-11-30 00:00 UTC") {
			t.Fatalf("queue state %+v, want the low watermark with both ways out", qs)
		}
		reason, err := w.Svc.TaskReason(w.Admin, w.task(second.ID))
		if err != nil || !strings.Contains(reason, "once the group's running budgeted work ends") {
			t.Fatalf("task reason %q, %v", reason, err)
		}
		if _, err := w.Svc.AbortTask(w.Admin, first.ID, ""); err != nil {
			t.Fatal(err)
		}
		if r := w.pass(); r.Placed != 1 {
			t.Fatalf("report %+v, want the second task placed once the first ended, before the reset", r)
		}
	})
}

// TestLimitZeroPausesGroup: an admin pauses a group by applying its limit
// as 0 (docs/engine.md). The estate is accepted although the group's
// profile is larger than 0; the group's placed work is not preempted;
// enqueue still accepts its work, which waits, queued, with a reason that
// says the group is paused; raising the limit places it.
func TestLimitZeroPausesGroup(t *testing.T) {
	forEachStore(t, func(t *testing.T, w *world) {
		open := strings.Replace(flexEstate, "BIG", "8", 1)
		w.apply(open)
		submit := func() *model.Task {
			task, err := w.Svc.EnqueueTask(w.Admin, platform.EnqueueInput{Name: "train", Project: "research", ComputeResource: "flex",
				Spec: model.TaskSpec{Command: []string{"true"}}})
			if err != nil {
				t.Fatalf("enqueue into a paused group: %v", err)
			}
			return task
		}
		running := submit()
		if r := w.pass(); r.Placed != 1 {
			t.Fatalf("report %+v, want the first task placed", r)
		}

		paused := strings.Replace(open, "limit: 16", "limit: 0", 1)
		if _, err := w.Svc.ApplyEstate(w.Admin, []byte(paused), false); err != nil {
			t.Fatalf("apply with limit 0: %v", err)
		}
		waiting := submit()
		r := w.pass()
		if r.Preempted != 0 || r.Placed != 0 || r.Failed != 0 {
			t.Fatalf("report %+v, want nothing preempted, placed or failed in a paused group", r)
		}
		if got := w.task(running.ID); got.Status != model.TaskPlaced {
			t.Fatalf("the placed task is %s: %q, want it left to run", got.Status, got.Reason)
		}
		got := w.task(waiting.ID)
		reason, err := w.Svc.TaskReason(w.Admin, got)
		if err != nil || got.Status != model.TaskQueued || !strings.Contains(reason, "group A is paused: an admin set its limit to 0 GPUs") {
			t.Fatalf("the waiting task is %s: %q (%v), want queued and the pause named", got.Status, reason, err)
		}
		qs, err := w.Svc.QueueState(w.Admin, waiting.ComputeResourceID)
		if err != nil || qs == nil || qs.Constraint != "group_paused" {
			t.Fatalf("queue state %+v (%v), want group_paused", qs, err)
		}

		w.apply(open)
		if r := w.pass(); r.Placed != 1 {
			t.Fatalf("report %+v, want the waiting task placed once the limit is raised", r)
		}
		w.consistent(got.TenantID)
	})
}
