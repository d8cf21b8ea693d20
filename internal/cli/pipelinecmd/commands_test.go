package pipelinecmd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/clitest"
	"github.com/klique-ai/klique/internal/cli/estatecmd"
	"github.com/klique-ai/klique/internal/cli/logincmd"
	"github.com/klique-ai/klique/internal/cli/pipelinecmd"
	"github.com/klique-ai/klique/internal/cli/taskcmd"
	"github.com/klique-ai/klique/internal/eventually"
)

// groups are the command groups the test needs: the estate's (to apply
// one and create a user and key) and the pipelines'.
var groups = []cli.Group{logincmd.Commands, estatecmd.Commands, taskcmd.Commands, pipelinecmd.Commands}

// TestPipelineCommands runs examples/pipelines/pipeline.yaml with 'klique
// pipeline run', reads it with 'get' once the controller has enqueued its
// first step, and aborts it; an undeclared parameter is refused.
func TestPipelineCommands(t *testing.T) {
	const key = "klique-pipeline-cli-bootstrap-key-0123456789abcdefgh"
	ctx, app := clitest.StartControlPlane(t, key, 2*time.Minute, clitest.WithEngine)
	klique, ok := clitest.As(t, ctx, app.URL(), groups)
	ok(key, "apply", "-f", "../../../examples/estate.yaml")
	ok(key, "create", "user", "ada", "--group", "ml-research")
	ada := strings.TrimSpace(ok(key, "create", "apikey", "--user", "ada"))
	const file = "../../../examples/pipelines/pipeline.yaml"

	if _, errOut, code := klique(ada, "pipeline", "run", "-f", file, "--param", "batch=32"); code == 0 || !strings.Contains(errOut, "unknown parameter batch") {
		t.Fatalf("an undeclared parameter: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(ok(ada, "pipeline", "run", "-q", "-f", file, "--param", "lr=0.05"))
	var got string
	if !eventually.Poll(30*time.Second, func() bool {
		got = ok(ada, "pipeline", "get", id)
		return strings.Contains(got, "fraud-train: running") && strings.Contains(got, "queued")
	}) {
		t.Fatalf("the run never started:\n%s", got)
	}
	for _, want := range []string{"STEP", "prepare", "1 A100", "train", "evaluate", "waiting for train"} {
		if !strings.Contains(got, want) {
			t.Fatalf("get does not show %q:\n%s", want, got)
		}
	}
	out := ok(ada, "pipeline", "abort", id, "--reason", "wrong data")
	if !strings.Contains(out, "fraud-train: aborted (aborted by ada: wrong data)") || !strings.Contains(out, "skipped") {
		t.Fatalf("abort:\n%s", out)
	}
	if _, errOut, code := klique(ada, "pipeline", "abort", id); code == 0 || !strings.Contains(errOut, "already ended") {
		t.Fatalf("aborting again: exit %d: %s", code, errOut)
	}

	// --wait: with no worker the run cannot end, so the wait runs out
	// (exit 3) and says so; -q still prints the run's ID.
	out, errOut, code := klique(ada, "pipeline", "run", "-q", "-f", file, "--wait", "1s")
	if code != cli.ExitTimedOut || !strings.Contains(errOut, "is still ") || !strings.Contains(errOut, " after 1s") || len(strings.TrimSpace(out)) < 10 || strings.Contains(out, " ") {
		t.Fatalf("run --wait 1s: exit %d, printed %q: %s", code, out, errOut)
	}
}
