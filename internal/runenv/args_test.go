package runenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestExpandArgsFillsDeclaredParametersOnly(t *testing.T) {
	args := []string{"python", "train.py", "--lr", "{lr}", "--name=run-{seed}-{lr}", `{"json": 1}`, "{unknown}"}
	got := ExpandArgs(args, map[string]string{"lr": "0.01", "seed": "7"})
	want := []string{"python", "train.py", "--lr", "0.01", "--name=run-7-0.01", `{"json": 1}`, "{unknown}"}
	if !slices.Equal(got, want) {
		t.Fatalf("ExpandArgs = %q, want %q", got, want)
	}
	if args[3] != "{lr}" {
		t.Fatal("ExpandArgs changed the recorded command")
	}
	if got := ExpandArgs(args, nil); &got[0] != &args[0] {
		t.Fatal("with no parameters the arguments were copied")
	}
}

func TestArgTemplatesNamesEachReferenceOnce(t *testing.T) {
	got := ArgTemplates([]string{"--lr", "{lr}", "--x={seed}-{lr}", "{}", "{ not}"})
	if !slices.Equal(got, []string{"lr", "seed"}) {
		t.Fatalf("ArgTemplates = %q", got)
	}
}

func TestExpandArgsKeepsAValueOneArgument(t *testing.T) {
	got := ExpandArgs([]string{"python", "train.py", "--name", "{name}"}, map[string]string{"name": "a b; rm -rf ~"})
	if want := []string{"python", "train.py", "--name", "a b; rm -rf ~"}; !slices.Equal(got, want) {
		t.Fatalf("ExpandArgs = %q, want %q", got, want)
	}
}

// TestShellScriptsGetParametersQuotedOrNotAtAll: a value never reaches a
// shell's script as text. Enqueue refuses a bare {lr} there and a {lr|shell}
// inside quotes (ScriptTemplateProblems); the fleet, filling what was
// enqueued, quotes every template where quoting holds and leaves the others
// as written; running what it gives through a real sh runs nothing of the
// value.
func TestShellScriptsGetParametersQuotedOrNotAtAll(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	values := []string{"x; touch " + marker, "$(touch " + marker + ")", "`touch " + marker + "`", "x\ntouch " + marker, "it's"}
	for _, v := range values {
		params := map[string]string{"lr": v}
		bare := []string{"sh", "-c", `printf '%s|' {lr}; printf '%s' "lr={lr}"`}
		if ps := ScriptTemplateProblems(bare, params); len(ps) != 1 || !strings.Contains(ps[0], `command argument 3 is the script sh -c runs: {lr} would be read as shell there; read "$KLIQUE_PARAM_LR" instead`) ||
			!strings.Contains(ps[0], "or write {lr|shell} to insert it quoted") {
			t.Fatalf("problems %q, want the bare {lr} refused, named once", ps)
		}
		quoted := []string{"sh", "-c", `printf '%s' {lr|shell}`}
		if ps := ScriptTemplateProblems(quoted, params); len(ps) != 0 {
			t.Fatalf("problems %q for {lr|shell}", ps)
		}
		argv := ExpandArgs(quoted, params)
		if want := []string{"sh", "-c", "printf '%s' " + shellQuoteForTest(v)}; !slices.Equal(argv, want) {
			t.Fatalf("ExpandArgs = %q, want %q", argv, want)
		}
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil || string(out) != v {
			t.Fatalf("the script printed %q (%v), want %q", out, err, v)
		}
		// What an older task recorded: the bare template is quoted, the one
		// inside double quotes is left as written.
		argv = ExpandArgs(bare, params)
		out, err = exec.Command(argv[0], argv[1:]...).Output()
		if err != nil || string(out) != v+"|lr={lr}" {
			t.Fatalf("the older script printed %q (%v), want %q", out, err, v+"|lr={lr}")
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the value %q ran a command", v)
		}
	}
}

func TestScriptTemplateProblems(t *testing.T) {
	params := map[string]string{"lr": "0.1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"python", "train.py", "--lr", "{lr}"}, ""},
		{[]string{"sh", "-c", "python train.py --lr {lr|shell}", "{lr}"}, ""},
		{[]string{"sh", "-c", "echo ${lr} {other}"}, ""},
		{[]string{"python", "train.py", "--lr={lr|shell}"}, "command argument 3: {lr|shell} quotes the value for a shell script, and this argument is not one"},
		{[]string{"bash", "-lc", `echo "{lr|shell}"`}, "command argument 3 is the script bash -lc runs: {lr|shell} stands inside quotes"},
		{[]string{"sh", "-c", "echo ( {lr|shell}"}, "the script does not parse as shell"},
	} {
		ps := ScriptTemplateProblems(tc.args, params)
		if tc.want == "" && len(ps) > 0 || tc.want != "" && (len(ps) != 1 || !strings.Contains(ps[0], tc.want)) {
			t.Errorf("ScriptTemplateProblems(%q) = %q, want %q", tc.args, ps, tc.want)
		}
	}
}

func shellQuoteForTest(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
