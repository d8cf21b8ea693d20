package autoscaler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents"
	"github.com/klique-ai/klique/agents/autoscaler"
	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/server"
)

// The local provider starts worker processes. In these tests the process
// is this test binary again, which runs the real worker daemon
// (agents.NewWorker, process mode) when this variable is set: the same
// code `klique worker` runs, without building the klique binary.
const workerEnv = "KLIQUE_AUTOSCALER_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		os.Exit(runTestWorker(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func runTestWorker(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var o agents.Options
	var tokenFile string
	fs.StringVar(&o.Pool, "pool", "", "")
	fs.StringVar(&o.Server, "server", "", "")
	fs.StringVar(&tokenFile, "token-file", "", "")
	fs.StringVar(&o.GPUs, "gpus", "", "")
	fs.StringVar(&o.Name, "name", "", "")
	fs.StringVar(&o.WorkDir, "work-dir", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o.Token, o.Mode, o.Version, o.Grace = strings.TrimSpace(string(b)), "process", "e2e", 2*time.Second
	o.NvidiaSMI = filepath.Join(o.WorkDir, "no-nvidia-smi")
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	o.Tune = func(c *worker.Config) {
		c.ClaimWait = time.Second
		c.LogFlushInterval = 100 * time.Millisecond
		c.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w, err := agents.NewWorker(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

const adminKey = "klique-autoscaler-e2e-bootstrap-key-0123456789abcdef"

const cloudEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2.50, currency: USD}
pools:
  - {name: cloud-burst, kind: cloud, capacity: 2, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, timeWeight: 1, pools: [cloud-burst]}
groups:
  - {name: ml-research}
policies:
  - group: ml-research
    reservation: 2
    limit: 2
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: fraud-models, group: ml-research, outputDestination: s3://ml-research/fraud-models}
`

// plane is a running control plane on loopback (embedded store, engine
// on, a 5 s worker lease).
type plane struct {
	url, alice, workerSecret string
}

func gql(t *testing.T, url, cred, query string, vars map[string]any) map[string]any {
	t.Helper()
	d, errs := gqlTry(t, url, cred, query, vars)
	if errs != "" {
		t.Fatalf("GraphQL: %s\nquery: %s", errs, query)
	}
	return d
}

func gqlTry(t *testing.T, url, cred, query string, vars map[string]any) (map[string]any, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("GraphQL answer %d: %s", resp.StatusCode, raw)
	}
	var msgs []string
	for _, e := range out.Errors {
		msgs = append(msgs, e.Message)
	}
	return out.Data, strings.Join(msgs, "; ")
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func startPlane(t *testing.T, estate string) *plane {
	t.Helper()
	cfg := &config.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapToken: adminKey, PublicURL: "http://127.0.0.1",
		TokenTTL: time.Hour, MaxBodyBytes: 8 << 20, LogFormat: "text", LogLevel: "error", ShutdownTimeout: 10 * time.Second,
		Engine: true, EngineInterval: 50 * time.Millisecond, WorkerLease: 5 * time.Second, TaskLogLimit: 1 << 20,
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
	p := &plane{url: app.URL()}
	gql(t, p.url, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": estate})
	gql(t, p.url, adminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	p.alice = str(gql(t, p.url, adminKey, `mutation { createAPIKey(input: {name: "alice key", user: "alice"}) { secret } }`, nil), "createAPIKey", "secret")
	p.workerSecret = str(gql(t, p.url, adminKey, `mutation { createWorkerCredential(pool: "cloud-burst", name: "autoscaler") { secret } }`, nil),
		"createWorkerCredential", "secret")
	return p
}

func (p *plane) enqueue(t *testing.T, name, script string) string {
	t.Helper()
	d := gql(t, p.url, p.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": name, "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"sh", "-c", script},
	}})
	return str(d, "enqueueTask", "id")
}

// waitFor polls query as cred until cond holds.
func waitFor(t *testing.T, url, cred, what, query string, vars map[string]any, limit time.Duration, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var d map[string]any
	if !eventually.Poll(limit, func() bool { d = gql(t, url, cred, query, vars); return cond(d) }) {
		t.Fatalf("waiting for %s: %v", what, d)
	}
	return d
}

// localProvider runs this test binary as the worker processes.
func localProvider(t *testing.T) *autoscaler.Local {
	t.Helper()
	l := &autoscaler.Local{Dir: t.TempDir(), Command: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}}
	t.Cleanup(l.Close)
	return l
}

// runAutoscaler opens the pool's autoscaler through the control plane and
// runs it until stop is called.
func runAutoscaler(t *testing.T, url, token string, local *autoscaler.Local) (stop func()) {
	t.Helper()
	a, err := autoscaler.Open(context.Background(), autoscaler.Options{Server: url, Token: token, Pool: "cloud-burst", Local: local,
		Version: "e2e", Interval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the autoscaler: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

const autoscalersQuery = `{ autoscalers { name online message lastHeartbeatAt maxGpus
	instances { id worker state market gpus } pool { name autoscaler { name } } } workers { hostname online } }`

// TestScaleFromZeroWithTheLocalProvider runs the whole path on loopback:
// a pool with no worker takes a task (the engine places it on declared
// capacity), the autoscaler starts a worker process, the task completes,
// and after the idle timeout the instance is gone: back to zero. Then the
// autoscaler stops and the orchestration view says it is down.
func TestScaleFromZeroWithTheLocalProvider(t *testing.T) {
	t.Parallel()
	p := startPlane(t, cloudEstate)
	url := p.url

	if _, errs := gqlTry(t, url, adminKey, `mutation { createAutoscaler(input: {name: "burst", pool: "cloud-burst", provider: LOCAL,
		instanceTypes: [{name: "local-1", gpus: 1}], maxInstances: 1}) { id } }`, nil); !strings.Contains(errs, "pool cloud-burst declares 2 GPUs but this autoscaler brings at most 1 (1 instances × 1 GPUs)") {
		t.Fatalf("an autoscaler that cannot bring the pool's capacity: %q", errs)
	}
	d := gql(t, url, adminKey, `mutation { createAutoscaler(input: {name: "burst", pool: "cloud-burst", provider: LOCAL,
		instanceTypes: [{name: "local-1", gpus: 1}], maxInstances: 2, idleTimeoutSeconds: 2, spinUpTimeoutSeconds: 60}) { id online message maxGpus } }`, nil)
	if get(d, "createAutoscaler", "online") != false || !strings.Contains(str(d, "createAutoscaler", "message"), "never reported") {
		t.Fatalf("a new autoscaler: %v", d)
	}

	// Scale from zero: the task is placed on a pool with no worker.
	id := p.enqueue(t, "hello-cloud", `echo "hello from $KLIQUE_WORKER"`)
	taskQuery := `query($id: ID!) { task(id: $id) { status reason worker { hostname } logs { lines { line } } } }`
	waitFor(t, url, p.alice, "the task placed on the empty pool", taskQuery, map[string]any{"id": id}, 20*time.Second,
		func(d map[string]any) bool { return str(d, "task", "status") == "PLACED" })
	if w := gql(t, url, adminKey, `{ workers { hostname } }`, nil); len(get(w, "workers").([]any)) != 0 {
		t.Fatalf("workers before the autoscaler ran: %v", w)
	}

	local := localProvider(t)
	stop := runAutoscaler(t, url, p.workerSecret, local)
	d = waitFor(t, url, p.alice, "the task to complete on an autoscaled worker", taskQuery, map[string]any{"id": id}, 60*time.Second,
		func(d map[string]any) bool {
			s := str(d, "task", "status")
			if s == "FAILED" || s == "ABORTED" {
				t.Fatalf("task ended %s: %v", s, d)
			}
			return s == "COMPLETED"
		})
	host := str(d, "task", "worker", "hostname")
	if !strings.HasPrefix(host, "burst-") || !strings.Contains(fmt.Sprint(get(d, "task", "logs")), "hello from "+host) {
		t.Fatalf("the task ran on %q: %v", host, d)
	}
	d = gql(t, url, adminKey, autoscalersQuery, nil)
	as := get(d, "autoscalers").([]any)[0]
	if get(as, "online") != true || str(as, "pool", "autoscaler", "name") != "burst" {
		t.Fatalf("the autoscaler while it runs: %v", as)
	}

	// The instance shows in the view (as soon as the daemon syncs after
	// starting it), then goes: back to zero after the idle timeout.
	waitFor(t, url, adminKey, "the instance in the view", autoscalersQuery, nil, 30*time.Second, func(d map[string]any) bool {
		as := get(d, "autoscalers").([]any)[0]
		in, _ := get(as, "instances").([]any)
		return len(in) == 1 && str(in[0], "worker") == host && get(in[0], "gpus") == 1.0
	})
	waitFor(t, url, adminKey, "the idle instance to go", autoscalersQuery, nil, 30*time.Second, func(d map[string]any) bool {
		as := get(d, "autoscalers").([]any)[0]
		return len(get(as, "instances").([]any)) == 0
	})
	if list, err := local.List(context.Background(), nil); err != nil || len(list) != 0 {
		t.Fatalf("worker processes after scale-down: %v, %v", list, err)
	}
	audit := gql(t, url, adminKey, `{ auditLog(first: 200) { edges { node { action detail } } } }`, nil)
	if !strings.Contains(fmt.Sprint(audit), "worker.registered") {
		t.Fatalf("no worker registered in the audit trail: %v", audit)
	}

	// The autoscaler goes down: the view says so once a lease has passed.
	stop()
	waitFor(t, url, adminKey, "the autoscaler to show as down", autoscalersQuery, nil, 15*time.Second, func(d map[string]any) bool {
		as := get(d, "autoscalers").([]any)[0]
		return get(as, "online") == false && strings.Contains(str(as, "message"), "the autoscaler daemon is down")
	})
}
