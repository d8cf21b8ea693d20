package schedulecmd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/clitest"
	"github.com/klique-ai/klique/internal/cli/estatecmd"
	"github.com/klique-ai/klique/internal/cli/logincmd"
	"github.com/klique-ai/klique/internal/cli/schedulecmd"
	"github.com/klique-ai/klique/internal/cli/taskcmd"
)

var testGroups = []cli.Group{logincmd.Commands, estatecmd.Commands, taskcmd.Commands, schedulecmd.Commands}

// A member tags a task, schedules it on a cron and on a tag trigger,
// lists, pauses (by name), resumes and removes a schedule; a cron with
// seconds and a missing target are refused with what to give.
func TestScheduleCommands(t *testing.T) {
	const key = "klique-schedule-test-bootstrap-key-0123456789abcdef"
	ctx, app := clitest.StartControlPlane(t, key, 60*time.Second)
	klique, ok := clitest.As(t, ctx, app.URL(), testGroups)
	ok(key, "apply", "-f", "../../../examples/estate.yaml")
	ok(key, "create", "user", "alice", "--group", "ml-research")
	alice := strings.TrimSpace(ok(key, "create", "apikey", "--user", "alice"))

	task := strings.TrimSpace(ok(alice, "enqueue", "-q", "--resource", "1 GPU", "--project", "fraud-models", "--tag", "nightly", "--", "python", "train.py"))
	if got := ok(alice, "get", "task", task, "-o", "json"); !strings.Contains(got, "nightly") {
		t.Errorf("the task does not show its tag:\n%s", got)
	}
	out := ok(alice, "schedule", "create", "yearly", "--task", task, "--cron", "0 3 1 1 *", "--param", "epochs=10")
	if !strings.Contains(out, "schedule yearly created") || !strings.Contains(out, "cron '0 3 1 1 *' (UTC)") || !strings.Contains(out, "next run 20") {
		t.Errorf("create printed %q", out)
	}
	ok(alice, "schedule", "create", "after-nightly", "--task", task, "--trigger", "task.completed", "--project", "fraud-models", "--tag", "nightly")
	out = ok(alice, "schedule", "ls")
	for _, want := range []string{"yearly", "after-nightly", "when a task of project", "tag 'nightly'", "active"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls does not show %q:\n%s", want, out)
		}
	}
	if out := ok(alice, "schedule", "pause", "yearly"); !strings.Contains(out, "schedule yearly paused") {
		t.Errorf("pause printed %q", out)
	}
	if out := ok(alice, "schedule", "ls"); !strings.Contains(out, "paused: paused by alice") {
		t.Errorf("ls after pause:\n%s", out)
	}
	ok(alice, "schedule", "resume", "yearly")
	ok(alice, "schedule", "rm", "after-nightly")
	if out := ok(alice, "schedule", "ls", "-o", "json"); strings.Contains(out, "after-nightly") || !strings.Contains(out, `"paused": false`) {
		t.Errorf("ls after resume and rm:\n%s", out)
	}

	_, errOut, code := klique(alice, "schedule", "create", "too-fine", "--task", task, "--cron", "*/10 * * * * *")
	if code == 0 || !strings.Contains(errOut, "seconds are not supported") {
		t.Errorf("a 6-field cron: exit %d, %q", code, errOut)
	}
	_, errOut, code = klique(alice, "schedule", "create", "nothing", "--cron", "@daily")
	if code != cli.ExitUsage || !strings.Contains(errOut, "--task ID") {
		t.Errorf("no target: exit %d, %q", code, errOut)
	}
	// The artifact and pipeline triggers, and a study target the server
	// refuses with its reason.
	out = ok(alice, "schedule", "create", "score", "--task", task, "--trigger", "artifact.published", "--artifact", "model.pt")
	if !strings.Contains(out, "when an artifact named 'model.pt' is published") {
		t.Errorf("create on an artifact printed %q", out)
	}
	out = ok(alice, "schedule", "create", "report", "--task", task, "--trigger", "pipeline.finished", "--project", "fraud-models",
		"--trigger-pipeline", "nightly", "--trigger-state", "failed")
	if !strings.Contains(out, "when a run of pipeline 'nightly'") || !strings.Contains(out, "ends failed") {
		t.Errorf("create on a pipeline printed %q", out)
	}
	_, errOut, code = klique(alice, "schedule", "create", "sweep", "--study", task, "--cron", "@weekly")
	if code == 0 || !strings.Contains(errOut, "no study") {
		t.Errorf("a study that is not one: exit %d, %q", code, errOut)
	}
	_, errOut, code = klique(alice, "schedule", "create", "tagged", "--task", task, "--trigger", "artifact.published", "--artifact", "m", "--tag", "x")
	if code == 0 || !strings.Contains(errOut, "not tag: leave tag out") {
		t.Errorf("a stray trigger flag: exit %d, %q", code, errOut)
	}
	_, errOut, code = klique(alice, "schedule", "rm", "no-such")
	if code == 0 || !strings.Contains(errOut, "no schedule") {
		t.Errorf("rm of an unknown schedule: exit %d, %q", code, errOut)
	}
}
