package mcp_test

import (
	"slices"
	"strings"
	"testing"
)

// TestALeadReordersTheQueue: lena, who leads ml-research, orders its
// projects and moves a waiting task; alice, a member, may do neither.
func TestALeadReordersTheQueue(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		alice, lena := b.client(t, "alice"), b.client(t, "lena")
		var ids []string
		for _, p := range []string{"fraud-models", "fraud-models", "shared-eval"} {
			ids = append(ids, ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": p, "computeResource": "1 GPU",
				"command": []string{"python", "train.py"}}).ID)
		}
		positions := func() []int {
			t.Helper()
			var out []int
			for _, id := range ids {
				out = append(out, ok[task](t, alice, "get_task", map[string]any{"id": id}).Position)
			}
			return out
		}
		if got := positions(); !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("positions %v", got)
		}

		type priority struct {
			Group    string
			Projects []string
		}
		pp := ok[priority](t, lena, "set_project_priorities", map[string]any{"group": "ml-research", "projects": []string{"shared-eval", "fraud-models"}})
		if pp.Group != "ml-research" || !slices.Equal(pp.Projects, []string{"shared-eval", "fraud-models"}) {
			t.Fatalf("set_project_priorities answered %+v", pp)
		}
		if got := positions(); !slices.Equal(got, []int{2, 3, 1}) {
			t.Fatalf("positions after the priority %v", got)
		}

		type moved struct {
			Task     task
			From, To int
		}
		m := ok[moved](t, lena, "move_queued_task", map[string]any{"id": ids[1], "toFront": true})
		if m.From != 3 || m.To != 1 || m.Task.ID != ids[1] || m.Task.Position != 1 {
			t.Fatalf("move_queued_task answered %+v", m)
		}
		if got := positions(); !slices.Equal(got, []int{3, 1, 2}) {
			t.Fatalf("positions after the move %v", got)
		}
		found := false
		for _, e := range b.AuditLog(t) {
			if e.Action == "task.moved" {
				if e.ActorName != "lena" || e.Channel != "mcp" || e.ObjectID != ids[1] || !strings.Contains(e.Detail, "from position 3 to 1") {
					t.Fatalf("audit entry %+v", e)
				}
				found = true
			}
		}
		if !found {
			t.Fatal("the move wrote no task.moved audit entry")
		}

		msg := refused(t, alice, "move_queued_task", map[string]any{"id": ids[0], "toFront": true})
		if !strings.Contains(msg, "only a lead of the task's group or an admin can reorder its queue") {
			t.Fatalf("a member's move: %s", msg)
		}
		msg = refused(t, alice, "set_project_priorities", map[string]any{"group": "ml-research", "projects": []string{"fraud-models"}})
		if !strings.Contains(msg, "only a lead of group ml-research or an admin") {
			t.Fatalf("a member's priority: %s", msg)
		}
		msg = refused(t, lena, "move_queued_task", map[string]any{"id": ids[0], "before": ids[2], "toBack": true})
		if !strings.Contains(msg, "exactly one of them") {
			t.Fatalf("a move with two places: %s", msg)
		}
		if got := positions(); !slices.Equal(got, []int{3, 1, 2}) {
			t.Fatalf("positions after the refusals %v", got)
		}
	})
}
