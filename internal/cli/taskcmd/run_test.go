package taskcmd_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/cli/clitest"
	"github.com/klique-ai/klique/internal/codestate"
	pysdk "github.com/klique-ai/klique/sdk/python"
)

// dryRun runs 'klique run --dry-run' in dir and returns what it would send,
// or its error and exit code.
func dryRun(t *testing.T, dir string, args ...string) (map[string]any, string, int) {
	t.Helper()
	t.Chdir(dir)
	isolateCLI(t, "http://127.0.0.1:1", "")
	code, out, errOut := misuse(context.Background(), append([]string{"run", "--dry-run", "-o", "json"}, args...)...)
	if code != 0 {
		return nil, errOut, code
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("klique run --dry-run printed no JSON: %v\n%s", err, out)
	}
	return in, errOut, 0
}

func TestRunRecordsTheCheckout(t *testing.T) {
	r := clitest.NewGitRepo(t)
	r.Write("src/train.py", "import sys\nprint('args', sys.argv[1:])\nprint('changed')\n")

	in, note, code := dryRun(t, filepath.Join(r.Dir, "src"), "--resource", "1 GPU", "--param", "lr=0.1",
		"--", "python3", "train.py", "--lr", "{lr}", "--seed", "{seed}")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, note)
	}
	if in["repository"] != r.Remote || in["commit"] != r.Commit || in["workingDir"] != "src" {
		t.Fatalf("recorded %v, want remote %s at %s in src", in, r.Remote, r.Commit)
	}
	if diff, _ := in["diff"].(string); !strings.Contains(diff, "+print('changed')") || !strings.Contains(diff, "a/src/train.py") {
		t.Fatalf("diff = %q, want the uncommitted change to src/train.py", diff)
	}
	if cmd, _ := in["command"].([]any); len(cmd) != 6 || cmd[4] != "--seed" || cmd[3] != "{lr}" {
		t.Fatalf("command = %v, want it as given, templates kept", in["command"])
	}
	if pk, _ := in["packages"].([]any); !slices.Equal(toStrings(pk), []string{"numpy==2.1.0", "requests>=2"}) {
		t.Fatalf("packages = %v, want those of requirements.txt", in["packages"])
	}
	if !strings.Contains(note, "{seed} in the command names no --param") {
		t.Fatalf("no note on the undeclared template: %q", note)
	}

	// A clean checkout sends no diff.
	r.Git(r.Dir, "checkout", "-q", "--", ".")
	in, _, _ = dryRun(t, r.Dir, "--no-packages", "--", "python3", "src/train.py")
	if _, ok := in["diff"]; ok || in["workingDir"] != nil || in["packages"] != nil {
		t.Fatalf("a clean checkout at its root recorded %v", in)
	}
}

func TestRunRefusesWhatAWorkerCouldNotReproduce(t *testing.T) {
	r := clitest.NewGitRepo(t)
	r.Write("data/notes.txt", "x\n")
	r.Write("run.log", "ignored\n")

	_, msg, code := dryRun(t, r.Dir, "--", "python3", "src/train.py")
	if code != 1 || !strings.Contains(msg, "files git does not track would be missing on the worker: data/notes.txt;") || strings.Contains(msg, "run.log") {
		t.Fatalf("exit %d: %q, want the untracked file named (and not the ignored one)", code, msg)
	}
	in, _, _ := dryRun(t, r.Dir, "--include-untracked", "--", "python3", "src/train.py")
	if diff, _ := in["diff"].(string); !strings.Contains(diff, "b/data/notes.txt") || !strings.Contains(diff, "new file mode") {
		t.Fatalf("--include-untracked: diff = %q", diff)
	}
	if st := r.Git(r.Dir, "status", "--porcelain"); !strings.Contains(st, "?? data/") {
		t.Fatalf("--include-untracked changed the user's index:\n%s", st)
	}
	in, _, _ = dryRun(t, r.Dir, "--ignore-untracked", "--", "python3", "src/train.py")
	if _, ok := in["diff"]; ok {
		t.Fatalf("--ignore-untracked sent %v", in["diff"])
	}
	if err := os.RemoveAll(filepath.Join(r.Dir, "data")); err != nil {
		t.Fatal(err)
	}

	// A commit the remote does not have.
	r.Write("src/model.py", "W = 1\n")
	r.Git(r.Dir, "add", "src/model.py")
	r.Git(r.Dir, "commit", "-qm", "local")
	local := strings.TrimSpace(r.Git(r.Dir, "rev-parse", "HEAD"))
	_, msg, code = dryRun(t, r.Dir, "--", "python3", "src/train.py")
	if code != 1 || !strings.Contains(msg, "commit "+local[:7]+" is not on remote origin") || !strings.Contains(msg, "--push") || !strings.Contains(msg, "--diff-only") {
		t.Fatalf("exit %d: %q, want the unpushed commit refused with both ways out", code, msg)
	}
	in, _, _ = dryRun(t, r.Dir, "--diff-only", "--", "python3", "src/train.py")
	if in["commit"] != r.Commit || !strings.Contains(in["diff"].(string), "+W = 1") {
		t.Fatalf("--diff-only recorded %v at %v, want the remote's commit %s and the local commit as diff", in["diff"], in["commit"], r.Commit)
	}
	in, _, _ = dryRun(t, r.Dir, "--push", "--", "python3", "src/train.py")
	if in["commit"] != local {
		t.Fatalf("--push --dry-run recorded commit %v, want %s", in["commit"], local)
	}
	if remote := strings.TrimSpace(r.Git(r.Remote, "rev-parse", "main")); remote != r.Commit {
		t.Fatalf("a dry run pushed: the remote is at %s", remote)
	}
	c, err := codestate.Capture(context.Background(), r.Dir, []string{"python3", "src/train.py"}, codestate.Options{Push: true})
	if err != nil || c.Commit != local {
		t.Fatalf("--push: %v, commit %v, want %s", err, c, local)
	}
	if remote := strings.TrimSpace(r.Git(r.Remote, "rev-parse", "main")); remote != local {
		t.Fatalf("--push left the remote's main at %s, want %s", remote, local)
	}

	// Options that contradict each other are usage errors.
	if _, msg, code := dryRun(t, r.Dir, "--push", "--diff-only", "--", "true"); code != 2 || !strings.Contains(msg, "pass one") {
		t.Fatalf("exit %d: %q", code, msg)
	}
	if _, msg, code := dryRun(t, r.Dir); code != 2 || !strings.Contains(msg, "say what to run after --") {
		t.Fatalf("exit %d: %q", code, msg)
	}
}

func TestRunUploadsAScriptFromOutsideACheckout(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.py"), []byte("print('hi')\nprint('no newline')"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	t.Setenv("VIRTUAL_ENV", "")
	in, msg, code := dryRun(t, dir, "--", "python3", "-u", "hello.py", "--n", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if _, ok := in["repository"]; ok {
		t.Fatalf("outside a checkout a repository was recorded: %v", in)
	}
	diff, _ := in["diff"].(string)
	if !strings.Contains(diff, "+++ b/hello.py") || !strings.Contains(diff, "+print('no newline')\n\\ No newline at end of file") {
		t.Fatalf("diff = %q", diff)
	}
	// The diff git itself would write, applied in an empty directory,
	// gives the script back byte for byte.
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "p.diff"), []byte(diff), 0o644); err != nil {
		t.Fatal(err)
	}
	apply := exec.Command("git", "apply", "p.diff")
	apply.Dir = work
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "hello.py")); string(b) != "print('hi')\nprint('no newline')" {
		t.Fatalf("applied script = %q", b)
	}

	if _, msg, code := dryRun(t, dir, "--", "python3", "../outside.py"); code != 0 || msg != "" {
		// ../outside.py does not exist: nothing to upload, nothing refused.
		t.Fatalf("exit %d: %q", code, msg)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "outside.py"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, msg, code := dryRun(t, dir, "--", "python3", "../outside.py"); code != 1 || !strings.Contains(msg, "is outside the current directory") {
		t.Fatalf("exit %d: %q, want the script outside refused", code, msg)
	}
}

func toStrings(v []any) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i], _ = x.(string)
	}
	return out
}

func TestRunRecordsNoCredentialOfTheRemote(t *testing.T) {
	for raw, want := range map[string]string{
		"https://gitlab-ci-token:glcbt-secret@gitlab.example.com/ml/fraud.git": "https://gitlab.example.com/ml/fraud.git",
		"https://x-access-token:ghs_secret@github.com/ml/fraud":                "https://github.com/ml/fraud",
		"git@github.com:ml/fraud.git":                                          "git@github.com:ml/fraud.git",
		"ssh://git@git.corp:2222/ml/fraud.git":                                 "ssh://git@git.corp:2222/ml/fraud.git",
		"ssh://git:hunter2@git.corp/ml/fraud.git":                              "ssh://git@git.corp/ml/fraud.git",
		"../remote.git": "/repo/remote.git",
	} {
		if got := codestate.CloneURL("/repo/project", raw); got != want {
			t.Errorf("codestate.CloneURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestRunRecordsTheSDKAsTheControlPlaneServesIt: in a virtual environment
// the SDK was pip-installed into from a path ('pip install ./sdk/python',
// which pip freeze lists as "klique @ file:///…"), the run records the SDK
// as the control plane serves it, which a worker on another host can
// install; the other packages stay, and --package is taken as given.
func TestRunRecordsTheSDKAsTheControlPlaneServesIt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte("import klique\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An environment whose python answers pip freeze as a real one would.
	venv := filepath.Join(t.TempDir(), "venv")
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	freeze := "#!/bin/sh\nprintf 'numpy==1.26.4\\nklique @ file:///home/alice/klique/sdk/python\\n'\n"
	if err := os.WriteFile(filepath.Join(venv, "bin", "python"), []byte(freeze), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	t.Setenv("VIRTUAL_ENV", venv)
	in, msg, code := dryRun(t, dir, "--", "python3", "train.py")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	pkgs, _ := in["packages"].([]any)
	want := []string{"numpy==1.26.4", "klique @ http://127.0.0.1:1/sdk/python/" + pysdk.WheelName()}
	if !slices.Equal(toStrings(pkgs), want) {
		t.Fatalf("packages %v, want %q", in["packages"], want)
	}
	in, _, _ = dryRun(t, dir, "--package", "klique @ file:///srv/klique", "--", "python3", "train.py")
	if pkgs, _ := in["packages"].([]any); !slices.Equal(toStrings(pkgs), []string{"klique @ file:///srv/klique"}) {
		t.Fatalf("--package: packages %v, want it as given", in["packages"])
	}
}
