package agents_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents"
	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/server"
	"github.com/klique-ai/klique/internal/tunnel"
)

// tunnelGet sends GET path to an app instance through the control plane's
// end of the tunnels, as the router does, and returns the body.
func tunnelGet(ctx context.Context, tunnels *tunnel.Registry, target appnet.Target, path string) (string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return tunnels.Open(ctx, target) }}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://instance"+path, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return string(b), err
}

// TestTheTunnelReachesAnAppInstanceAcrossRestarts runs the real control
// plane and a process-mode worker on loopback, the worker holding its
// tunnel (the default). An app instance (python3 -m http.server) answers
// HTTP through the tunnel, with an address the control plane never dials;
// a stream for a task the worker does not run is refused with the
// worker's message; after the control plane restarts the worker's tunnel
// comes back and the instance answers again; once the worker stops, the
// control plane no longer holds its tunnel.
func TestTheTunnelReachesAnAppInstanceAcrossRestarts(t *testing.T) {
	t.Parallel()
	site := t.TempDir()
	if err := os.WriteFile(filepath.Join(site, "hello.txt"), []byte("served on a GPU host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := estate + `apps:
  catalogue:
    - name: web
      kind: session
      port: 8000
      healthPath: /
      run: {process: "python3 -m http.server {port} --bind 127.0.0.1 --directory ` + site + `"}
`
	cfg := &config.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapToken: adminKey, PublicURL: "http://127.0.0.1",
		TokenTTL: time.Hour, MaxBodyBytes: 8 << 20, LogFormat: "text", LogLevel: "error", ShutdownTimeout: 10 * time.Second,
		Engine: true, EngineInterval: 50 * time.Millisecond, WorkerLease: 5 * time.Second, TaskLogLimit: 1 << 20,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	start := func() *server.App {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		app, err := server.Start(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("start the control plane: %v", err)
		}
		return app
	}
	app := start()
	stopApp := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = app.Shutdown(ctx)
	}
	t.Cleanup(func() { stopApp() })
	url := app.URL()
	// The restarted control plane listens where the worker dials.
	cfg.Listen = strings.TrimPrefix(url, "http://")
	gql(t, url, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": doc})
	gql(t, url, adminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	alice := str(gql(t, url, adminKey, `mutation { createAPIKey(input: {name: "alice key", user: "alice"}) { secret } }`, nil), "createAPIKey", "secret")
	secret := str(gql(t, url, adminKey, `mutation { createWorkerCredential(pool: "bare-metal", name: "e2e") { secret } }`, nil),
		"createWorkerCredential", "secret")

	logs := &syncWriter{}
	w, err := agents.NewWorker(context.Background(), agents.Options{
		Server: url, Token: secret, Pool: "bare-metal", GPUs: "0,1", Mode: "process", WorkDir: t.TempDir(), TaskUIDs: "off",
		Grace: 2 * time.Second, Name: "gpu-host-tunnel", Version: "e2e", NvidiaSMI: filepath.Join(t.TempDir(), "absent"),
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Tune: func(c *worker.Config) {
			c.ClaimWait = 2 * time.Second
			c.AppProbeInterval = 100 * time.Millisecond
			c.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stopWorker()
			<-done
		}
	})

	d := gql(t, url, alice, `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"app": "web", "computeResource": "1 GPU", "project": "fraud-models", "values": map[string]any{}}})
	id := str(d, "launchApp", "id")
	q := `query($id: ID!) { appInstance(id: $id) { state address task { attempt worker { id } } } }`
	d = waitInstance(t, url, alice, q, id, logs, "the instance to be ready", instanceReady)
	workerID := str(d, "appInstance", "task", "worker", "id")
	attempt := int(get(d, "appInstance", "task", "attempt").(float64))
	// An address nothing listens on: the control plane must not dial the
	// instance itself, only the worker does.
	target := appnet.Target{TaskID: id, WorkerID: workerID, Attempt: attempt, Address: "192.0.2.1:9"}

	reach := func(what string) {
		t.Helper()
		var body string
		var err error
		if !eventually.Poll(20*time.Second, func() bool {
			body, err = tunnelGet(context.Background(), app.Tunnels, target, "/hello.txt")
			return err == nil
		}) {
			t.Fatalf("%s: %v (holds the tunnel: %v)\nworker log:\n%s", what, err, app.Tunnels.Holds(workerID), logs)
		}
		if body != "served on a GPU host\n" {
			t.Fatalf("%s: the instance answered %q", what, body)
		}
	}
	reach("through the tunnel")
	// What the router uses: with the tunnel held, Auto takes it (the
	// address is unreachable).
	c, err := (&appnet.Auto{Tunnels: app.Tunnels}).Reach(context.Background(), target)
	if err != nil {
		t.Fatalf("appnet.Auto with the tunnel held: %v", err)
	}
	_ = c.Close()

	for _, other := range []appnet.Target{
		{TaskID: "01JNOTATASKOFTHISWORKER0000", WorkerID: workerID, Attempt: 1},
		{TaskID: id, WorkerID: workerID, Attempt: attempt + 1},
	} {
		_, err := app.Tunnels.Open(context.Background(), other)
		var refused *tunnel.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Message, "runs no app instance "+other.TaskID) ||
			!strings.Contains(refused.Message, "reaches only the app instances its worker runs") {
			t.Fatalf("a stream for %+v: %v, want the worker's refusal", other, err)
		}
	}

	// The control plane restarts: the worker dials its tunnel again and
	// the instance (still running, its lease intact) answers again.
	stopApp()
	app = start()
	reach("after the control plane restarted")

	stopped = true
	stopWorker()
	if err := <-done; err != nil {
		t.Fatalf("the worker: %v", err)
	}
	eventually.True(t, "", func() bool { return !app.Tunnels.Holds(workerID) })
	if _, err := app.Tunnels.Open(context.Background(), target); !errors.Is(err, tunnel.ErrNoTunnel) {
		t.Fatalf("a stopped worker's instance: %v, want ErrNoTunnel", err)
	}
}
