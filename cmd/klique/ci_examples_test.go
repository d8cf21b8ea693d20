package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/clitest"
)

// ciCommands reads the klique commands the CI examples run: the GitHub
// workflow's steps with the ids train, wait, report and gate, and the
// GitLab job's script lines that call klique (the CLI's installation and
// the posting of the comment are the CI system's, not ours).
func ciCommands(t *testing.T) map[string][]string {
	t.Helper()
	var gh struct {
		Jobs map[string]struct {
			Steps []struct {
				ID  string `yaml:"id"`
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	var gl map[string]struct {
		Script []string `yaml:"script"`
	}
	read := func(name string, v any) {
		b, err := os.ReadFile(filepath.Join("../../examples/ci", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	read("github-actions.yml", &gh)
	read("gitlab-ci.yml", &gl)
	out := map[string][]string{}
	for _, step := range gh.Jobs["train"].Steps {
		switch step.ID {
		case "train", "wait", "report", "gate":
			out["github"] = append(out["github"], strings.TrimSpace(step.Run))
		}
	}
	for _, line := range gl["train"].Script {
		if strings.HasPrefix(line, "klique ") {
			out["gitlab"] = append(out["gitlab"], line)
		}
	}
	for _, ci := range []string{"github", "gitlab"} {
		if len(out[ci]) != 4 {
			t.Fatalf("the %s example runs %d klique commands, want train, wait, report and gate: %q", ci, len(out[ci]), out[ci])
		}
	}
	return out
}

// TestCIExamplesRunAsWritten runs the klique commands of
// examples/ci/github-actions.yml and gitlab-ci.yml against a real control
// plane and a process worker, from a checkout of a branch, as a pull
// request's pipeline would: a change that keeps accuracy passes the gate,
// and a change that lowers it fails the gate (with the report written
// either way).
func TestCIExamplesRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server and a worker")
	}
	commands := ciCommands(t)
	const key = "klique-ci-example-bootstrap-key-0123456789abcdefghij"
	ctx, app := startControlPlane(t, key, 4*time.Minute, withEngine)
	klique, ok := cliAs(t, ctx, app.URL())
	ok(key, "apply", "-f", "../../examples/estate.yaml")
	ok(key, "create", "user", "ci-bot", "--group", "ml-research")
	botKey := strings.TrimSpace(ok(key, "create", "apikey", "--user", "ci-bot"))
	token := filepath.Join(t.TempDir(), "worker.token")
	if err := os.WriteFile(token, []byte(ok(key, "create", "worker-credential", "--pool", "bare-metal")), 0o600); err != nil {
		t.Fatal(err)
	}
	workerCtx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		c := &cli.CLI{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Server: app.URL()}
		cmd := newWorkerCmd(c)
		cmd.SetArgs([]string{"--token-file", token, "--pool", "bare-metal", "--gpus", "0,1", "--name", "ci-worker", "--work-dir", t.TempDir()})
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		done <- cmd.ExecuteContext(workerCtx)
	}()
	t.Cleanup(func() { stopWorker(); <-done })

	bin := filepath.Join(t.TempDir(), "klique")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The repository: its training script reports an accuracy that falls
	// as the learning rate leaves 0.1, minus a penalty the bad change sets.
	r := clitest.NewGitRepo(t)
	r.Write("train.py", `import json, os, sys
lr = float(sys.argv[sys.argv.index("--lr") + 1])
penalty = 0.0
accuracy = 0.9 - abs(lr - 0.1) - penalty
with open(os.environ["KLIQUE_METRICS_FILE"], "a") as f:
    f.write(json.dumps({"name": "accuracy", "value": accuracy, "step": 1}) + "\n")
print("accuracy", accuracy)
`)
	r.Write("requirements.txt", "")
	r.Git(r.Dir, "add", ".")
	r.Git(r.Dir, "commit", "-qm", "training")
	r.Git(r.Dir, "push", "-q", "origin", "HEAD:refs/heads/main")
	t.Chdir(r.Dir)

	// The baseline, run from main.
	base := strings.TrimSpace(ok(botKey, "run", "-q", "--resource", "1 A100", "--project", "fraud-models", "--name", "baseline",
		"--param", "lr=0.1", "--", "python3", "train.py", "--lr", "{lr}"))
	if out, errOut, code := klique(botKey, "task", "wait", base, "--timeout", "2m"); code != 0 {
		t.Fatalf("the baseline: exit %d: %s%s", code, out, errOut)
	}

	pipeline := func(t *testing.T, ci string, pr int) (outputs []string, codes []int) {
		t.Helper()
		env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"KLIQUE_SERVER="+app.URL(), "KLIQUE_API_KEY="+botKey, "KLIQUE_BASELINE="+base, "KLIQUE_CONFIG=",
			"PR_NUMBER="+strings.Repeat("1", pr), "CI_MERGE_REQUEST_IID="+strings.Repeat("2", pr))
		for _, command := range commands[ci] {
			cmd := exec.Command("bash", "-c", command)
			cmd.Dir, cmd.Env = r.Dir, env
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("%s: %v", command, err)
			}
			outputs, codes = append(outputs, string(out)), append(codes, code)
			if code != 0 && !strings.HasPrefix(command, "klique compare") {
				t.Fatalf("%s: exit %d:\n%s", command, code, out)
			}
		}
		return outputs, codes
	}
	branch := func(name, penalty string) {
		t.Helper()
		r.Git(r.Dir, "checkout", "-q", "-B", name, "origin/main")
		r.Write("train.py", strings.Replace(mustRead(t, filepath.Join(r.Dir, "train.py")), "penalty = 0.0", "penalty = "+penalty, 1))
		r.Git(r.Dir, "commit", "-qam", name)
		r.Git(r.Dir, "push", "-q", "-u", "origin", name)
	}

	for i, ci := range []string{"github", "gitlab"} {
		t.Run(ci+": a change that keeps accuracy passes", func(t *testing.T) {
			branch(ci+"-good", "0.005")
			outs, codes := pipeline(t, ci, i+1)
			if codes[3] != 0 || !strings.Contains(outs[3], "no regression against the baseline (1 rules)") {
				t.Fatalf("the gate: exit %d:\n%s", codes[3], outs[3])
			}
			report := mustRead(t, filepath.Join(r.Dir, "report.md"))
			if !strings.Contains(report, ": completed") || !strings.Contains(report, "| accuracy | 0.895 | 0.9 | 1 |") || !strings.Contains(report, "| lr | `0.1` |") {
				t.Fatalf("report.md:\n%s", report)
			}
		})
		t.Run(ci+": a change that lowers accuracy fails the gate", func(t *testing.T) {
			branch(ci+"-bad", "0.05")
			outs, codes := pipeline(t, ci, i+1)
			if codes[3] != 1 || !strings.Contains(outs[3], "has accuracy = 0.85 against 0.89 (the baseline's 0.9)") {
				t.Fatalf("the gate: exit %d, want 1 naming the regression:\n%s", codes[3], outs[3])
			}
		})
	}
}
