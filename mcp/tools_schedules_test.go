package mcp_test

import (
	"slices"
	"strings"
	"testing"
)

type scheduleOut struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Target       string `json:"target"`
	When         string `json:"when"`
	MissedRuns   string `json:"missedRuns"`
	Paused       bool   `json:"paused"`
	PausedReason string `json:"pausedReason"`
	NextRunAt    string `json:"nextRunAt"`
}

type schedulesOut struct {
	Schedules []scheduleOut `json:"schedules"`
}

// An agent tags a task, schedules it on a cron and on a tag trigger, and
// lists its schedules; another group's member sees none of them, and a
// cron with seconds is refused with what to write instead.
func TestScheduleTools(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice := b.client(t, "alice")
	first := ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU",
		"command": []string{"python", "train.py"}, "tags": []string{"nightly"}})
	if !slices.Equal(first.Tags, []string{"nightly"}) {
		t.Fatalf("tags %v, want [nightly]", first.Tags)
	}
	cron := ok[scheduleOut](t, alice, "create_schedule", map[string]any{"name": "nightly", "task": first.ID, "cron": "0 3 * * *"})
	if cron.ID == "" || cron.Target != "task "+first.ID || cron.NextRunAt == "" || !strings.Contains(cron.When, "0 3 * * *") || cron.MissedRuns != "run-once" {
		t.Fatalf("%+v", cron)
	}
	trig := ok[scheduleOut](t, alice, "create_schedule", map[string]any{"name": "after training", "task": first.ID,
		"triggerProject": "fraud-models", "triggerTag": "nightly", "missedRuns": "skip"})
	if !strings.Contains(trig.When, "tag 'nightly'") || trig.NextRunAt != "" {
		t.Fatalf("%+v", trig)
	}
	list := ok[schedulesOut](t, alice, "list_schedules", nil)
	if len(list.Schedules) != 2 || list.Schedules[0].Name != "after training" || list.Schedules[1].Name != "nightly" {
		t.Fatalf("alice's schedules %+v", list.Schedules)
	}
	if other := ok[schedulesOut](t, b.client(t, "vic"), "list_schedules", nil); len(other.Schedules) != 0 {
		t.Fatalf("vic sees %+v", other.Schedules)
	}
	msg := refused(t, alice, "create_schedule", map[string]any{"name": "too fine", "task": first.ID, "cron": "*/10 * * * * *"})
	if !strings.Contains(msg, "seconds are not supported") {
		t.Fatalf("refusal %q does not explain the 6 fields", msg)
	}
	msg = refused(t, b.client(t, "vic"), "create_schedule", map[string]any{"name": "steal", "task": first.ID, "cron": "@daily"})
	if !strings.Contains(msg, "no task") {
		t.Fatalf("vic scheduling alice's task: %q", msg)
	}
}

// An agent schedules a task on an artifact's publication and on a
// pipeline's completion; a schedule naming two targets, a study it cannot
// see and a trigger state that is no end are refused with what to give.
func TestScheduleToolsTriggersAndTargets(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice := b.client(t, "alice")
	first := ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU",
		"command": []string{"python", "train.py"}})
	art := ok[scheduleOut](t, alice, "create_schedule", map[string]any{"name": "score", "task": first.ID,
		"triggerArtifact": "model.pt", "triggerProject": "fraud-models"})
	if !strings.Contains(art.When, "artifact named 'model.pt' is published in project") || art.Target != "task "+first.ID {
		t.Fatalf("%+v", art)
	}
	pipe := ok[scheduleOut](t, alice, "create_schedule", map[string]any{"name": "report", "task": first.ID,
		"triggerPipeline": "nightly", "triggerProject": "fraud-models", "triggerState": "completed"})
	if !strings.Contains(pipe.When, "when a run of pipeline 'nightly'") || !strings.Contains(pipe.When, "ends completed") {
		t.Fatalf("%+v", pipe)
	}
	msg := refused(t, alice, "create_schedule", map[string]any{"name": "two", "task": first.ID, "study": first.ID, "cron": "@daily"})
	if !strings.Contains(msg, "give one of task, pipeline or study") {
		t.Fatalf("two targets: %q", msg)
	}
	msg = refused(t, alice, "create_schedule", map[string]any{"name": "sweep", "study": first.ID, "cron": "@daily"})
	if !strings.Contains(msg, "no study") {
		t.Fatalf("a study that is not one: %q", msg)
	}
	msg = refused(t, alice, "create_schedule", map[string]any{"name": "running", "task": first.ID,
		"triggerPipeline": "nightly", "triggerProject": "fraud-models", "triggerState": "running"})
	if !strings.Contains(msg, "completed, failed or aborted") {
		t.Fatalf("a state that is no end: %q", msg)
	}
}
