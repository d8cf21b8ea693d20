package agents_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents"
	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/server"
	"github.com/klique-ai/klique/internal/store"
)

const adminKey = "klique-e2e-bootstrap-key-0123456789abcdefghijklmnopq"

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

// e2e is a running control plane (embedded store, engine on, a 5 s
// worker lease) with an estate applied, a member of ml-research, a vault
// secret and a worker credential for the bare-metal pool.
type e2e struct {
	app                 *server.App
	url                 string
	tenant              string
	alice, workerSecret string
}

func startControlPlane(t *testing.T, doc string) *e2e {
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
	e := &e2e{app: app, url: app.URL()}
	url := e.url
	gql(t, url, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": doc})
	e.alice = e.member(t, "alice", "ml-research")
	d := gql(t, url, adminKey, `{ me { tenant { id } } }`, nil)
	e.tenant = str(d, "me", "tenant", "id")
	gql(t, url, adminKey, `mutation { setSecret(scope: PROJECT, owner: "fraud-models", name: "HF_TOKEN", value: "hf_e2e_secret_value") { name } }`, nil)
	e.workerSecret = str(gql(t, url, adminKey, `mutation { createWorkerCredential(pool: "bare-metal", name: "e2e") { secret } }`, nil),
		"createWorkerCredential", "secret")
	return e
}

// startWorker runs the worker daemon in-process, as `klique worker --pool
// bare-metal --gpus GPUS --name NAME`, until the test ends.
func (e *e2e) startWorker(t *testing.T, name, gpus string) (*worker.Worker, *syncWriter) {
	t.Helper()
	return e.startWorkerTuned(t, name, gpus, nil)
}

// startWorkerTuned is startWorker with more of the worker's settings
// changed by tune.
func (e *e2e) startWorkerTuned(t *testing.T, name, gpus string, tune func(*worker.Config)) (*worker.Worker, *syncWriter) {
	t.Helper()
	logs := &syncWriter{}
	w, err := agents.NewWorker(context.Background(), agents.Options{
		Server: e.url, Token: e.workerSecret, Pool: "bare-metal", GPUs: gpus, Mode: "process", WorkDir: t.TempDir(), TaskUIDs: "off",
		Grace: 2 * time.Second, Name: name, Version: "e2e", NvidiaSMI: filepath.Join(t.TempDir(), "absent"), Labels: map[string]string{"rack": "r7"},
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Tune: func(c *worker.Config) {
			c.ClaimWait = 2 * time.Second
			c.LogFlushInterval = 100 * time.Millisecond
			c.MetricsInterval = 100 * time.Millisecond
			c.MetricsFilePoll = 50 * time.Millisecond
			c.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
			if tune != nil {
				tune(c)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stopWorker()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the worker: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("the worker did not stop")
		}
	})
	return w, logs
}

// enqueue sends a shell script as a task of cred's on the "1 GPU" compute
// resource of fraud-models, and returns its id.
func (e *e2e) enqueue(t *testing.T, cred, name, script string) string {
	t.Helper()
	d := gql(t, e.url, cred, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": name, "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"sh", "-c", script},
	}})
	return str(d, "enqueueTask", "id")
}

const taskQuery = `query($id: ID!) { task(id: $id) { name status reason attempt retries exitCode outputs worker { hostname }
	logs { lines { stream line } } lastMetrics { name value step } } }`

// waitTask polls a task as cred until cond holds.
func (e *e2e) waitTask(t *testing.T, cred, id, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var d map[string]any
	if !eventually.Poll(30*time.Second, func() bool { d = gql(t, e.url, cred, taskQuery, map[string]any{"id": id}); return cond(d) }) {
		t.Fatalf("waiting for %s: task is %v", what, d)
	}
	return d
}

func logText(d map[string]any) string {
	lines, _ := get(d, "task", "logs", "lines").([]any)
	var out []string
	for _, l := range lines {
		out = append(out, str(l, "stream")+": "+str(l, "line"))
	}
	return strings.Join(out, "\n")
}

// TestEndToEnd runs the real control plane (embedded store, engine on) and
// the worker daemon in-process on loopback: a member's task is placed on
// the bare-metal pool, claimed, run with its logs streaming home, finished,
// and its ledger interval closed.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, estate)
	url, alice, tenant, app := e.url, e.alice, e.tenant, e.app
	w, logs := e.startWorker(t, "gpu-host-e2e", "0,1")
	var d map[string]any

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

	waitTask := func(what string, cond func(map[string]any) bool) map[string]any {
		t.Helper()
		return e.waitTask(t, alice, id, what, func(d map[string]any) bool {
			if cond(d) {
				return true
			}
			if t.Failed() {
				t.Logf("worker log:\n%s", logs)
			}
			return false
		})
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
	workers := gql(t, url, adminKey, `{ workers { hostname mode online labels gpus { index } tasks { id } } }`, nil)
	ws, _ := get(workers, "workers").([]any)
	if len(ws) != 1 || str(ws[0], "hostname") != "gpu-host-e2e" || get(ws[0], "online") != true || str(ws[0], "labels", "rack") != "r7" {
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
	eventually.True(t, "", func() bool { return len(w.Tasks()) == 0 })
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
	eventually.True(t, "", func() bool { b, err := os.ReadFile(saved); return err == nil && string(b) == "checkpoint\n" })
	eventually.True(t, "", func() bool { return len(w.Tasks()) == 0 })
	d = waitTask("the abort to show in the log", func(d map[string]any) bool { return strings.Contains(logText(d), "worker: stopping (aborted)") })
	if str(d, "task", "status") != "ABORTED" {
		t.Fatalf("task %v", d)
	}
	if idle, _ := w.Allocator().Free(); idle != 2 {
		t.Fatalf("%d GPUs idle after the abort, want 2", idle)
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

// TestAReclaimedTaskIsStoppedRequeuedAtTheFrontAndRunAgain: ml-research
// borrows vision's GPU; when vision sends work, the engine reclaims it.
// The worker gives the borrowed task SIGTERM and its grace period (it
// saves a checkpoint), reports it preempted, and the task goes back to the
// front of its compute resource, ahead of work queued after it, to run
// again (attempt 2) to completion once a GPU is free.
func TestAReclaimedTaskIsStoppedRequeuedAtTheFrontAndRunAgain(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, twoGroups().project("{name: fraud-models}").String())
	vic := e.member(t, "vic", "vision")
	w, logs := e.startWorker(t, "gpu-host-e2e", "0,1")
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	// Each attempt says which it is; on SIGTERM it takes half a second to
	// save (inside the 2 s grace period) and exits 143.
	script := `name=$KLIQUE_TASK_NAME
echo "$name attempt $KLIQUE_TASK_ATTEMPT"
trap 'echo "$name checkpointing"; sleep 0.5; echo "$name attempt $KLIQUE_TASK_ATTEMPT" >> ` + dir + `/saved; exit 143' TERM
while [ ! -f ` + release + ` ]; do sleep 0.05; done
echo "$name finished"`
	first, second := e.enqueue(t, e.alice, "first", script), e.enqueue(t, e.alice, "second", script)
	running := func(d map[string]any) bool {
		return str(d, "task", "status") == "RUNNING" && strings.Contains(logText(d), "attempt 1")
	}
	e.waitTask(t, e.alice, first, "first to run", running)
	e.waitTask(t, e.alice, second, "second to run", running)
	// Queued behind them, at ml-research's limit.
	third := e.enqueue(t, e.alice, "third", script)

	// Vision's guarantee is missed: one of ml-research's two is reclaimed.
	vision := e.enqueue(t, vic, "vision", `echo "vision ran"`)
	var victim string
	var d map[string]any
	eventually.True(t, "", func() bool {
		for _, id := range []string{first, second} {
			d = gql(t, e.url, e.alice, taskQuery, map[string]any{"id": id})
			if strings.Contains(str(d, "task", "reason"), "preempted (reclaimed by group vision") {
				victim = id
				return true
			}
		}
		return false
	})
	if str(d, "task", "status") != "QUEUED" && str(d, "task", "status") != "PLACED" {
		t.Fatalf("the reclaimed task is %v", d)
	}
	if r := str(d, "task", "reason"); !strings.Contains(r, "requeued at the front of its compute resource") {
		t.Fatalf("reason %q", r)
	}
	name := str(d, "task", "name")
	// SIGTERM reached it and the grace period let it save.
	eventually.True(t, "", func() bool { b, _ := os.ReadFile(filepath.Join(dir, "saved")); return string(b) == name+" attempt 1\n" })
	d = e.waitTask(t, e.alice, victim, "the stop in the log", func(d map[string]any) bool {
		return strings.Contains(logText(d), name+" checkpointing") && strings.Contains(logText(d), "worker: stopping (preempted")
	})
	e.waitTask(t, vic, vision, "vision's task to run and complete", func(d map[string]any) bool {
		return str(d, "task", "status") == "COMPLETED" && strings.Contains(logText(d), "vision ran")
	})

	// The freed GPU goes to the reclaimed task, at the front, before
	// third, which was queued before the reclaim but after the task.
	d = e.waitTask(t, e.alice, victim, "the reclaimed task to run again", func(d map[string]any) bool {
		return str(d, "task", "status") == "RUNNING" && strings.Contains(logText(d), name+" attempt 2")
	})
	if get(d, "task", "attempt") != 2.0 {
		t.Fatalf("running again as %v", d)
	}
	if s := str(gql(t, e.url, e.alice, taskQuery, map[string]any{"id": third}), "task", "status"); s != "QUEUED" {
		t.Fatalf("third is %s while the reclaimed task runs again: it went ahead of the requeued task", s)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d = e.waitTask(t, e.alice, victim, "the reclaimed task to complete", func(d map[string]any) bool { return str(d, "task", "status") == "COMPLETED" })
	if lt := logText(d); !strings.Contains(lt, name+" finished") || get(d, "task", "exitCode") != 0.0 {
		t.Fatalf("second attempt:\n%s", lt)
	}
	e.waitTask(t, e.alice, third, "third to complete", func(d map[string]any) bool { return str(d, "task", "status") == "COMPLETED" })

	// Two intervals on the ledger: the first closed by the reclaim.
	ps, err := e.app.Store.ListPlacements(context.Background(), e.tenant, store.PlacementFilter{TaskID: victim})
	if err != nil || len(ps) != 2 || ps[0].EndedAt == nil || ps[1].EndedAt == nil || !strings.Contains(ps[0].EndReason, "reclaimed by group vision") {
		t.Fatalf("ledger intervals of the reclaimed task: %+v, %v", ps, err)
	}
	eventually.True(t, "", func() bool { return len(w.Tasks()) == 0 })
	if t.Failed() {
		t.Logf("worker log:\n%s", logs)
	}
}

// TestAKilledWorkerLosesItsTaskWhenTheLeaseRunsOut runs `klique worker`
// as a process and kills it (SIGKILL: no goodbye, no report). Once the
// task's lease runs out the engine requeues it with the reason "worker
// lost" and counts a retry; a second worker then runs it to completion.
func TestAKilledWorkerLosesItsTaskWhenTheLeaseRunsOut(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, estate)
	dir := t.TempDir()
	bin := filepath.Join(dir, "klique")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/klique-ai/klique/cmd/klique").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tokenFile := filepath.Join(dir, "worker.token")
	if err := os.WriteFile(tokenFile, []byte(e.workerSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "worker", "--pool", "bare-metal", "--task-uids", "off", "--server", e.url, "--token-file", tokenFile,
		"--gpus", "0", "--name", "doomed-host", "--work-dir", filepath.Join(dir, "work"), "--nvidia-smi", filepath.Join(dir, "absent"))
	cmd.Env = append(os.Environ(), "HOME="+dir, "KLIQUE_CONFIG=", "KLIQUE_API_KEY=", "KLIQUE_TOKEN=")
	out := &syncWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	release := filepath.Join(dir, "release")
	id := e.enqueue(t, e.alice, "survivor", `echo "attempt $KLIQUE_TASK_ATTEMPT on $KLIQUE_WORKER"
while [ ! -f `+release+` ]; do sleep 0.05; done
echo finished`)
	d := e.waitTask(t, e.alice, id, "the task to run on the doomed worker", func(d map[string]any) bool {
		return str(d, "task", "status") == "RUNNING" && strings.Contains(logText(d), "attempt 1 on doomed-host")
	})
	if str(d, "task", "worker", "hostname") != "doomed-host" {
		t.Fatalf("running on %v", d)
	}
	// Let the killed worker's orphaned task end with the test.
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// Nothing happens until the 5 s lease runs out; then the task is
	// requeued (and, with no worker, placed again) with a retry counted.
	d = e.waitTask(t, e.alice, id, "the lease to run out", func(d map[string]any) bool { return get(d, "task", "retries") == 1.0 })
	if lost := time.Since(killed); lost < 4*time.Second {
		t.Fatalf("the task was given up %v after the kill, before its 5 s lease ran out", lost)
	}
	if s := str(d, "task", "status"); s != "QUEUED" && s != "PLACED" {
		t.Fatalf("after the loss the task is %v", d)
	}
	trail := gql(t, e.url, adminKey, `query($id: String!) { auditLog(filter: {objectId: $id}) { edges { node { action detail } } } }`, map[string]any{"id": id})
	found := false
	for _, n := range nodes(trail, "auditLog") {
		if n["action"] == "task.requeued" && strings.Contains(str(n, "detail"), "worker lost") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no requeue for a lost worker in the audit trail: %v", trail)
	}
	ps, err := e.app.Store.ListPlacements(context.Background(), e.tenant, store.PlacementFilter{TaskID: id})
	if err != nil || len(ps) < 1 || ps[0].EndedAt == nil || ps[0].EndReason != "worker lost" {
		t.Fatalf("the lost attempt's ledger interval: %+v, %v", ps, err)
	}

	// Another worker runs it again, to completion.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.startWorker(t, "rescue-host", "0")
	d = e.waitTask(t, e.alice, id, "the task to complete on the second worker", func(d map[string]any) bool {
		return str(d, "task", "status") == "COMPLETED"
	})
	if get(d, "task", "attempt") != 2.0 || !strings.Contains(logText(d), "attempt 2 on rescue-host") {
		t.Fatalf("completed as %v\n%s", d, logText(d))
	}
}
