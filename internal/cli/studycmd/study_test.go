package studycmd_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/clitest"
	"github.com/klique-ai/klique/internal/cli/estatecmd"
	"github.com/klique-ai/klique/internal/cli/logincmd"
	"github.com/klique-ai/klique/internal/cli/studycmd"
	"github.com/klique-ai/klique/internal/cli/taskcmd"
	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
)

// testGroups are the client command groups the test needs, as the binary
// registers them.
var testGroups = []cli.Group{logincmd.Commands, estatecmd.Commands, taskcmd.Commands, studycmd.Commands}

// 'klique study start -f' starts examples/studies/study.yaml as written
// over a base task: its first trials are enqueued at once; 'study get'
// and 'study ls' show it; 'study stop' aborts its trials; a file with a
// problem is refused with what to change.
func TestStudyCommands(t *testing.T) {
	const key = "klique-study-test-bootstrap-key-0123456789abcdefghij"
	ctx, app := clitest.StartControlPlane(t, key, 120*time.Second)
	klique, ok := clitest.As(t, ctx, app.URL(), testGroups)
	ok(key, "apply", "-f", "../../../examples/estate.yaml")
	ok(key, "create", "user", "rita", "--group", "ml-research")
	rita := strings.TrimSpace(ok(key, "create", "apikey", "--user", "rita"))
	base := strings.TrimSpace(ok(rita, "enqueue", "-q", "--resource", "1 GPU", "--project", "fraud-models", "--name", "train",
		"--param", "lr=0.1", "--param", "layers=2", "--param", "epochs=4", "--", "python3", "train.py", "--lr", "{lr}", "--layers", "{layers}"))

	out := ok(rita, "study", "start", "-f", "../../../examples/studies/study.yaml", "--base", base)
	for _, want := range []string{"study lr-layers-grid (", "running", "grid search of accuracy (final, higher is better), at most 2 at once, on 1 GPU in fraud-models",
		"RANK", "LAYERS", "LR", "ACCURACY"} {
		if !strings.Contains(out, want) {
			t.Fatalf("study start says:\n%s\nwant %q", out, want)
		}
	}
	id := strings.Fields(strings.SplitN(out, "(", 2)[1])[0]
	id = strings.TrimSuffix(id, "):")
	if n := strings.Count(out, "running"); n < 3 { // the study and its two trials
		t.Fatalf("want the study and two running trials:\n%s", out)
	}
	if out := ok(rita, "study", "get", id, "-o", "json"); !strings.Contains(out, `"Strategy": "grid"`) || !strings.Contains(out, `"lr": "0.01"`) {
		t.Fatalf("study get -o json:\n%s", out)
	}
	if out := ok(rita, "study", "ls"); !strings.Contains(out, id) || !strings.Contains(out, "lr-layers-grid") {
		t.Fatalf("study ls:\n%s", out)
	}
	out = ok(rita, "study", "stop", id, "--reason", "enough")
	if !strings.Contains(out, "stopped") || !strings.Contains(out, "ended: stopped by rita: enough") || strings.Count(out, "aborted") != 2 {
		t.Fatalf("study stop:\n%s", out)
	}

	if _, errOut, code := klique(rita, "study", "start", "--base", base); code != 2 || !strings.Contains(errOut, "give the study file with -f") {
		t.Fatalf("no file: exit %d: %s", code, errOut)
	}
	if _, errOut, code := klique(rita, "study", "start", "-f", "../../../examples/studies/study.yaml"); code != 2 || !strings.Contains(errOut, "--base TASK_ID") {
		t.Fatalf("no base: exit %d: %s", code, errOut)
	}
	// --wait: with no worker the study cannot end, so the wait runs out
	// (exit 3) and says so; -q still prints the study's ID.
	out, errOut, code := klique(rita, "study", "start", "-q", "-f", "../../../examples/studies/study.yaml", "--base", base, "--name", "waited", "--wait", "1s")
	if code != cli.ExitTimedOut || !strings.Contains(errOut, "is still running after 1s") || len(strings.TrimSpace(out)) < 10 || strings.Contains(out, " ") {
		t.Fatalf("start --wait 1s: exit %d, printed %q: %s", code, out, errOut)
	}

	bad := t.TempDir() + "/bad.yaml"
	if err := os.WriteFile(bad, []byte("name: x\nstrategy: random\nobjective: loss\nbudget: {}\nspace: [{name: lr, kind: loguniform, lo: 0, hi: 1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = klique(rita, "study", "start", "-f", bad, "--base", base)
	if code != 1 || !strings.Contains(errOut, "loguniform(lo, hi) needs lo > 0") || !strings.Contains(errOut, "the budget is missing") {
		t.Fatalf("a bad study: exit %d: %s", code, errOut)
	}

	// An alias bomb is refused by the study file's budget before it is
	// decoded, with the limit in the message.
	bomb := t.TempDir() + "/bomb.yaml"
	if err := os.WriteFile(bomb, []byte("name: x\nstrategy: grid\nobjective: loss\nbudget: {trials: 4}\nspace: [{name: lr, kind: choice, values: "+
		docbudgettest.Anchors(8, 10)+"}, {name: b, kind: choice, values: "+docbudgettest.Last(8)+"}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = klique(rita, "study", "start", "-f", bomb, "--base", base)
	if code != 2 || !strings.Contains(errOut, "study file: ") || !strings.Contains(errOut, "aliases expanded; the limit is 1,000") {
		t.Fatalf("an alias bomb: exit %d: %s", code, errOut)
	}
}
