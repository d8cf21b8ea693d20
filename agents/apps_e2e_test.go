package agents_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/eventually"
)

const instanceQuery = `query($id: ID!) { appInstance(id: $id) { id state reason address url task { status exitCode spec { command } } } }`

// waitInstance polls an app instance with q (which takes $id) as cred
// until cond holds of the answer, failing after 40 s with the worker's log.
func waitInstance(t *testing.T, url, cred, q, id string, logs *syncWriter, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var d map[string]any
	if !eventually.Poll(40*time.Second, func() bool { d = gql(t, url, cred, q, map[string]any{"id": id}); return cond(d) }) {
		t.Fatalf("waiting for %s: instance is %v\nworker log:\n%s", what, d, logs)
	}
	return d
}

// instanceReady is waitInstance's condition for an instance that is ready.
func instanceReady(d map[string]any) bool { return str(d, "appInstance", "state") == "ready" }

// TestAppInstanceOnAProcessWorker runs the real control plane and a
// process-mode worker on loopback: a session app (python3 -m http.server
// on the port the worker picks) becomes READY with an address that
// answers HTTP, stopApp kills its process, and an app whose process exits
// with code 3 is reported failed with the exit code and its last lines,
// and one that exits with code 0 is failed too: an app never completes;
// one that never answers is failed after the start timeout.
func TestAppInstanceOnAProcessWorker(t *testing.T) {
	t.Parallel()
	crash := filepath.Join(t.TempDir(), "crash.py")
	if err := os.WriteFile(crash, []byte("import sys\nprint('loading the model', flush=True)\nprint('boom: no model at /models/missing', flush=True)\nsys.exit(3)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	quits := filepath.Join(t.TempDir(), "quits.py")
	if err := os.WriteFile(quits, []byte("print('nothing to serve', flush=True)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sleeper := filepath.Join(t.TempDir(), "sleeper.py")
	if err := os.WriteFile(sleeper, []byte("import time\nprint('warming up, never listening', flush=True)\ntime.sleep(120)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := estate + fmt.Sprintf(`apps:
  catalogue:
    - name: web
      kind: session
      port: 8000
      healthPath: /
      run: {process: "python3 -m http.server {port} --bind 127.0.0.1 --directory {dir}"}
      form: {type: object, properties: {dir: {type: string, default: /tmp}}}
    - name: crash
      kind: session
      port: 8000
      run: {process: "python3 %s"}
    - name: quits
      kind: session
      port: 8000
      run: {process: "python3 %s"}
    - name: sleeper
      kind: session
      port: 8000
      run: {process: "python3 %s"}
`, crash, quits, sleeper)
	e := startControlPlane(t, doc)
	_, logs := e.startWorkerTuned(t, "gpu-host-apps", "0,1", func(c *worker.Config) {
		c.AppProbeInterval = 100 * time.Millisecond
		c.AppStartTimeout = 4 * time.Second
	})
	launch := func(app string) string {
		d := gql(t, e.url, e.alice, `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id state } }`, map[string]any{"in": map[string]any{
			"app": app, "computeResource": "1 GPU", "project": "fraud-models", "values": map[string]any{}}})
		return str(d, "launchApp", "id")
	}
	wait := func(id, what string, cond func(map[string]any) bool) map[string]any {
		t.Helper()
		return waitInstance(t, e.url, e.alice, instanceQuery, id, logs, what, cond)
	}

	web := launch("web")
	d := wait(web, "the web app to be ready", func(d map[string]any) bool { return str(d, "appInstance", "state") == "ready" })
	addr := str(d, "appInstance", "address")
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":8000") {
		t.Fatalf("address %q: want 127.0.0.1 and a port the worker picked, not the catalogue's 8000", addr)
	}
	cmd := fmt.Sprint(get(d, "appInstance", "task", "spec", "command"))
	if !strings.Contains(cmd, "{port}") {
		t.Fatalf("the task's command %s should leave {port} for the worker", cmd)
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("the ready instance's address does not answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the ready instance answers %d", resp.StatusCode)
	}
	// Others see it ready (the admin) through the same field.
	if a := gql(t, e.url, adminKey, instanceQuery, map[string]any{"id": web}); str(a, "appInstance", "address") != addr {
		t.Fatalf("the admin sees %v", a)
	}

	gql(t, e.url, e.alice, `mutation($id: ID!) { stopApp(id: $id) { state } }`, map[string]any{"id": web})
	wait(web, "the web app to stop", func(d map[string]any) bool { return str(d, "appInstance", "state") == "stopped" })
	eventually.Within(t, 15*time.Second, "the stopped instance's process to stop answering at "+addr, func() bool {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + addr + "/")
		if err != nil {
			return true // the process is gone
		}
		resp.Body.Close()
		return false
	})

	bad := launch("crash")
	d = wait(bad, "the crashing app to fail", func(d map[string]any) bool { return str(d, "appInstance", "state") == "failed" })
	reason := str(d, "appInstance", "reason")
	if !strings.Contains(reason, "exit code 3") || !strings.Contains(reason, "loading the model | boom: no model at /models/missing") {
		t.Fatalf("the failed instance's reason %q should give the exit code and its last lines", reason)
	}
	if get(d, "appInstance", "task", "exitCode") != 3.0 || str(d, "appInstance", "address") != "" {
		t.Fatalf("failed instance: %v", d)
	}

	// An app never completes on its own: an exit with code 0 fails it too.
	done := launch("quits")
	d = wait(done, "the app that quits to fail", func(d map[string]any) bool {
		s := str(d, "appInstance", "state")
		return s == "failed" || s == "stopped"
	})
	if reason := str(d, "appInstance", "reason"); str(d, "appInstance", "state") != "failed" || str(d, "appInstance", "task", "status") != "FAILED" ||
		!strings.Contains(reason, "exit code 0") || !strings.Contains(reason, "never completes on its own") || !strings.Contains(reason, "nothing to serve") {
		t.Fatalf("an app whose process exited 0: %v", d)
	}

	// One that never answers on its health path is stopped after the
	// start timeout and reported failed, with its last line.
	slow := launch("sleeper")
	d = wait(slow, "the app that never answers to fail", func(d map[string]any) bool {
		s := str(d, "appInstance", "state")
		return s == "failed" || s == "stopped" || s == "ready"
	})
	if reason := str(d, "appInstance", "reason"); str(d, "appInstance", "state") != "failed" ||
		!strings.Contains(reason, "did not answer on its health path within 4s") || !strings.Contains(reason, "warming up, never listening") {
		t.Fatalf("an app that never answered: %v", d)
	}
}
