package hpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/server"
)

const e2eAdminKey = "klique-hpc-e2e-bootstrap-key-0123456789abcdefghijklmn"

const e2eEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: a100-80gb, memoryGb: 80, pricePerGpuHour: 1.60, currency: USD}
pools:
  - {name: slurm, kind: slurm, capacity: 4, gpuClass: a100-80gb}
profiles:
  - {name: two-gpus, size: 2, timeWeight: 1, pools: [slurm]}
groups:
  - {name: ml-research}
policies:
  - group: ml-research
    reservation: 4
    limit: 4
    computeResources:
      - {name: 2 GPUs, profile: two-gpus}
projects:
  - {name: fraud-models, group: ml-research, outputDestination: s3://ml-research/fraud-models}
`

func e2eGQL(t *testing.T, url, cred, query string, vars map[string]any) map[string]any {
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

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func digStr(v any, path ...string) string { s, _ := dig(v, path...).(string); return s }

// logLines is the log of the object at path in d, a line "stream: line"
// for each of its lines.
func logLines(d map[string]any, path ...string) []string {
	lines, _ := dig(d, append(path, "logs", "lines")...).([]any)
	var out []string
	for _, l := range lines {
		out = append(out, digStr(l, "stream")+": "+digStr(l, "line"))
	}
	return out
}

// TestSubmitterEndToEnd runs the real control plane on loopback and the
// HPC submitter (the worker loop with the Slurm runner) against the real
// Slurm: a task is placed, claimed, submitted with sbatch as the owner's
// mapped account, runs, and reports its lines and end from inside the job
// with its task credential.
func TestSubmitterEndToEnd(t *testing.T) {
	b := setupSlurm(t) // the Slurm check and the task-run binary
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
	e2eGQL(t, url, e2eAdminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": e2eEstate})
	e2eGQL(t, url, e2eAdminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	alice := digStr(e2eGQL(t, url, e2eAdminKey, `mutation { createAPIKey(input: {name: "alice key", user: "alice"}) { secret } }`, nil), "createAPIKey", "secret")
	token := digStr(e2eGQL(t, url, e2eAdminKey, `mutation { createWorkerCredential(pool: "slurm", name: "login1") { secret } }`, nil),
		"createWorkerCredential", "secret")

	e2eGQL(t, url, e2eAdminKey, `mutation { createUser(input: {name: "bob", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	bob := digStr(e2eGQL(t, url, e2eAdminKey, `mutation { createAPIKey(input: {name: "bob key", user: "bob"}) { secret } }`, nil), "createAPIKey", "secret")
	userMap := writeUserMap(t, b.dir, "users:\n  alice: "+slurmUser+"\n")
	logs := &lockedWriter{w: &bytes.Buffer{}}
	w, err := NewSubmitter(context.Background(), SubmitterOptions{
		Config: Config{Scheduler: "slurm", UserMap: userMap, Klique: filepath.Join(b.dir, "klique")},
		Server: url, Token: token, Pool: "slurm", Slots: 4, Name: "login1", WorkDir: filepath.Join(b.dir, "work"), Grace: 2 * time.Second,
		Version: "e2e", Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Tune: func(o *Options) { o.StatusInterval = 200 * time.Millisecond },
		TuneWorker: func(c *worker.Config) {
			c.ClaimWait = 2 * time.Second
			c.LogFlushInterval = 100 * time.Millisecond
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

	enqueue := func(cred, name, script string) (string, string) {
		d := e2eGQL(t, url, cred, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id status } }`, map[string]any{"in": map[string]any{
			"name": name, "project": "fraud-models", "computeResource": "2 GPUs", "command": []any{"sh", "-c", script},
		}})
		return digStr(d, "enqueueTask", "id"), digStr(d, "enqueueTask", "status")
	}
	// wait polls a task until until(status, log) holds, and returns it
	// with its log and the statuses seen.
	wait := func(cred, id string, until func(status, log string) bool) (map[string]any, string, map[string]bool) {
		seen := map[string]bool{}
		var d map[string]any
		var text string
		eventually.Poll(90*time.Second, func() bool {
			d = e2eGQL(t, url, cred, `query($id: ID!) { task(id: $id) { status reason exitCode logs { lines { stream line } } } }`, map[string]any{"id": id})
			status := digStr(d, "task", "status")
			seen[status] = true
			text = strings.Join(logLines(d, "task"), "\n")
			return until(status, text)
		})
		return d, text, seen
	}
	final := func(status, _ string) bool { return status == "COMPLETED" || status == "FAILED" || status == "ABORTED" }

	id, first := enqueue(alice, "train", `echo "hello from $(id -un) on $CUDA_VISIBLE_DEVICES"
echo '{"name":"loss","value":0.5,"step":1}' >> "$KLIQUE_METRICS_FILE"; sleep 2; echo bye`)
	d, text, seen := wait(alice, id, final)
	seen[first] = true
	if digStr(d, "task", "status") != "COMPLETED" || dig(d, "task", "exitCode") != 0.0 {
		t.Fatalf("task %v\nlog:\n%s\nsubmitter:\n%s", d, text, logs)
	}
	for _, want := range []string{
		"worker: claimed by worker login1 (attempt 1); the slurm scheduler places its GPUs",
		"worker: submitted to Slurm as job",
		"by Linux account " + slurmUser + " (1 node(s) × 2 GPU(s))",
		": RUNNING on localhost",
		"stdout: hello from " + slurmUser + " on ",
		"stdout: bye",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the task's log lacks %q:\n%s", want, text)
		}
	}
	m := e2eGQL(t, url, alice, `query($id: ID!) { task(id: $id) { metrics(name: "loss") { value step } } }`, map[string]any{"id": id})
	if pts, _ := dig(m, "task", "metrics").([]any); len(pts) != 1 || dig(pts[0], "value") != 0.5 {
		t.Errorf("the metric written in the job, sent once: %v", m)
	}
	for _, s := range []string{"QUEUED", "RUNNING", "COMPLETED"} {
		if !seen[s] {
			t.Errorf("never saw the task %s (saw %v)", s, seen)
		}
	}
	// The end came from inside the job; the submitter did not report again.
	if !eventually.Poll(20*time.Second, func() bool { return len(w.Tasks()) == 0 }) {
		t.Fatalf("the submitter still holds %v", w.Tasks())
	}
	if strings.Contains(logs.String(), "refused a task's end") || strings.Contains(logs.String(), "moved on") {
		t.Fatalf("the submitter reported the end again:\n%s", logs)
	}

	// bob has no Linux account in the map: his task fails, saying so.
	id, _ = enqueue(bob, "unmapped", "echo never")
	d, text, _ = wait(bob, id, final)
	if reason := digStr(d, "task", "reason"); digStr(d, "task", "status") != "FAILED" || !strings.Contains(reason, `platform user "bob"`) || !strings.Contains(reason, userMap) {
		t.Fatalf("bob's task: %v\n%s", d, text)
	}

	// Mapped without a restart, his next task runs as that account.
	writeUserMap(t, b.dir, "users:\n  alice: "+slurmUser+"\n  bob: root\n")
	id, _ = enqueue(bob, "mapped", `echo "bob runs as $(id -un)"`)
	d, text, _ = wait(bob, id, final)
	if digStr(d, "task", "status") != "COMPLETED" || !strings.Contains(text, "stdout: bob runs as root") || !strings.Contains(text, "by Linux account root") {
		t.Fatalf("bob's task after the map changed: %v\n%s", d, text)
	}

	// Aborted while it runs: the heartbeat brings the stop, scancel ends
	// the job, and the submitter reports it aborted.
	id, _ = enqueue(alice, "long", "echo started; sleep 300")
	wait(alice, id, func(status, log string) bool { return strings.Contains(log, "stdout: started") })
	e2eGQL(t, url, alice, `mutation($id: ID!) { abortTask(id: $id, reason: "wrong data") { status } }`, map[string]any{"id": id})
	d, text, _ = wait(alice, id, func(_, log string) bool { return strings.Contains(log, "CANCELLED") })
	if digStr(d, "task", "status") != "ABORTED" || !strings.Contains(text, "CANCELLED") {
		t.Fatalf("the aborted task: %v\n%s", d, text)
	}
}
