package worker

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/gpu"
	"github.com/klique-ai/klique/agents/runner/process"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// testBundle is a worker daemon running real processes against a fake
// control plane on loopback.
type testBundle struct {
	srv     *fakeServer
	w       *Worker
	wire    *wire
	workDir string
	cancel  context.CancelFunc
	done    chan error
}

// fastConfig shortens every interval so a test runs in seconds.
func fastConfig(cfg *Config) {
	cfg.ClaimWait = time.Second
	cfg.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	cfg.LogFlushInterval = 100 * time.Millisecond
	cfg.MetricsInterval = 100 * time.Millisecond
	cfg.MetricsFilePoll = 50 * time.Millisecond
	cfg.GPUSampleInterval = 100 * time.Millisecond
	cfg.Grace = 2 * time.Second
	cfg.ShutdownTimeout = 5 * time.Second
}

// clientRetries is how many times a test worker's client retries a call
// that did not reach the server, so one call is clientRetries+1 requests.
const clientRetries = 2

func setup(t *testing.T, opts ...func(*Config)) *testBundle {
	t.Helper()
	srv := newFakeServer(t)
	return start(t, srv, opts...)
}

func start(t *testing.T, srv *fakeServer, opts ...func(*Config)) *testBundle {
	t.Helper()
	cl := client.New(srv.url(), testToken)
	wr := &wire{}
	cl.HTTP = &http.Client{Transport: wr}
	cl.Retries = clientRetries
	cl.Timeout = 5 * time.Second
	cl.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}
	workDir := t.TempDir()
	cfg := Config{
		Client: cl, Runner: process.New(process.Options{VenvCache: filepath.Join(workDir, "venvs")}),
		GPUs:     []agentapi.GPU{{Index: 0, MemoryMB: 81920}, {Index: 1, MemoryMB: 81920}},
		Hostname: "gpu-host-1", Version: "test", WorkDir: workDir,
		SMI: gpu.SMI{Path: filepath.Join(t.TempDir(), "no-nvidia-smi")},
	}
	fastConfig(&cfg)
	for _, o := range opts {
		o(&cfg)
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &testBundle{srv: srv, w: w, wire: wr, workDir: workDir, cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.done:
		case <-time.After(20 * time.Second):
			t.Errorf("the worker did not shut down")
		}
	})
	return b
}

// stop shuts the worker down and returns what Run returned.
func (b *testBundle) stop(t *testing.T) error {
	t.Helper()
	b.cancel()
	select {
	case err := <-b.done:
		b.done <- err
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not shut down")
		return nil
	}
}

func shTask(id, script string) agentapi.Assignment {
	return agentapi.Assignment{TaskID: id, Name: "task-" + id, MilliGPUsPerNode: 1000, Nodes: 1,
		Command: []string{"sh", "-c", script}, Project: "fraud-models", ProjectID: "p-fraud-models", Owner: "alice", LeaseSeconds: 10}
}

// fakeSMI writes an nvidia-smi that answers both queries the worker makes.
func fakeSMI(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nvidia-smi")
	script := `#!/bin/sh
case "$*" in
*utilization.gpu*) printf '0, 37\n1, 80\n' ;;
*memory.total*) printf '0, GPU-aaaa, 81920\n1, GPU-bbbb, 81920\n' ;;
*) exit 2 ;;
esac
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWorker(t *testing.T) {
	t.Parallel()

	t.Run("a claimed task runs, streams its logs and metrics, and its end is reported", func(t *testing.T) {
		t.Parallel()
		smi := fakeSMI(t)
		b := setup(t, func(c *Config) { c.SMI = gpu.SMI{Path: smi} })
		b.srv.mu.Lock()
		b.srv.secrets["API_TOKEN"] = "s3cr3t-value-42"
		b.srv.mu.Unlock()
		a := shTask("t1", `
echo "hello from $KLIQUE_TASK_NAME in $KLIQUE_PROJECT"
echo "lr=$KLIQUE_PARAM_LEARNING_RATE"
echo "token=$API_TOKEN"
echo "gpus=$CUDA_VISIBLE_DEVICES"
echo "dest=$KLIQUE_OUTPUT_DESTINATION"
echo oops >&2
echo '{"name":"loss","value":0.5,"step":1}' >> "$KLIQUE_METRICS_FILE"
curl -s -f -X POST -d '{"name":"accuracy","value":0.9,"step":2}' "$KLIQUE_METRICS_URL" || echo "metrics POST failed"
echo "s3://bucket/t1/model.pt" >> "$KLIQUE_OUTPUTS_FILE"
cat "$KLIQUE_PARAMS_FILE"
sleep 1.5
`)
		a.Parameters = map[string]string{"learning-rate": "0.01"}
		a.Secrets = []string{"API_TOKEN"}
		a.OutputDestination = "s3://bucket/t1"
		b.srv.enqueue(a)

		f := b.srv.finished(t, "t1", 15*time.Second)
		if f.State != agentapi.StateCompleted || f.ExitCode != 0 || f.Attempt != 1 {
			t.Fatalf("finish = %+v, want completed with exit code 0 on attempt 1", f)
		}
		if strings.Join(f.Outputs, " ") != "s3://bucket/t1 s3://bucket/t1/model.pt" {
			t.Errorf("outputs = %q", f.Outputs)
		}
		ft := b.srv.task("t1")
		out := strings.Join(ft.lines(agentapi.StreamStdout), "\n")
		for _, want := range []string{"hello from task-t1 in fraud-models", "lr=0.01", "token=" + Redacted, "gpus=0",
			"dest=s3://bucket/t1", `"learning-rate": "0.01"`} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(ft.logText(), "s3cr3t-value-42") {
			t.Errorf("the secret's value reached the log:\n%s", ft.logText())
		}
		if got := ft.lines(agentapi.StreamStderr); len(got) != 1 || got[0] != "oops" {
			t.Errorf("stderr = %q", got)
		}
		if !strings.Contains(strings.Join(ft.lines(agentapi.StreamWorker), "\n"), "claimed by worker gpu-host-1 (attempt 1) on GPUs [0]") {
			t.Errorf("worker lines:\n%s", strings.Join(ft.lines(agentapi.StreamWorker), "\n"))
		}
		if first := ft.lines(agentapi.StreamStdout)[0]; first != "hello from task-t1 in fraud-models" {
			t.Errorf("first stdout line %q", first)
		}
		for _, l := range ft.logs {
			if l.At.IsZero() {
				t.Fatalf("a log line without a time: %+v", l)
			}
		}
		names := map[string]agentapi.MetricPoint{}
		for _, p := range ft.metrics {
			names[p.Name] = p
		}
		if p := names["loss"]; p.Value != 0.5 || p.Step != 1 {
			t.Errorf("loss from the metrics file = %+v (metrics %+v)", p, ft.metrics)
		}
		if p := names["accuracy"]; p.Value != 0.9 || p.Step != 2 {
			t.Errorf("accuracy from the metrics URL = %+v (metrics %+v)", p, ft.metrics)
		}
		if p, ok := names["gpu.utilization"]; !ok || p.Value != 37 {
			t.Errorf("gpu.utilization = %+v, want 37 (GPU 0 of the fake nvidia-smi)", p)
		}
		var seen bool
		for _, hb := range b.srv.heartbeats() {
			for _, th := range hb.Tasks {
				if th.TaskID == "t1" && th.Attempt == 1 && len(th.GPUs) == 1 && th.GPUs[0] == 0 {
					seen = true
				}
			}
			if hb.WorkerID != "worker-1" {
				t.Errorf("heartbeat from worker %q", hb.WorkerID)
			}
		}
		if !seen {
			t.Errorf("no heartbeat carried task t1 on GPU 0: %+v", b.srv.heartbeats())
		}
		eventually.Within(t, 5*time.Second, "the task to be forgotten", func() bool { return len(b.w.Tasks()) == 0 })
		if _, err := os.Stat(filepath.Join(b.workDir, "tasks", "t1.1")); !os.IsNotExist(err) {
			t.Errorf("the task's directory is still there: %v", err)
		}
	})

	t.Run("an empty long poll is answered 204 and the worker polls again", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		eventually.Within(t, 10*time.Second, "three claims", func() bool { return len(b.srv.claimRequests()) >= 3 })
		c := b.srv.claimRequests()[0]
		if c.WorkerID != "worker-1" || c.FreeGPUs != 2 || c.Fractions || c.WaitSeconds != 1 {
			t.Errorf("claim request %+v", c)
		}
	})

	t.Run("a failing task reports its exit code and last line", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.srv.enqueue(shTask("t2", `echo working; echo "disk full" >&2; exit 3`))
		f := b.srv.finished(t, "t2", 10*time.Second)
		if f.State != agentapi.StateFailed || f.ExitCode != 3 || !strings.Contains(f.Message, "exited with code 3; last line: disk full") {
			t.Fatalf("finish = %+v", f)
		}
	})

	t.Run("a stop command sends SIGTERM and the task can save before it ends", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		marker := filepath.Join(t.TempDir(), "checkpoint")
		b.srv.enqueue(shTask("t3", `trap 'echo saving; echo saved > `+marker+`; exit 0' TERM; echo started; while true; do sleep 0.05; done`))
		eventually.Within(t, 10*time.Second, "the task to start", func() bool {
			return contains(b.srv.task("t3").lines(agentapi.StreamStdout), "started")
		})
		b.srv.stop("t3", "preempted: reclaimed by group vision", agentapi.StatePreempted)
		f := b.srv.finished(t, "t3", 10*time.Second)
		if f.State != agentapi.StatePreempted || f.Message != "preempted: reclaimed by group vision" || f.ExitCode != 0 {
			t.Fatalf("finish = %+v", f)
		}
		if b, err := os.ReadFile(marker); err != nil || string(b) != "saved\n" {
			t.Fatalf("the task did not checkpoint on SIGTERM: %q, %v", b, err)
		}
		if !contains(b.srv.task("t3").lines(agentapi.StreamStdout), "saving") {
			t.Errorf("log:\n%s", b.srv.task("t3").logText())
		}
	})

	t.Run("a task that ignores SIGTERM is killed after the grace period, with its children", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *Config) { c.Grace = 500 * time.Millisecond })
		pidFile := filepath.Join(t.TempDir(), "child.pid")
		b.srv.enqueue(shTask("t4", `trap '' TERM; sh -c 'trap "" TERM; echo $$ > `+pidFile+`; while true; do sleep 0.05; done' & echo started; while true; do sleep 0.05; done`))
		eventually.Within(t, 10*time.Second, "the task and its child to start", func() bool {
			_, err := os.Stat(pidFile)
			return err == nil && contains(b.srv.task("t4").lines(agentapi.StreamStdout), "started")
		})
		child := readPid(t, pidFile)
		b.srv.stop("t4", "aborted by alice", agentapi.StateAborted)
		begin := time.Now()
		f := b.srv.finished(t, "t4", 10*time.Second)
		if f.State != agentapi.StateAborted || f.ExitCode != 128+int(syscall.SIGKILL) {
			t.Fatalf("finish = %+v, want aborted with exit code 137", f)
		}
		if d := time.Since(begin); d < 400*time.Millisecond {
			t.Errorf("killed after %s, before the grace period", d)
		}
		eventually.Within(t, 5*time.Second, "the child to be gone", func() bool { return !alive(child) })
	})

	t.Run("a report answered 409 drops the task without retrying", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.srv.enqueue(shTask("t5", `i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.05; done`))
		eventually.Within(t, 10*time.Second, "log lines", func() bool { return len(b.srv.task("t5").logs) > 3 })
		b.srv.requeue("t5")
		eventually.Within(t, 10*time.Second, "the task to be dropped", func() bool { return len(b.w.Tasks()) == 0 })
		ft := b.srv.task("t5")
		if ft.finishes != 0 {
			t.Errorf("a dropped task was reported %d times", ft.finishes)
		}
		// Its GPU is free again.
		if idle, _ := b.w.Allocator().Free(); idle != 2 {
			t.Errorf("%d GPUs idle after the drop, want 2", idle)
		}
		// Nothing more is sent for the dropped attempt. Rather than watch
		// for a fixed while, watch while the worker reports another task:
		// a stream of t5 still going would send on the ticks t5b's log
		// batches go out on, so by t5b's third it would have been refused
		// again.
		stale := ft.stale
		b.srv.enqueue(shTask("t5b", `i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.02; done`))
		eventually.Within(t, 10*time.Second, "three log batches of another task", func() bool { return b.srv.task("t5b").batches >= 3 })
		if ft := b.srv.task("t5"); ft.stale != stale {
			t.Errorf("the worker kept sending reports for the dropped attempt: %d refusals, then %d", stale, ft.stale)
		}
	})

	t.Run("the server going away and back loses no log line and keeps the task running", func(t *testing.T) {
		t.Parallel()
		const n = 150
		b := setup(t, func(c *Config) {
			c.LogMemoryLines, c.LogBatchLines, c.HeartbeatInterval = 10, 25, 100*time.Millisecond
		})
		b.srv.enqueue(shTask("t6", `i=0; while [ $i -lt `+strconv.Itoa(n)+` ]; do i=$((i+1)); echo "line $i"; sleep 0.03; done`))
		eventually.Within(t, 10*time.Second, "the first lines", func() bool { return len(b.srv.task("t6").lines(agentapi.StreamStdout)) > 10 })
		b.srv.down()
		failed := b.wire.failures(agentapi.PathHeartbeat)
		spool := filepath.Join(b.workDir, "spool", "t6.1.jsonl")
		eventually.Within(t, 5*time.Second, "lines to spill to disk", func() bool {
			fi, err := os.Stat(spool)
			return err == nil && fi.Size() > 0
		})
		// Away for two heartbeats, not for a fixed while: once a third
		// heartbeat has failed to get through, the worker has seen two fail
		// and done all it does about that.
		perCall := clientRetries + 1
		eventually.Within(t, 10*time.Second, "two heartbeats to fail", func() bool {
			return b.wire.failures(agentapi.PathHeartbeat) >= failed+2*perCall+1
		})
		if len(b.w.Tasks()) != 1 {
			t.Fatalf("the task did not keep running while the server was away")
		}
		beats := len(b.srv.heartbeats())
		b.srv.up()
		eventually.Within(t, 5*time.Second, "heartbeats to resume", func() bool { return len(b.srv.heartbeats()) > beats })
		f := b.srv.finished(t, "t6", 20*time.Second)
		if f.State != agentapi.StateCompleted {
			t.Fatalf("finish = %+v", f)
		}
		got := b.srv.task("t6").lines(agentapi.StreamStdout)
		if len(got) != n {
			t.Fatalf("%d stdout lines arrived, want %d", len(got), n)
		}
		for i, l := range got {
			if l != fmt.Sprintf("line %d", i+1) {
				t.Fatalf("line %d is %q: out of order or duplicated", i+1, l)
			}
		}
	})

	t.Run("the server's truncation stops the task's lines", func(t *testing.T) {
		t.Parallel()
		srv := newFakeServer(t)
		srv.logLimit = 20
		b := start(t, srv)
		b.srv.enqueue(shTask("t7", `i=0; while [ $i -lt 200 ]; do i=$((i+1)); echo "line $i"; done; sleep 1`))
		f := b.srv.finished(t, "t7", 10*time.Second)
		if f.State != agentapi.StateCompleted {
			t.Fatalf("finish = %+v", f)
		}
		srv.mu.Lock()
		calls := srv.logCalls
		srv.mu.Unlock()
		if got := len(b.srv.task("t7").logs); got != 20 {
			t.Errorf("%d lines kept, want the limit 20", got)
		}
		if calls > 3 {
			t.Errorf("%d log requests after the server said truncated", calls)
		}
	})

	t.Run("shutting down stops the running tasks and reports them preempted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.srv.enqueue(shTask("t8", `trap 'echo bye; exit 143' TERM; echo started; while true; do sleep 0.05; done`))
		eventually.Within(t, 10*time.Second, "the task to start", func() bool { return contains(b.srv.task("t8").lines(agentapi.StreamStdout), "started") })
		if err := b.stop(t); err != nil {
			t.Fatalf("Run returned %v", err)
		}
		ft := b.srv.task("t8")
		if ft.finish == nil || ft.finish.State != agentapi.StatePreempted || !strings.Contains(ft.finish.Message, "shutting down") {
			t.Fatalf("finish = %+v", ft.finish)
		}
		if !contains(ft.lines(agentapi.StreamStdout), "bye") {
			t.Errorf("the task got no SIGTERM:\n%s", ft.logText())
		}
	})

	t.Run("a worker the control plane forgot registers again", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		eventually.Within(t, 10*time.Second, "a first claim", func() bool { return len(b.srv.claimRequests()) >= 1 })
		b.srv.forgetWorkers()
		eventually.Within(t, 10*time.Second, "a second registration", func() bool {
			b.srv.mu.Lock()
			defer b.srv.mu.Unlock()
			return b.srv.registrations == 2
		})
		b.srv.enqueue(shTask("t9", `echo again`))
		if f := b.srv.finished(t, "t9", 10*time.Second); f.State != agentapi.StateCompleted {
			t.Fatalf("finish = %+v", f)
		}
		eventually.Within(t, 5*time.Second, "heartbeats from the new registration", func() bool {
			hb := b.srv.heartbeats()
			return len(hb) > 0 && hb[len(hb)-1].WorkerID == "worker-2"
		})
	})

	t.Run("a refused credential stops the worker", func(t *testing.T) {
		t.Parallel()
		srv := newFakeServer(t)
		cl := client.New(srv.url(), "kqw_wrong")
		w, err := New(Config{Client: cl, Runner: process.New(process.Options{}), WorkDir: t.TempDir(), GPUs: []agentapi.GPU{{Index: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "refused the worker credential") {
			t.Fatalf("Run = %v", err)
		}
	})

	t.Run("a credential of another pool stops the worker", func(t *testing.T) {
		t.Parallel()
		srv := newFakeServer(t)
		cl := client.New(srv.url(), testToken)
		w, err := New(Config{Client: cl, Runner: process.New(process.Options{}), WorkDir: t.TempDir(),
			GPUs: []agentapi.GPU{{Index: 0}}, Pool: "slurm-a100"})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), `belongs to pool "bare-metal", not "slurm-a100"`) {
			t.Fatalf("Run = %v", err)
		}
	})
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether a process exists and is not a zombie (an orphan
// may wait to be reaped by an init that does not reap).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	if i := strings.LastIndex(s, ")"); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
