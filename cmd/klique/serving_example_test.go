package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/eventually"
)

// servingCommands reads the commands examples/serving.yaml's header shows
// (its comment lines indented by three spaces; a line ending in a
// backslash goes on on the next): apply, launch, and the call.
func servingCommands(t *testing.T) []string {
	t.Helper()
	var cmds []string
	for _, line := range strings.Split(mustRead(t, "../../examples/serving.yaml"), "\n") {
		text, ok := strings.CutPrefix(line, "#   ")
		if !ok {
			continue
		}
		if n := len(cmds); n > 0 && strings.HasSuffix(cmds[n-1], "\\") {
			cmds[n-1] = strings.TrimSuffix(cmds[n-1], "\\") + " " + strings.TrimSpace(text)
			continue
		}
		cmds = append(cmds, strings.TrimSpace(text))
	}
	if len(cmds) != 3 || !strings.HasPrefix(cmds[0], "klique apply") || !strings.HasPrefix(cmds[1], "klique app launch") || !strings.HasPrefix(cmds[2], "curl ") {
		t.Fatalf("examples/serving.yaml's header shows %q, want klique apply, klique app launch and curl", cmds)
	}
	return cmds
}

// TestServingExampleWorksAsWritten runs the commands of
// examples/serving.yaml's header against a real control plane with
// examples/estate.yaml applied and a process worker for the bare-metal
// pool, on whose PATH a stand-in for vllm (the test tree's OpenAI-compatible
// model server) answers as vLLM would: the file creates the app, the
// route, the model and the alias and applies again without a change; the
// alias answers 503 naming the route until an instance is ready, then
// the instance answers the call through the gateway.
func TestServingExampleWorksAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server and a worker")
	}
	commands := servingCommands(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, b := range []struct{ out, pkg string }{{filepath.Join(bin, "klique"), "."}, {filepath.Join(dir, "openai-server"), "github.com/klique-ai/klique/agents/testdata/openai-server"}} {
		if out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	// vllm serve MODEL --host H --port P ...: the stand-in listens on P.
	vllm := "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --port ] && port=$2; shift; done\nexec " + filepath.Join(dir, "openai-server") + " --port \"$port\"\n"
	if err := os.WriteFile(filepath.Join(bin, "vllm"), []byte(vllm), 0o755); err != nil {
		t.Fatal(err)
	}
	// The worker's runner gives its tasks the environment it starts with.
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	const key = "klique-serving-example-bootstrap-key-0123456789abcdef"
	ctx, app := startControlPlane(t, key, 4*time.Minute, withEngine)
	_, ok := cliAs(t, ctx, app.URL())
	ok(key, "apply", "-f", "../../examples/estate.yaml")
	ok(key, "create", "user", "alice", "--group", "ml-research")
	alice := strings.TrimSpace(ok(key, "create", "apikey", "--user", "alice"))
	token := filepath.Join(dir, "worker.token")
	if err := os.WriteFile(token, []byte(ok(key, "create", "worker-credential", "--pool", "bare-metal")), 0o600); err != nil {
		t.Fatal(err)
	}
	workerCtx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	workerLog := &syncBuffer{}
	go func() {
		c := &cli.CLI{In: strings.NewReader(""), Out: workerLog, Err: workerLog, Server: app.URL()}
		cmd := newWorkerCmd(c)
		cmd.SetArgs([]string{"--token-file", token, "--pool", "bare-metal", "--gpus", "0,1", "--name", "serving-worker", "--work-dir", filepath.Join(dir, "work")})
		cmd.SetOut(workerLog)
		cmd.SetErr(workerLog)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		done <- cmd.ExecuteContext(workerCtx)
	}()
	t.Cleanup(func() { stopWorker(); <-done })

	run := func(command, apiKey string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", command)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "KLIQUE_SERVER="+app.URL(), "KLIQUE_API_KEY="+apiKey, "KLIQUE_CONFIG=", "KLIQUE_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", command, err, out)
		}
		return string(out)
	}
	out := run(commands[0], key)
	for _, want := range []string{"create app llama-8b", "create llm route llama-8b", "create llm model llama-3.1-8b", "create llm alias assistant", "4 created"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the output lacks %q:\n%s", commands[0], want, out)
		}
	}
	if again := run(commands[0], key); !strings.Contains(again, "no changes") {
		t.Errorf("the same file applied again: %s, want no changes", again)
	}
	if out := run(commands[2], alice); !strings.Contains(out, "route llama-8b has no running endpoint") || !strings.Contains(out, "klique app launch llama-8b") {
		t.Fatalf("the alias before any instance: %s, want a 503 naming the route and the launch", out)
	}

	instance := strings.TrimSpace(strings.SplitN(run(commands[1], alice), "\n", 2)[0])
	if !eventually.Poll(90*time.Second, func() bool {
		out = run(commands[2], alice)
		return strings.Contains(out, `"content":"served by instance `+instance+`"`)
	}) {
		t.Fatalf("the alias never reached instance %s; last answer: %s\nworker:\n%s", instance, out, workerLog.String())
	}
	if !strings.Contains(out, `"model":"meta-llama/Llama-3.1-8B-Instruct"`) {
		t.Errorf("the answer is not the route's model's: %s", out)
	}
	t.Logf("instance %s answered: %s", instance, out)
}
