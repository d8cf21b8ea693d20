package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents"
	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/server"
	"github.com/klique-ai/klique/internal/store"
)

const adminKey = "klique-e2e-bootstrap-key-0123456789abcdefghijklmnopq"

const estate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: a100-80gb, memoryGb: 80, pricePerGpuHour: 1.60, currency: USD}
pools:
  - {name: bare-metal, kind: bare_metal, capacity: 2, gpuClass: a100-80gb}
profiles:
  - {name: one-gpu, size: 1, timeWeight: 1, pools: [bare-metal]}
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

// gql runs one GraphQL request that must succeed.
func gql(t *testing.T, url, cred, query string, vars map[string]any) map[string]any {
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
		Errors []any          `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Errors) > 0 || resp.StatusCode != http.StatusOK {
		t.Fatalf("GraphQL %d: %s\nquery: %s", resp.StatusCode, raw, query)
	}
	return out.Data
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

func nodes(v any, path ...string) []map[string]any {
	edges, _ := get(v, append(path, "edges")...).([]any)
	var out []map[string]any
	for _, e := range edges {
		if n, ok := get(e, "node").(map[string]any); ok {
			out = append(out, n)
		}
	}
	return out
}

// TestEndToEnd runs the real control plane (embedded store, engine on) and
// the worker daemon in-process on loopback: a member's task is placed on
// the bare-metal pool, claimed, run with its logs streaming home, finished,
// and its ledger interval closed.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
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
	url := app.URL()

	// The estate, a member, a secret, and a worker credential for the pool.
	gql(t, url, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": estate})
	gql(t, url, adminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	alice := str(gql(t, url, adminKey, `mutation { createAPIKey(input: {name: "alice key", user: "alice"}) { secret } }`, nil), "createAPIKey", "secret")
	d := gql(t, url, adminKey, `{ me { tenant { id } } pools { edges { node { id name } } } projects { edges { node { id name } } } }`, nil)
	tenant := str(d, "me", "tenant", "id")
	pool, project := nodes(d, "pools")[0], nodes(d, "projects")[0]
	gql(t, url, adminKey, `mutation($p: ID!) { setSecret(scope: PROJECT, owner: $p, name: "HF_TOKEN", value: "hf_e2e_secret_value") { name } }`,
		map[string]any{"p": project["id"]})
	secret := str(gql(t, url, adminKey, `mutation($p: ID!) { createWorkerCredential(pool: $p, name: "e2e") { secret } }`,
		map[string]any{"p": pool["id"]}), "createWorkerCredential", "secret")

	// The worker daemon, as `klique worker --pool bare-metal --gpus 0,1`.
	logs := &syncWriter{}
	w, err := agents.NewWorker(context.Background(), agents.Options{
		Server: url, Token: secret, Pool: "bare-metal", GPUs: "0,1", Mode: "process", WorkDir: t.TempDir(),
		Grace: 2 * time.Second, Name: "gpu-host-e2e", Version: "e2e", NvidiaSMI: filepath.Join(t.TempDir(), "absent"),
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Tune: func(c *worker.Config) {
			c.ClaimWait = 2 * time.Second
			c.LogFlushInterval = 100 * time.Millisecond
			c.MetricsInterval = 100 * time.Millisecond
			c.MetricsFilePoll = 50 * time.Millisecond
			c.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stopWorker()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the worker: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("the worker did not stop")
		}
	}()

	marker := filepath.Join(t.TempDir(), "go")
	d = gql(t, url, alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id status } }`, map[string]any{"in": map[string]any{
		"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "secrets": []any{"HF_TOKEN"},
		"parameters": map[string]any{"epochs": "3"},
		"command": []any{"sh", "-c", `echo "epochs=$KLIQUE_PARAM_EPOCHS gpus=$CUDA_VISIBLE_DEVICES token=$HF_TOKEN"
echo '{"name":"loss","value":0.25,"step":3}' >> "$KLIQUE_METRICS_FILE"
while [ ! -f ` + marker + ` ]; do sleep 0.05; done
echo "saved to $KLIQUE_OUTPUT_DESTINATION"`},
	}})
	id := str(d, "enqueueTask", "id")

	task := func() map[string]any {
		return gql(t, url, alice, `query($id: ID!) { task(id: $id) { status reason attempt exitCode outputs worker { hostname }
			logs { lines { stream line } } lastMetrics { name value step } } }`, map[string]any{"id": id})
	}
	waitTask := func(what string, cond func(map[string]any) bool) map[string]any {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			d := task()
			if cond(d) {
				return d
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: task is %v\nworker log:\n%s", what, d, logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	logText := func(d map[string]any) string {
		lines, _ := get(d, "task", "logs", "lines").([]any)
		var out []string
		for _, l := range lines {
			out = append(out, str(l, "stream")+": "+str(l, "line"))
		}
		return strings.Join(out, "\n")
	}

	// Placed by the engine, claimed by the worker, running with its logs
	// streaming while it runs.
	d = waitTask("the task to run with its first line home", func(d map[string]any) bool {
		return str(d, "task", "status") == "RUNNING" && strings.Contains(logText(d), "stdout: epochs=3")
	})
	if str(d, "task", "worker", "hostname") != "gpu-host-e2e" || get(d, "task", "attempt") != 1.0 {
		t.Fatalf("running on %v", d)
	}
	if lt := logText(d); !strings.Contains(lt, "stdout: epochs=3 gpus=0 token=[redacted]") || strings.Contains(lt, "hf_e2e_secret_value") ||
		!strings.Contains(lt, "worker: claimed by worker gpu-host-e2e (attempt 1) on GPUs [0]") {
		t.Fatalf("log while running:\n%s", lt)
	}
	waitTask("the metric", func(d map[string]any) bool {
		ms, _ := get(d, "task", "lastMetrics").([]any)
		return len(ms) == 1 && str(ms[0], "name") == "loss" && get(ms[0], "value") == 0.25 && get(ms[0], "step") == 3.0
	})
	workers := gql(t, url, adminKey, `{ workers { hostname mode online gpus { index } tasks { id } } }`, nil)
	ws, _ := get(workers, "workers").([]any)
	if len(ws) != 1 || str(ws[0], "hostname") != "gpu-host-e2e" || get(ws[0], "online") != true {
		t.Fatalf("workers %v", workers)
	}
	if ts, _ := get(ws[0], "tasks").([]any); len(ts) != 1 || str(ts[0], "id") != id {
		t.Fatalf("the orchestration view does not show the task on its worker: %v", workers)
	}

	// Finished: completed, exit code 0, outputs, and the ledger closed.
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d = waitTask("the task to complete", func(d map[string]any) bool { return str(d, "task", "status") == "COMPLETED" })
	if get(d, "task", "exitCode") != 0.0 {
		t.Fatalf("completed with %v", d)
	}
	if outs, _ := get(d, "task", "outputs").([]any); len(outs) != 1 || outs[0] != "s3://ml-research/fraud-models" {
		t.Fatalf("outputs %v", get(d, "task", "outputs"))
	}
	if lt := logText(d); !strings.Contains(lt, "stdout: saved to s3://ml-research/fraud-models") || !strings.Contains(lt, "worker: completed") {
		t.Fatalf("final log:\n%s", lt)
	}
	ps, err := app.Store.ListPlacements(context.Background(), tenant, store.PlacementFilter{TaskID: id})
	if err != nil || len(ps) != 1 {
		t.Fatalf("ledger intervals %v, %v", ps, err)
	}
	if p := ps[0]; p.EndedAt == nil || !p.EndedAt.After(p.StartedAt) || p.PoolName != "bare-metal" || p.Size != 1000 {
		t.Fatalf("ledger interval %+v: want a closed interval of 1 GPU on bare-metal", p)
	}
	usage := gql(t, url, adminKey, `query($from: Time!, $to: Time!) { usage(input: {from: $from, to: $to, groupBy: [POOL]}) { rows { gpuHours keys { name } } } }`,
		map[string]any{"from": time.Now().Add(-time.Hour).Format(time.RFC3339), "to": time.Now().Add(time.Hour).Format(time.RFC3339)})
	rows, _ := get(usage, "usage", "rows").([]any)
	if len(rows) != 1 {
		t.Fatalf("usage %v", usage)
	}
	want := ps[0].EndedAt.Sub(ps[0].StartedAt).Hours()
	// The report rounds GPU-hours to six decimals.
	if got, _ := get(rows[0], "gpuHours").(float64); got <= 0 || math.Abs(got-want) > 2e-6 {
		t.Fatalf("GPU-hours %v, want %.6f (one GPU for the interval)", got, want)
	}
	waitFor(t, func() bool { return len(w.Tasks()) == 0 })
	if idle, _ := w.Allocator().Free(); idle != 2 {
		t.Fatalf("%d GPUs idle after the task, want 2", idle)
	}

	// Aborted while running: the heartbeat brings the stop, the task gets
	// SIGTERM and saves, its GPU is freed.
	saved := filepath.Join(t.TempDir(), "saved")
	d = gql(t, url, alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "long", "project": "fraud-models", "computeResource": "1 GPU",
		"command": []any{"sh", "-c", `trap 'echo checkpoint > ` + saved + `; exit 143' TERM; echo started; while true; do sleep 0.05; done`},
	}})
	id = str(d, "enqueueTask", "id")
	waitTask("the second task to run", func(d map[string]any) bool {
		return str(d, "task", "status") == "RUNNING" && strings.Contains(logText(d), "stdout: started")
	})
	gql(t, url, alice, `mutation($id: ID!) { abortTask(id: $id, reason: "wrong data") { status } }`, map[string]any{"id": id})
	waitFor(t, func() bool { b, err := os.ReadFile(saved); return err == nil && string(b) == "checkpoint\n" })
	waitFor(t, func() bool { return len(w.Tasks()) == 0 })
	d = waitTask("the abort to show in the log", func(d map[string]any) bool { return strings.Contains(logText(d), "worker: stopping (aborted)") })
	if str(d, "task", "status") != "ABORTED" {
		t.Fatalf("task %v", d)
	}
	if idle, _ := w.Allocator().Free(); idle != 2 {
		t.Fatalf("%d GPUs idle after the abort, want 2", idle)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncWriter is a buffer the worker's goroutines log into.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
