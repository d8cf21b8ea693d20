package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/platform"
)

// TestRefusalsSayWhy checks that a refusal of the platform reaches the
// agent as a tool error in the platform's words.
func TestRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice, vic := b.client(t, "alice"), b.client(t, "vic")
	mine := ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}})
	fraud, err := b.Svc.Project(b.Admin, "fraud-models")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *client.Client
		tool string
		args map[string]any
		want string
	}{
		{"a compute resource not open to the caller's group", vic, "enqueue_task",
			map[string]any{"name": "t", "project": "vision-detect", "computeResource": "multi-node training", "command": []string{"true"}},
			"the compute resource 'multi-node training' is not open to group vision"},
		{"a compute resource that does not exist", vic, "enqueue_task",
			map[string]any{"name": "t", "project": "vision-detect", "computeResource": "2 GPUs", "command": []string{"true"}},
			"no compute resource '2 GPUs' is open to you; list yours with list_compute_resources"},
		{"a project of another group", vic, "enqueue_task",
			map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}},
			"no project 'fraud-models'"},
		{"a project of another group by id, whose name and group stay unsaid", vic, "enqueue_task",
			map[string]any{"name": "t", "project": fraud.ID, "computeResource": "1 GPU", "command": []string{"true"}},
			"no project '" + fraud.ID + "'"},
		{"a credential in a parameter", alice, "enqueue_task",
			map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}, "parameters": map[string]string{"api_key": "sk-live-0123456789abcdef"}},
			"looks like a credential"},
		{"a task of another group", vic, "get_task", map[string]any{"id": mine.ID}, "no task '" + mine.ID + "'"},
		{"its logs", vic, "get_task_logs", map[string]any{"id": mine.ID}, "no task"},
		{"its metrics", vic, "get_task_metrics", map[string]any{"id": mine.ID}, "no task"},
		{"aborting it", vic, "abort_task", map[string]any{"id": mine.ID}, "no task"},
		{"cloning it", vic, "clone_task", map[string]any{"id": mine.ID}, "no task"},
		{"comparing it", vic, "compare_tasks", map[string]any{"ids": []string{mine.ID, mine.ID + "x"}}, "no task"},
		{"a group one is not in", vic, "list_compute_resources", map[string]any{"group": "ml-research"}, "ml-research"},
		{"usage of another group's project", vic, "get_usage", map[string]any{"project": "fraud-models"}, "no project"},
		{"model aliases of another group's project", vic, "list_model_aliases", map[string]any{"project": "fraud-models"}, "no project 'fraud-models' you may use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := refused(t, tc.c, tc.tool, tc.args)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("%q, want it to say %q", msg, tc.want)
			}
			if tc.args["project"] == fraud.ID && (strings.Contains(msg, "fraud-models") || strings.Contains(msg, "ml-research")) {
				t.Fatalf("%q names another group's project or group", msg)
			}
		})
	}
}

// TestBadArgumentsAreToolErrors sends every tool arguments it cannot use:
// each comes back as a tool error naming the argument, never as a protocol
// failure, and nothing changes.
func TestBadArgumentsAreToolErrors(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice := b.client(t, "alice")
	mine := ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}})
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"list_compute_resources", map[string]any{"groups": "x"}, "unknown argument 'groups'; this tool takes group"},
		{"list_compute_resources", map[string]any{"group": 7}, "argument 'group' must be a string, not a number"},
		{"enqueue_task", map[string]any{}, "argument 'name' is missing"},
		{"enqueue_task", map[string]any{"name": "t", "project": "fraud-models", "command": []string{"true"}}, "argument 'computeResource' is missing"},
		{"enqueue_task", map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU"}, "say what to run"},
		{"enqueue_task", map[string]any{"name": "t", "computeResource": "1 GPU", "command": "python train.py"}, "argument 'command' must be a list of strings, not a string"},
		{"enqueue_task", map[string]any{"name": "t", "computeResource": "1 GPU", "command": []string{"true"}, "parameters": map[string]any{"lr": 0.1}}, "argument 'parameters' must be an object whose values are strings; one of its values is a number"},
		{"enqueue_task", map[string]any{"name": " t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}}, "name starts or ends with a space"},
		{"enqueue_task", map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}, "cpu": 4}, "unknown argument 'cpu'"},
		{"get_task", map[string]any{}, "argument 'id' is missing"},
		{"get_task", map[string]any{"id": []string{"a"}}, "argument 'id' must be a string, not an array"},
		{"get_task", map[string]any{"id": "no-such-task"}, "no task 'no-such-task'"},
		{"list_tasks", map[string]any{"status": []string{"waiting"}}, `status "waiting" is not known: use queued, placed, running, completed, failed, aborted`},
		{"list_tasks", map[string]any{"status": "queued"}, "argument 'status' must be a list of strings"},
		{"list_tasks", map[string]any{"limit": 1000}, "argument 'limit' must be 1 to 100"},
		{"list_tasks", map[string]any{"limit": 1.5}, "argument 'limit' must be a whole number"},
		{"list_tasks", map[string]any{"cursor": "abc"}, "argument 'cursor' is not a cursor this tool gave"},
		{"list_tasks", map[string]any{"mine": "yes"}, "argument 'mine' must be true or false, not a string"},
		{"list_tasks", map[string]any{"project": "nope"}, "no project"},
		{"get_task_logs", map[string]any{"id": mine.ID, "tail": 10, "after": 3}, "give tail (the last lines), or after and limit"},
		{"get_task_logs", map[string]any{"id": mine.ID, "tail": 6000}, "argument 'tail' must be 1 to 5000"},
		{"get_task_logs", map[string]any{"tail": 6}, "argument 'id' is missing"},
		{"get_task_metrics", map[string]any{"id": mine.ID, "after": 5}, "give its name too"},
		{"get_task_metrics", map[string]any{"id": mine.ID, "name": "loss", "limit": -1}, "argument 'limit' must be 1 to 10000"},
		{"abort_task", map[string]any{"reason": "x"}, "argument 'id' is missing"},
		{"abort_task", map[string]any{"id": mine.ID, "reason": strings.Repeat("x", 501)}, "the reason is longer than 500 characters"},
		{"clone_task", map[string]any{"id": mine.ID, "group": "ml-research"}, "give computeResource too"},
		{"clone_task", map[string]any{"id": mine.ID, "parameterOverrides": []string{"lr=0.1"}}, "argument 'parameterOverrides' must be an object whose values are strings, not an array"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "messages": []map[string]any{{"role": "user", "content": 5}}}, "argument 'messages.content' must be a string, not a number"},
		{"enqueue_task", map[string]any{"name": "t", "computeResource": "1 GPU", "command": []any{"python", 3}}, "argument 'command' must be a list of strings; one of its values is a number"},
		{"compare_tasks", map[string]any{"ids": []string{mine.ID}}, "argument 'ids' must list two to ten task ids"},
		{"compare_tasks", map[string]any{"ids": []string{mine.ID, mine.ID}}, "is listed twice"},
		{"get_usage", map[string]any{"from": "last week"}, "argument 'from' must be an RFC 3339 time (2026-11-01T00:00:00Z) or a date (2026-11-01), not \"last week\""},
		{"get_usage", map[string]any{"from": "2026-02-01", "to": "2026-01-01"}, "the range must end after it starts"},
		{"get_usage", map[string]any{"by": []string{"planet"}}, `usage cannot be grouped by "planet"`},
		{"get_usage", map[string]any{"by": []string{"pool", "pool"}}, `usage is grouped by "pool" twice`},
		{"list_model_aliases", map[string]any{"project": 3}, "argument 'project' must be a string"},
		{"call_model", map[string]any{"project": "fraud-models", "prompt": "hi"}, "argument 'alias' is missing"},
		{"call_model", map[string]any{"alias": "chat", "prompt": "hi"}, "argument 'project' is missing"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models"}, "say what to ask"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hi", "messages": []map[string]string{{"role": "user", "content": "hi"}}}, "give prompt or messages, not both"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "messages": []map[string]string{{"role": "robot", "content": "hi"}}}, `message 1 has role "robot"`},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hi", "maxTokens": -5}, "argument 'maxTokens' must not be negative"},
	} {
		t.Run(tc.tool+" "+tc.want, func(t *testing.T) {
			msg := refused(t, alice, tc.tool, tc.args)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("%q, want it to say %q", msg, tc.want)
			}
		})
	}
	t.Run("nothing was enqueued and no model was called", func(t *testing.T) {
		if l := ok[taskList](t, alice, "list_tasks", nil); len(l.Tasks) != 1 {
			t.Fatalf("%d tasks", len(l.Tasks))
		}
		if len(b.models.calls) != 0 {
			t.Fatalf("model calls %+v", b.models.calls)
		}
	})
	t.Run("bad arguments are recorded in the audit trail too", func(t *testing.T) {
		n := 0
		for _, e := range b.AuditLog(t) {
			if e.Action == platform.ToolCallAction && strings.HasPrefix(e.Detail, "bad arguments: ") && e.ActorName == "alice" && e.Channel == "mcp" {
				n++
			}
		}
		if n < 30 {
			t.Fatalf("%d bad-argument calls recorded", n)
		}
	})
}

// TestAnExhaustedTimeBudgetIsExplained uses up group vision's time budget
// (a monthly budget of 1 h, and a task of the group held for 2 h by the
// engine's clock): the next task waits, and get_task and
// list_compute_resources say why and when the budget resets, in words an
// agent can relay.
func TestAnExhaustedTimeBudgetIsExplained(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	doc, err := os.ReadFile(filepath.Join("..", "examples", "estate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	small := strings.Replace(string(doc), "hours: 2000\n      period: week", "hours: 1\n      period: month", 1)
	if small == string(doc) {
		t.Fatal("the example estate no longer gives vision a weekly budget of 2000 h")
	}
	if _, err := b.Svc.ApplyEstate(b.Admin, []byte(small), false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	// Both passes in the past, the second two hours after the first, so
	// that the policy view (read at the real time) counts the two hours.
	// In the first hours of a month they cannot both be in this month and
	// the past: they are then in the future, and only the engine's own
	// account is checked.
	now := time.Now().UTC()
	start := now.Add(-150 * time.Minute)
	inPast := start.Month() == now.Month()
	if !inPast {
		start = now.Add(time.Minute)
	}
	passAt := func(at time.Time) {
		t.Helper()
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test", Now: func() time.Time { return at }}
		if _, err := eng.PassAll(context.Background()); err != nil {
			t.Fatalf("engine pass: %v", err)
		}
	}
	vic := b.client(t, "vic")
	first := ok[task](t, vic, "enqueue_task", map[string]any{"name": "long", "project": "vision-detect", "computeResource": "1 GPU", "command": []any{"true"}})
	passAt(start)
	if got := ok[task](t, vic, "get_task", map[string]any{"id": first.ID}); got.Status != "placed" {
		t.Fatalf("vic's first task is %s after a pass, want placed", got.Status)
	}
	second := ok[task](t, vic, "enqueue_task", map[string]any{"name": "next", "project": "vision-detect", "computeResource": "1 GPU", "command": []any{"true"}})
	passAt(start.Add(2 * time.Hour))

	got := ok[task](t, vic, "get_task", map[string]any{"id": second.ID})
	if got.Status != "queued" || !strings.Contains(got.Reason, "group vision has used its monthly time budget of 1 h; it resets ") {
		t.Fatalf("vic's second task: %s, %q; want it queued because vision's monthly budget is used", got.Status, got.Reason)
	}
	view := ok[computeView](t, vic, "list_compute_resources", nil)
	if len(view.Groups) != 1 || view.Groups[0].Budget == nil {
		t.Fatalf("vic's policy view has no budget: %+v", view.Groups)
	}
	if budget := view.Groups[0].Budget; inPast && (!budget.UsedUp || budget.LeftHours != 0 || budget.Period != "month") {
		t.Errorf("vic's policy view does not show the monthly budget used up: %+v", *budget)
	}
	for _, cr := range view.Groups[0].ComputeResources {
		if cr.Name == "1 GPU" && !strings.Contains(cr.HeadWaits, "has used its monthly time budget") {
			t.Errorf("compute resource 1 GPU does not say why its first task waits: %q", cr.HeadWaits)
		}
	}
}
