package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/eventually"
)

// End to end on loopback: with the engine running, a task of
// fraud-models tagged "trained" that a worker reports completed (over the
// worker API) makes alice's trigger schedule start a clone of her
// evaluation task, once, as alice; the clone says which schedule made it.
func TestTagTriggerStartsARunWhenAWorkerCompletesATaggedTask(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *config.Config) { c.Engine, c.EngineInterval = true, 100*time.Millisecond })
	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts)
	enqueue := func(name string, tags ...string) string {
		in := map[string]any{"name": name, "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", name + ".py"}}
		if len(tags) > 0 {
			in["tags"] = tags
		}
		return str(ts.mustGQL(t, alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": in}), "enqueueTask", "id")
	}
	eval := enqueue("evaluate")
	sched := str(ts.mustGQL(t, alice, `mutation($t: ID!) { createSchedule(input: {name: "evaluate-after-training", task: $t,
		trigger: {event: "task.completed", project: "fraud-models", tag: "trained"}}) { id } }`, map[string]any{"t": eval}), "createSchedule", "id")

	train := enqueue("train", "trained")
	w.finish(w.claim(train), agentapi.StateCompleted)

	var run string
	if !eventually.Poll(10*time.Second, func() bool {
		d := ts.mustGQL(t, alice, `query($id: ID!) { schedule(id: $id) { lastRunId lastResult lastError } }`, map[string]any{"id": sched})
		if e := str(d, "schedule", "lastError"); e != "" {
			t.Fatalf("the firing failed: %s", e)
		}
		run = str(d, "schedule", "lastRunId")
		return run != ""
	}) {
		t.Fatal("the schedule did not fire after the tagged task completed")
	}
	d := ts.mustGQL(t, alice, `query($id: ID!) { task(id: $id) { owner { name } clonedFrom { id } scheduledBy { id name } }
		schedule(id: "`+sched+`") { runs { key runId } } }`, map[string]any{"id": run})
	if str(d, "task", "owner", "name") != "alice" || str(d, "task", "clonedFrom", "id") != eval || str(d, "task", "scheduledBy", "name") != "evaluate-after-training" {
		t.Fatalf("the run: %v", d["task"])
	}
	// The periodic pass sees the same event again: it does not fire twice.
	// The test runs that pass itself rather than wait for its interval.
	if res, err := ts.app.Service.TickSchedules(context.Background()); err != nil || res.Fired != 0 {
		t.Fatalf("the pass run again: %+v, %v; want nothing fired", res, err)
	}
	runs := d["schedule"].(map[string]any)["runs"].([]any)
	d = ts.mustGQL(t, alice, `query($id: ID!) { schedule(id: $id) { runs { key runId } } }`, map[string]any{"id": sched})
	if again := d["schedule"].(map[string]any)["runs"].([]any); len(runs) != 1 || len(again) != 1 {
		t.Fatalf("runs %v, then %v: want one, for task %s", runs, again, train)
	}
}

const scheduleSub = `subscription { scheduleChanged { kind scheduleId missed schedule { name paused pausedReason } } }`

// TestScheduleChanged follows schedules over a real WebSocket: the owner
// sees her schedule paused and resumed; a member of another group and
// another tenant's admin, subscribed the whole time, see nothing of it.
func TestScheduleChanged(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	_, owner := subscribeWS(t, ts, f.alice, scheduleSub, nil)
	_, otherGroup := subscribeWS(t, ts, f.victor, scheduleSub, nil)
	_, otherTenant := subscribeWS(t, ts, f.olga, scheduleSub, nil)

	ts.mustGQL(t, f.alice, `mutation($id: ID!) { pauseSchedule(id: $id) { id } }`, map[string]any{"id": f.ids["schedule"]})
	waitUpdate(t, owner, 10*time.Second, "the pause", func(u *wsUpdate) bool {
		return kindOf(u, "scheduleChanged") == "schedule.paused" && str(u.Data, "scheduleChanged", "scheduleId") == f.ids["schedule"] &&
			str(u.Data, "scheduleChanged", "schedule", "pausedReason") == "paused by alice"
	})
	ts.mustGQL(t, f.alice, `mutation($id: ID!) { resumeSchedule(id: $id) { id } }`, map[string]any{"id": f.ids["schedule"]})
	waitUpdate(t, owner, 10*time.Second, "the resumption", func(u *wsUpdate) bool { return kindOf(u, "scheduleChanged") == "schedule.resumed" })
	for name, ch := range map[string]<-chan wsEvent{"victor": otherGroup, "olga": otherTenant} {
		select {
		case ev := <-ch:
			t.Errorf("%s got an update of alice's schedule: %+v", name, ev.Update)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
