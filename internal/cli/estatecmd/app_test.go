package estatecmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAppCommands drives 'klique app' against a real control plane: the
// catalogue, a launch with --param, an export and a launch --from the
// exported file, the refusals of the platform's rules with their
// messages, usage errors (exit 2), and stop.
func TestAppCommands(t *testing.T) {
	const key = "klique-app-test-bootstrap-key-0123456789abcdefghijkl"
	ctx, app := startControlPlane(t, key, 120*time.Second)
	klique, ok := cliAs(t, ctx, app.URL())
	refused := func(apiKey, want string, args ...string) {
		t.Helper()
		_, errOut, code := klique(apiKey, args...)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Fatalf("klique %s: exit %d: %q, want exit 1 saying %q", strings.Join(args, " "), code, errOut, want)
		}
	}
	ok(key, "apply", "-f", "../../../examples/estate.yaml")
	ok(key, "create", "user", "rita", "--group", "ml-research")
	ok(key, "create", "user", "vic", "--group", "vision")
	rita := strings.TrimSpace(ok(key, "create", "apikey", "--user", "rita"))
	vic := strings.TrimSpace(ok(key, "create", "apikey", "--user", "vic"))

	if out := ok(rita, "app", "ls"); !strings.Contains(out, "vllm") || !strings.Contains(out, "claude-code") || !strings.Contains(out, "session") {
		t.Fatalf("klique app ls:\n%s", out)
	}

	out := ok(rita, "app", "launch", "sglang", "--resource", "8 GPUs", "--project", "fraud-models",
		"--param", "model=Qwen/Qwen2.5-7B-Instruct", "--param", "context_length=16384")
	id := strings.SplitN(out, "\n", 2)[0]
	if !strings.Contains(out, "launched sglang-rita-1 (app sglang): waiting; it will be served at /apps/"+id+"/") {
		t.Fatalf("klique app launch:\n%s", out)
	}
	task := ok(rita, "get", "task", id, "-o", "json")
	if !strings.Contains(task, `"--tp"`) || !strings.Contains(task, `"16384"`) {
		t.Fatalf("the instance's task:\n%s", task)
	}

	// export, then launch --from the file: the form's values travel as JSON.
	file := filepath.Join(t.TempDir(), "launch.json")
	exported := ok(rita, "app", "export", "llama-cpp", "--resource", "1 GPU", "--project", "fraud-models", "--param", "model=ggml-org/gemma-3-1b-it-GGUF")
	var doc map[string]any
	if err := json.Unmarshal([]byte(exported), &doc); err != nil {
		t.Fatalf("export is not JSON: %v\n%s", err, exported)
	}
	if v, _ := doc["values"].(map[string]any); v["gpu_layers"] != float64(999) || v["model"] != "ggml-org/gemma-3-1b-it-GGUF" || doc["computeResource"] != "1 GPU" {
		t.Fatalf("export: %s", exported)
	}
	if err := os.WriteFile(file, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	out = ok(rita, "app", "launch", "--from", file, "--param", "gpu_layers=10", "-o", "json")
	var launched struct {
		ID     string
		Values map[string]any
	}
	if err := json.Unmarshal([]byte(out), &launched); err != nil || launched.Values["gpu_layers"] != float64(10) {
		t.Fatalf("launch --from: %v\n%s", err, out)
	}

	// Refusals, each in the platform's words.
	refused(rita, `field "context_length"`, "app", "launch", "vllm", "--resource", "1 GPU", "--project", "fraud-models", "--param", "model=m", "--param", "context_length=1")
	refused(vic, "the compute resource '1 A100' is not open to group vision", "app", "launch", "jupyterlab", "--resource", "1 A100", "--project", "vision-detect")
	ok(key, "app", "lock", "jupyterlab")
	refused(vic, "app 'jupyterlab' is locked by an admin", "app", "launch", "jupyterlab", "--resource", "1 GPU", "--project", "vision-detect")
	refused(vic, "no app instance", "app", "stop", id)

	// The launch rules, set with 'klique apply' of an apps: section.
	rules := func(section string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "apps.yaml")
		if err := os.WriteFile(f, []byte("apiVersion: klique/v1\nkind: Estate\napps:\n"+section), 0o600); err != nil {
			t.Fatal(err)
		}
		ok(key, "apply", "-f", f)
	}
	launchCode := []string{"app", "launch", "code-server", "--resource", "1 GPU", "--project", "fraud-models"}
	rules("  running: 2\n")
	refused(rita, "the company's quota of 2 running apps is reached; stop one of yours: sglang-rita-1, llama-cpp-rita-1", launchCode...)
	rules("  running: 0\n  groups: [{group: ml-research, running: 2}]\n")
	refused(rita, "group ml-research's quota of 2 running apps is reached; stop one of yours: sglang-rita-1, llama-cpp-rita-1", launchCode...)
	rules("  launches: disabled\n")
	refused(rita, "app launches are switched off for the whole company by an admin", launchCode...)
	if out := ok(key, "export"); !strings.Contains(out, `"launches": "disabled"`) || !strings.Contains(out, `"name": "jupyterlab"`) {
		t.Fatalf("klique export lacks the apps section:\n%s", out)
	}

	// Usage errors change nothing and exit 2.
	for _, args := range [][]string{
		{"app", "launch", "vllm", "--project", "fraud-models"},
		{"app", "launch", "--resource", "1 GPU"},
		{"app", "launch", "vllm", "--resource", "1 GPU", "--param", "model"},
		{"app", "stop"},
	} {
		if _, errOut, code := klique(rita, args...); code != 2 {
			t.Fatalf("klique %s: exit %d, want 2: %s", strings.Join(args, " "), code, errOut)
		}
	}

	if out := ok(rita, "app", "ls", "--instances", "--active"); !strings.Contains(out, id) || !strings.Contains(out, "sglang-rita-1") {
		t.Fatalf("klique app ls --instances:\n%s", out)
	}
	// open prints the instance's URL on the control plane and its state.
	out = ok(rita, "app", "open", id)
	if lines := strings.Split(out, "\n"); len(lines) < 2 || lines[0] != app.URL()+"/apps/"+id+"/" ||
		!strings.HasPrefix(lines[1], "sglang-rita-1 ("+id+"): waiting") {
		t.Fatalf("klique app open:\n%s", out)
	}
	refused(vic, "no app instance", "app", "open", id)
	if _, errOut, code := klique(rita, "app", "open"); code != 2 {
		t.Fatalf("klique app open without an id: exit %d, want 2: %s", code, errOut)
	}

	if out := ok(rita, "app", "stop", id); !strings.Contains(out, "stopped sglang-rita-1") || !strings.Contains(out, "stopped by rita") {
		t.Fatalf("klique app stop: %s", out)
	}
}
