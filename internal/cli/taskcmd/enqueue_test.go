package taskcmd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/cli"
)

// Without a command after `--` (nor a repository), enqueue says to give
// one, instead of the server's "name is empty" for the name it would have
// derived from the command; and it sends nothing.
func TestEnqueueWithoutACommandSaysToGiveOneAfterTheDashes(t *testing.T) {
	const key = "klique-misuse-test-bootstrap-key-0123456789abcdefgh"
	ctx, app := startControlPlane(t, key, 60*time.Second)
	isolateCLI(t, app.URL(), key)
	for _, args := range [][]string{{"apply", "-f", "../../../examples/estate.yaml"}, {"create", "user", "alice", "--group", "ml-research"}} {
		if code, _, errOut := misuse(ctx, args...); code != 0 {
			t.Fatalf("klique %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	code, aliceKey, errOut := misuse(ctx, "create", "apikey", "--user", "alice")
	if code != 0 {
		t.Fatalf("create apikey: exit %d: %s", code, errOut)
	}
	t.Setenv("KLIQUE_API_KEY", strings.TrimSpace(aliceKey))

	for _, verb := range [][]string{{"enqueue"}, {"create", "task"}} {
		args := append(verb, "--resource", "1 GPU", "--project", "fraud-models")
		code, _, errOut := misuse(ctx, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, "give a command after `--`") || strings.Contains(errOut, "name is empty") {
			t.Errorf("klique %s: exit %d, printed:\n%s\nwant exit %d saying to give a command after `--`", strings.Join(args, " "), code, errOut, cli.ExitUsage)
		}
	}
	// A repository without an entry point is named as what is missing,
	// not the name derived from it.
	code, _, errOut = misuse(ctx, "enqueue", "--resource", "1 GPU", "--project", "fraud-models", "--repo", "https://git.example.com/ml/fraud.git")
	if code != cli.ExitFailed || !strings.Contains(errOut, "a repository needs an entry point") || strings.Contains(errOut, "name is empty") {
		t.Errorf("enqueue --repo without --entry-point: exit %d, printed:\n%s\nwant the server's refusal naming the entry point", code, errOut)
	}
	_, out, _ := misuse(ctx, "get", "tasks", "-o", "json")
	if strings.Contains(out, `"id"`) {
		t.Errorf("a refused enqueue made a task:\n%s", out)
	}
}
