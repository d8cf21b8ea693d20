package estatecmd

import (
	"strings"
	"testing"
	"time"
)

// A lead orders the team's projects with 'klique project priority' and
// moves a waiting task with 'klique queue move'; a member is refused both,
// and the task positions 'klique get task' shows follow each change.
func TestALeadOrdersProjectsAndMovesTasks(t *testing.T) {
	const key = "klique-queue-test-bootstrap-key-0123456789abcdefghij"
	ctx, app := startControlPlane(t, key, 120*time.Second)
	klique, ok := cliAs(t, ctx, app.URL())
	ok(key, "apply", "-f", "../../../examples/estate.yaml")
	ok(key, "create", "user", "lena", "--group", "ml-research:lead")
	ok(key, "create", "user", "rita", "--group", "ml-research")
	lena := strings.TrimSpace(ok(key, "create", "apikey", "--user", "lena"))
	rita := strings.TrimSpace(ok(key, "create", "apikey", "--user", "rita"))

	var ids []string
	for _, p := range []string{"fraud-models", "shared-eval"} {
		ids = append(ids, strings.TrimSpace(ok(rita, "enqueue", "-q", "--resource", "1 GPU", "--project", p, "--", "true")))
	}
	position := func(id string) string {
		t.Helper()
		out := ok(rita, "get", "task", id, "-o", "json")
		i := strings.Index(out, `"position"`)
		if i < 0 {
			t.Fatalf("no position in\n%s", out)
		}
		return strings.Trim(strings.SplitN(strings.TrimSpace(out[i+len(`"position"`):]), "\n", 2)[0], ": ,")
	}
	if position(ids[0]) != "1" || position(ids[1]) != "2" {
		t.Fatalf("positions %s, %s before any change", position(ids[0]), position(ids[1]))
	}

	if _, errOut, code := klique(rita, "project", "priority", "ml-research", "shared-eval"); code == 0 ||
		!strings.Contains(errOut, "only a lead of group ml-research or an admin can set its project priority") {
		t.Fatalf("a member's priority: exit %d: %s", code, errOut)
	}
	out := ok(lena, "project", "priority", "ml-research", "shared-eval", "fraud-models")
	if !strings.Contains(out, "1. shared-eval\n2. fraud-models") {
		t.Fatalf("klique project priority: %s", out)
	}
	if out := ok(rita, "project", "priority", "ml-research"); !strings.Contains(out, "1. shared-eval\n2. fraud-models") {
		t.Fatalf("klique project priority, read by a member: %s", out)
	}
	if position(ids[1]) != "1" || position(ids[0]) != "2" {
		t.Fatalf("positions %s, %s after the priority", position(ids[0]), position(ids[1]))
	}

	if _, errOut, code := klique(rita, "queue", "move", ids[0], "--front"); code == 0 ||
		!strings.Contains(errOut, "only a lead of the task's group or an admin can reorder its queue") {
		t.Fatalf("a member's move: exit %d: %s", code, errOut)
	}
	if _, errOut, code := klique(lena, "queue", "move", ids[0]); code == 0 || !strings.Contains(errOut, "exactly one of --before") {
		t.Fatalf("a move to nowhere: exit %d: %s", code, errOut)
	}
	out = ok(lena, "queue", "move", ids[0], "--before", ids[1])
	if !strings.Contains(out, "moved from position 2 to 1:") {
		t.Fatalf("klique queue move: %s", out)
	}
	if position(ids[0]) != "1" || position(ids[1]) != "2" {
		t.Fatalf("positions %s, %s after the move", position(ids[0]), position(ids[1]))
	}
	if out := ok(lena, "project", "priority", "ml-research", "--clear"); !strings.Contains(out, "group ml-research has no project priority") {
		t.Fatalf("klique project priority --clear: %s", out)
	}
}
