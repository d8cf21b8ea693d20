package agents_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// liveProcess reports whether pid runs (a zombie has ended).
func liveProcess(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// run is one attempt as its marker file tells it: the GPU it was given and
// the first and last of the ticks it wrote while it ran.
type run struct {
	file        string
	gpu         string
	first, last int64
}

func readRuns(t *testing.T, dir string) []run {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "run.*"))
	var out []run
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := run{file: filepath.Base(f)}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, v, _ := strings.Cut(l, " ")
			switch k {
			case "gpu":
				r.gpu = v
			case "tick":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					continue
				}
				if r.first == 0 {
					r.first = n
				}
				r.last = n
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].first < out[j].first })
	return out
}

// TestARestartedWorkerStopsWhatItsKilledRunLeftBeforeItClaims runs
// `klique worker` as a process with two GPUs and two tasks, kills it with
// SIGKILL, and starts it again on the same work directory. Each task's
// work is a process that outlives its group's leader (as a training
// script's workers do) and ticks into a marker file of its own attempt.
// The restarted worker must stop the orphans before it claims: no orphan
// is left, and no two attempts ever ran at the same time on one GPU.
func TestARestartedWorkerStopsWhatItsKilledRunLeftBeforeItClaims(t *testing.T) {
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
	work, marks := filepath.Join(dir, "work"), filepath.Join(dir, "marks")
	if err := os.MkdirAll(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	startWorker := func(log *syncWriter) *exec.Cmd {
		cmd := exec.Command(bin, "worker", "--pool", "bare-metal", "--task-uids", "off", "--server", e.url, "--token-file", tokenFile,
			"--gpus", "0,1", "--name", "phoenix-host", "--work-dir", work, "--grace", "1s", "--nvidia-smi", filepath.Join(dir, "absent"))
		cmd.Env = append(os.Environ(), "HOME="+dir, "KLIQUE_CONFIG=", "KLIQUE_API_KEY=", "KLIQUE_TOKEN=")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}

	// The work runs in a child of the task's shell and ticks every 50 ms
	// into its attempt's marker file; it prints nothing, so it does not
	// die of a broken pipe when its worker dies. The shell records the
	// child's pid.
	script := `m=` + marks + `/run.$KLIQUE_TASK_ID.$KLIQUE_TASK_ATTEMPT
echo "gpu $CUDA_VISIBLE_DEVICES" > $m
( while [ ! -f ` + release + ` ]; do echo "tick $(date +%s%N)" >> $m; sleep 0.05; done; echo "tick $(date +%s%N)" >> $m ) > /dev/null 2>&1 &
echo "pid $!" >> $m
echo "started attempt $KLIQUE_TASK_ATTEMPT"
wait`
	first := &syncWriter{}
	w1 := startWorker(first)
	ids := []string{e.enqueue(t, e.alice, "one", script), e.enqueue(t, e.alice, "two", script)}
	for _, id := range ids {
		e.waitTask(t, e.alice, id, "the task to run on the first worker", func(d map[string]any) bool {
			return str(d, "task", "status") == "RUNNING" && strings.Contains(logText(d), "started attempt 1")
		})
	}
	// The orphans-to-be: the ticking children of attempt 1.
	var orphans []int
	for _, id := range ids {
		b, _ := os.ReadFile(filepath.Join(marks, "run."+id+".1"))
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "pid "); ok {
				n, _ := strconv.Atoi(p)
				orphans = append(orphans, n)
			}
		}
	}
	if len(orphans) != 2 {
		t.Fatalf("the tasks' children: %v", orphans)
	}
	t.Cleanup(func() {
		for _, p := range orphans {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})

	if err := w1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w1.Wait()
	second := &syncWriter{}
	startWorker(second)

	// The restarted worker stops the orphans, and the control plane
	// requeues the lost attempts (once their 5 s lease runs out): each
	// task runs again as attempt 2 on the restarted worker.
	for _, id := range ids {
		e.waitTask(t, e.alice, id, "the task to run again", func(d map[string]any) bool {
			return str(d, "task", "status") == "RUNNING" && strings.Contains(logText(d), "started attempt 2")
		})
	}
	for _, p := range orphans {
		if liveProcess(p) {
			t.Errorf("the orphan %d of the killed worker still runs while attempt 2 runs", p)
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		d := e.waitTask(t, e.alice, id, "the task to complete", func(d map[string]any) bool { return str(d, "task", "status") == "COMPLETED" })
		if get(d, "task", "attempt") != 2.0 {
			t.Errorf("task %s completed as attempt %v", id, get(d, "task", "attempt"))
		}
	}

	// No two attempts overlapped on one GPU: an attempt's ticks all come
	// before the next one's on the same GPU.
	runs := readRuns(t, marks)
	if len(runs) != 4 {
		t.Fatalf("%d attempts ran, want 4 (two each): %+v", len(runs), runs)
	}
	lastOn := map[string]run{}
	for _, r := range runs {
		if r.first == 0 {
			t.Fatalf("attempt %s never ticked", r.file)
		}
		if prev, ok := lastOn[r.gpu]; ok && prev.last >= r.first {
			t.Errorf("on GPU %s, %s ran until %s after %s began: the orphan's GPU was handed out while it ran",
				r.gpu, prev.file, time.Duration(prev.last-r.first), r.file)
		}
		if prev, ok := lastOn[r.gpu]; !ok || r.last > prev.last {
			lastOn[r.gpu] = r
		}
	}
	if !strings.Contains(second.String(), "stopped what an earlier run of this worker left running") {
		t.Errorf("the restarted worker does not say what it stopped:\n%s", second)
	}
	if t.Failed() {
		t.Logf("first worker:\n%s\nsecond worker:\n%s", first, second)
		for _, r := range runs {
			t.Logf("%s on GPU %s: %d .. %d", r.file, r.gpu, r.first, r.last)
		}
	}
}
