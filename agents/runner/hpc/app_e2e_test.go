package hpc

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/server"
)

// appEstate is e2eEstate with a serving app whose batch line starts a tiny
// HTTP server on {port}.
const appEstate = e2eEstate + `apps:
  catalogue:
    - name: tiny
      kind: serving
      port: 8000
      healthPath: /
      run: {batch: "echo serving on {port} as $KLIQUE_APP_PORT; exec python3 -m http.server {port} --bind 0.0.0.0 --directory /tmp"}
`

// TestServingAppOnSlurm runs the real control plane on loopback and the
// HPC submitter against the real Slurm: a serving app launched on the
// Slurm pool is submitted as a batch job running its batch line; inside
// the job, task-run picks a free port on the node, fills {port} in,
// probes the health path and reports the instance ready with the node's
// name and that port (the submitter on the login node reports no
// readiness of its own); the address answers; stopApp cancels the job and
// the instance stops.
func TestServingAppOnSlurm(t *testing.T) {
	b := setupSlurm(t)
	cfg := &config.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapToken: e2eAdminKey, PublicURL: "http://127.0.0.1",
		TokenTTL: time.Hour, MaxBodyBytes: 8 << 20, LogFormat: "text", LogLevel: "error", ShutdownTimeout: 10 * time.Second,
		Engine: true, EngineInterval: 50 * time.Millisecond, WorkerLease: 10 * time.Second, TaskLogLimit: 1 << 20,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app, err := server.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = app.Shutdown(ctx)
	})
	url := app.URL()
	e2eGQL(t, url, e2eAdminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": appEstate})
	e2eGQL(t, url, e2eAdminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	alice := digStr(e2eGQL(t, url, e2eAdminKey, `mutation { createAPIKey(input: {name: "alice key", user: "alice"}) { secret } }`, nil), "createAPIKey", "secret")
	token := digStr(e2eGQL(t, url, e2eAdminKey, `mutation { createWorkerCredential(pool: "slurm", name: "login1") { secret } }`, nil),
		"createWorkerCredential", "secret")
	userMap := writeUserMap(t, b.dir, "users:\n  alice: "+slurmUser+"\n")
	logs := &lockedWriter{w: &bytes.Buffer{}}
	w, err := NewSubmitter(context.Background(), SubmitterOptions{
		Config: Config{Scheduler: "slurm", UserMap: userMap, Klique: filepath.Join(b.dir, "klique")},
		Server: url, Token: token, Pool: "slurm", Slots: 4, Name: "login1", WorkDir: filepath.Join(b.dir, "work"), Grace: 2 * time.Second,
		Version: "e2e", Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Tune: func(o *Options) {
			o.StatusInterval = 200 * time.Millisecond
			o.AppProbeInterval = 200 * time.Millisecond
			o.AppStartTimeout = time.Minute
		},
		TuneWorker: func(c *worker.Config) {
			c.ClaimWait = 2 * time.Second
			c.LogFlushInterval = 100 * time.Millisecond
			c.HeartbeatInterval = 200 * time.Millisecond
			c.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b.dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the submitter: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the submitter did not stop")
		}
	})

	const q = `query($id: ID!) { appInstance(id: $id) { state reason address task { status logs { lines { stream line } } } } }`
	d := e2eGQL(t, url, alice, `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id state } }`, map[string]any{"in": map[string]any{
		"app": "tiny", "computeResource": "2 GPUs", "project": "fraud-models", "values": map[string]any{}}})
	id := digStr(d, "launchApp", "id")
	wait := func(what string, until func(d map[string]any) bool) (map[string]any, string) {
		t.Helper()
		var d map[string]any
		var out []string
		if !eventually.Poll(90*time.Second, func() bool {
			d = e2eGQL(t, url, alice, q, map[string]any{"id": id})
			out = logLines(d, "appInstance", "task")
			return until(d)
		}) {
			last := out[max(0, len(out)-20):]
			t.Fatalf("timed out waiting for %s: state %q reason %q\nlast lines of the log:\n%s\nsubmitter:\n%s", what,
				digStr(d, "appInstance", "state"), digStr(d, "appInstance", "reason"), strings.Join(last, "\n"), logs)
		}
		return d, strings.Join(out, "\n")
	}
	// The log comes home every second (the job's reporter), its
	// readiness from the probe: wait for both.
	d, text := wait("the instance to be ready and its log to say it serves", func(d map[string]any) bool {
		return digStr(d, "appInstance", "state") == "ready" &&
			strings.Contains(strings.Join(logLines(d, "appInstance", "task"), "\n"), "serving on ")
	})
	addr := digStr(d, "appInstance", "address")
	host, port, err := net.SplitHostPort(addr)
	node, _ := os.Hostname()
	if err != nil || host != node || port == "8000" || port == "" {
		t.Fatalf("address %q: want the node's name %q and the port the job picked\nlog:\n%s", addr, node, text)
	}
	for _, want := range []string{
		"worker: an app instance: the job picks its port on its node",
		"worker: submitted to Slurm as job",
		"serving on " + port + " as " + port,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the instance's log lacks %q:\n%s", want, text)
		}
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the reported address does not answer: %v %v", resp, err)
	}
	resp.Body.Close()

	// The job holds its own tunnel, with its task credential: the control
	// plane reaches the instance through it, never dialling the node.
	w2 := e2eGQL(t, url, alice, `query($id: ID!) { task(id: $id) { attempt worker { id } } }`, map[string]any{"id": id})
	target := appnet.Target{TaskID: id, WorkerID: digStr(w2, "task", "worker", "id"), Attempt: int(dig(w2, "task", "attempt").(float64)), Address: "192.0.2.1:9"}
	if !eventually.Poll(30*time.Second, func() bool { return app.Tunnels.HoldsTask(target) }) {
		t.Fatalf("the job holds no tunnel for its task\nsubmitter:\n%s", logs)
	}
	through := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return app.Tunnels.Open(ctx, target)
	}}}
	resp, err = through.Get("http://instance/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the instance does not answer through the job's tunnel: %v %v\nlog:\n%s", resp, err, text)
	}
	resp.Body.Close()

	e2eGQL(t, url, alice, `mutation($id: ID!) { stopApp(id: $id) { state } }`, map[string]any{"id": id})
	d, text = wait("the instance to stop", func(d map[string]any) bool {
		return digStr(d, "appInstance", "state") == "stopped" && strings.Contains(text0(d), "CANCELLED")
	})
	if digStr(d, "appInstance", "address") != "" {
		t.Fatalf("a stopped instance keeps its address: %v", d)
	}
	if !eventually.Poll(20*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	}) {
		t.Fatalf("the job's server still answers at %s after stopApp\nlog:\n%s", addr, text)
	}
}

// text0 is an instance's log as one text.
func text0(d map[string]any) string {
	lines, _ := dig(d, "appInstance", "task", "logs", "lines").([]any)
	var out []string
	for _, l := range lines {
		out = append(out, digStr(l, "line"))
	}
	return strings.Join(out, "\n")
}
