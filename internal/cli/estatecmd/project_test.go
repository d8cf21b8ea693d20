package estatecmd

import (
	"strings"
	"testing"
	"time"
)

// A member of two groups has two projects: an enqueue that names none is
// refused naming the CLI's flag and 'klique project use'; once they set a
// default with 'klique project use', the same enqueue goes to it, and
// 'klique project' says which it is.
func TestProjectUseSetsTheProjectOfTasksThatNameNone(t *testing.T) {
	const key = "klique-project-test-bootstrap-key-0123456789abcdefgh"
	ctx, app := startControlPlane(t, key, 120*time.Second)
	klique, ok := cliAs(t, ctx, app.URL())
	ok(key, "apply", "-f", "../../../examples/estate.yaml")
	ok(key, "create", "user", "rita", "--group", "ml-research", "--group", "vision")
	rita := strings.TrimSpace(ok(key, "create", "apikey", "--user", "rita"))

	_, errOut, code := klique(rita, "enqueue", "-q", "--resource", "1 GPU", "--group", "vision", "--", "true")
	if code == 0 || !strings.Contains(errOut, "say which project the task belongs to: pass --project NAME, or set your default project with 'klique project use NAME'") {
		t.Fatalf("an enqueue naming no project, with two: exit %d: %s", code, errOut)
	}
	if out := ok(rita, "project"); !strings.Contains(out, "no default project") {
		t.Fatalf("klique project before any default: %s", out)
	}
	if _, errOut, code := klique(rita, "project", "use", "fraud"); code == 0 || !strings.Contains(errOut, "no project 'fraud' you may use") {
		t.Fatalf("klique project use of an unknown project: exit %d: %s", code, errOut)
	}
	if out := ok(rita, "project", "use", "vision-detect"); !strings.Contains(out, "default project: vision-detect") {
		t.Fatalf("klique project use: %s", out)
	}
	if out := ok(rita, "project"); strings.TrimSpace(out) != "vision-detect" {
		t.Fatalf("klique project after use: %s", out)
	}
	id := strings.TrimSpace(ok(rita, "enqueue", "-q", "--resource", "1 GPU", "--group", "vision", "--", "true"))
	if out := ok(rita, "get", "task", id, "-o", "json"); !strings.Contains(out, "vision-detect") {
		t.Fatalf("the task enqueued with no --project is not in the default project:\n%s", out)
	}
}
