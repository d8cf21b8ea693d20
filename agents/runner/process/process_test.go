package process

import (
	"archive/zip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/agents/runner/state"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// output collects what a job printed.
type output struct {
	mu    sync.Mutex
	lines map[string][]string
}

func (o *output) sink(stream, line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lines == nil {
		o.lines = map[string][]string{}
	}
	o.lines[stream] = append(o.lines[stream], line)
}

func (o *output) get(stream string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines[stream]...)
}

func (o *output) text() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var all []string
	for _, s := range []string{agentapi.StreamWorker, agentapi.StreamStdout, agentapi.StreamStderr} {
		all = append(all, o.lines[s]...)
	}
	return strings.Join(all, "\n")
}

func newJob(t *testing.T, a *agentapi.Assignment, out *output) *runner.Job {
	t.Helper()
	if a.TaskID == "" {
		a.TaskID, a.Attempt = "task-1", 1
	}
	return &runner.Job{Task: a, GPUs: []agentapi.GPU{{Index: 2}, {Index: 3}}, MilliGPUs: 1000,
		Env: map[string]string{"KLIQUE_PARAM_LR": "0.01", "PYTHONUNBUFFERED": "1"}, Dir: t.TempDir(), Log: out.sink}
}

// wait waits for the handle to end and returns its status.
func wait(t *testing.T, h runner.Handle, timeout time.Duration) runner.Status {
	t.Helper()
	select {
	case <-h.(runner.Notifier).Done():
	case <-time.After(timeout):
		t.Fatalf("the task did not end within %s", timeout)
	}
	st, err := h.Poll(context.Background())
	if err != nil || st.Phase != runner.Ended {
		t.Fatalf("Poll = %+v, %v after the end", st, err)
	}
	return st
}

func TestCommandTask(t *testing.T) {
	t.Parallel()

	t.Run("a command prints, exits 3, and both are seen", func(t *testing.T) {
		t.Parallel()
		out := &output{}
		job := newJob(t, &agentapi.Assignment{Command: []string{"sh", "-c", `echo "gpus=$CUDA_VISIBLE_DEVICES lr=$KLIQUE_PARAM_LR"; pwd; echo warn >&2; exit 3`}}, out)
		h, err := New(Options{}).Submit(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		st := wait(t, h, 10*time.Second)
		if st.ExitCode != 3 {
			t.Fatalf("exit code %d, want 3", st.ExitCode)
		}
		stdout := out.get(agentapi.StreamStdout)
		if len(stdout) != 2 || stdout[0] != "gpus=2,3 lr=0.01" || stdout[1] != filepath.Join(job.Dir, "work") {
			t.Fatalf("stdout = %q", stdout)
		}
		if got := out.get(agentapi.StreamStderr); len(got) != 1 || got[0] != "warn" {
			t.Fatalf("stderr = %q", got)
		}
		d := h.Diagnostics(context.Background())
		if d.ExitCode != 3 || len(d.LastLines) == 0 {
			t.Fatalf("diagnostics %+v", d)
		}
	})

	t.Run("a command that does not exist fails to start with a reason", func(t *testing.T) {
		t.Parallel()
		out := &output{}
		h, err := New(Options{}).Submit(context.Background(), newJob(t, &agentapi.Assignment{Command: []string{"no-such-command-xyz"}}, out))
		if err != nil {
			t.Fatal(err)
		}
		st := wait(t, h, 10*time.Second)
		if st.ExitCode != -1 || !strings.Contains(st.Reason, "no-such-command-xyz: not found") {
			t.Fatalf("status %+v", st)
		}
	})

	t.Run("a fraction of a GPU is refused with the reason", func(t *testing.T) {
		t.Parallel()
		job := newJob(t, &agentapi.Assignment{Command: []string{"true"}}, &output{})
		job.MilliGPUs = 500
		if _, err := New(Options{}).Submit(context.Background(), job); !errors.Is(err, ErrFractions) {
			t.Fatalf("err = %v", err)
		}
		if New(Options{}).Fractions() {
			t.Fatal("process mode claims to run fractions")
		}
	})

	t.Run("stop sends SIGTERM to the group and waits for the task to save", func(t *testing.T) {
		t.Parallel()
		out := &output{}
		marker := filepath.Join(t.TempDir(), "saved")
		h, err := New(Options{}).Submit(context.Background(), newJob(t, &agentapi.Assignment{Command: []string{"sh", "-c",
			`trap 'sleep 0.2; echo ok > ` + marker + `; exit 0' TERM; echo ready; while true; do sleep 0.05; done`}}, out))
		if err != nil {
			t.Fatal(err)
		}
		waitLine(t, out, "ready")
		if err := h.Stop(context.Background(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		st := wait(t, h, time.Second)
		if st.ExitCode != 0 {
			t.Fatalf("exit code %d, want 0 (the trap exits cleanly)\n%s", st.ExitCode, out.text())
		}
		if b, _ := os.ReadFile(marker); string(b) != "ok\n" {
			t.Fatalf("marker %q", b)
		}
	})

	t.Run("stop kills a task that ignores SIGTERM after the grace, and its children", func(t *testing.T) {
		t.Parallel()
		out := &output{}
		pidFile := filepath.Join(t.TempDir(), "pid")
		h, err := New(Options{}).Submit(context.Background(), newJob(t, &agentapi.Assignment{Command: []string{"sh", "-c",
			`trap '' TERM; (trap '' TERM; echo $(exec sh -c 'echo $PPID') > ` + pidFile + `; while true; do sleep 0.05; done) & echo ready; while true; do sleep 0.05; done`}}, out))
		if err != nil {
			t.Fatal(err)
		}
		waitLine(t, out, "ready")
		begin := time.Now()
		if err := h.Stop(context.Background(), 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d < 300*time.Millisecond {
			t.Fatalf("stopped after %s, before the grace", d)
		}
		st := wait(t, h, time.Second)
		if st.ExitCode != 128+int(syscall.SIGKILL) {
			t.Fatalf("exit code %d, want 137", st.ExitCode)
		}
		if d := h.Diagnostics(context.Background()); d.Signal != "killed" {
			t.Fatalf("signal %q", d.Signal)
		}
		b, _ := os.ReadFile(pidFile)
		pid := strings.TrimSpace(string(b))
		eventually.Within(t, 3*time.Second, "the task's child "+pid+" to die with it", func() bool { return !processAlive(pid) })
	})

	t.Run("a child left running after the task exits is killed", func(t *testing.T) {
		t.Parallel()
		out := &output{}
		pidFile := filepath.Join(t.TempDir(), "pid")
		h, err := New(Options{}).Submit(context.Background(), newJob(t, &agentapi.Assignment{Command: []string{"sh", "-c",
			`sleep 300 & echo $! > ` + pidFile + `; exit 0`}}, out))
		if err != nil {
			t.Fatal(err)
		}
		wait(t, h, 5*time.Second)
		b, _ := os.ReadFile(pidFile)
		pid := strings.TrimSpace(string(b))
		eventually.Within(t, 3*time.Second, "the background child "+pid+" to die with the task", func() bool { return !processAlive(pid) })
	})

	t.Run("a task runs as the configured user", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		dir, err := os.MkdirTemp("", "klique-runas-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out := &output{}
		job := newJob(t, &agentapi.Assignment{Command: []string{"sh", "-c", `id -u; echo $HOME; touch mine`}}, out)
		job.Dir = dir
		u := &User{Name: "nobody", UID: 65534, GID: 65534, Home: "/nonexistent"}
		h, err := New(Options{User: u}).Submit(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if st := wait(t, h, 10*time.Second); st.ExitCode != 0 {
			t.Fatalf("exit %d:\n%s", st.ExitCode, out.text())
		}
		if got := out.get(agentapi.StreamStdout); len(got) != 2 || got[0] != "65534" || got[1] != "/nonexistent" {
			t.Fatalf("stdout %q", got)
		}
		fi, err := os.Stat(filepath.Join(dir, "work", "mine"))
		if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
			t.Fatalf("the file the task wrote: %v, %v", fi, err)
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func processAlive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndex(s, ")")
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitLine(t *testing.T, out *output, line string) {
	t.Helper()
	if !eventually.Poll(10*time.Second, func() bool { return contains(out.get(agentapi.StreamStdout), line) }) {
		t.Fatalf("no line %q:\n%s", line, out.text())
	}
}

// gitRepo makes a bare repository with two commits and returns its path,
// the first commit, and a diff against it.
func gitRepo(t *testing.T) (bare, first, diff string) {
	t.Helper()
	work := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("train/main.py", "import os\nprint('commit one, lr', os.environ['KLIQUE_PARAM_LR'])\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	first = git("rev-parse", "HEAD")
	write("train/main.py", "print('commit two')\n")
	git("commit", "-q", "-am", "two")
	// The uncommitted change, recorded against commit one.
	git("checkout", "-q", first)
	write("train/main.py", "import os\nprint('commit one, lr', os.environ['KLIQUE_PARAM_LR'])\nprint('patched, cwd', os.path.basename(os.getcwd()))\n")
	write("train/new_file.txt", "added by the diff\n")
	git("add", "-N", "train/new_file.txt")
	diff = git("diff")
	bare = filepath.Join(t.TempDir(), "repo.git")
	git("clone", "-q", "--bare", work, bare)
	return bare, first, diff + "\n"
}

func TestRepositoryTask(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	bare, first, diff := gitRepo(t)
	out := &output{}
	job := newJob(t, &agentapi.Assignment{Repository: bare, Commit: first, Diff: diff, EntryPoint: "main.py", WorkingDir: "train"}, out)
	h, err := New(Options{}).Submit(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if st := wait(t, h, 20*time.Second); st.ExitCode != 0 {
		t.Fatalf("exit %d: %s\n%s", st.ExitCode, st.Reason, out.text())
	}
	got := out.get(agentapi.StreamStdout)
	if strings.Join(got, "|") != "commit one, lr 0.01|patched, cwd train" {
		t.Fatalf("stdout = %q\n%s", got, out.text())
	}
	if b, err := os.ReadFile(filepath.Join(job.Dir, "src", "train", "new_file.txt")); err != nil || string(b) != "added by the diff\n" {
		t.Fatalf("new file from the diff: %q, %v", b, err)
	}

	t.Run("an unknown commit fails with the reason", func(t *testing.T) {
		out := &output{}
		h, err := New(Options{}).Submit(context.Background(), newJob(t, &agentapi.Assignment{Repository: bare,
			Commit: "0123456789abcdef0123456789abcdef01234567", EntryPoint: "main.py"}, out))
		if err != nil {
			t.Fatal(err)
		}
		st := wait(t, h, 20*time.Second)
		if st.ExitCode != -1 || !strings.Contains(st.Reason, "check out commit 0123456789abcdef") {
			t.Fatalf("status %+v", st)
		}
	})
}

func TestVenvKey(t *testing.T) {
	t.Parallel()
	a := VenvKey("python3", []string{"torch==2.3", "numpy", "numpy"})
	b := VenvKey("python3", []string{" numpy", "torch==2.3"})
	if a != b {
		t.Fatalf("the same package set gives two keys: %s, %s", a, b)
	}
	if a == VenvKey("python3", []string{"numpy"}) || a == VenvKey("python3.12", []string{"numpy", "torch==2.3"}) {
		t.Fatal("different sets or interpreters share a key")
	}
}

// wheel writes a tiny pure-Python wheel, so pip installs offline.
func wheel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kliquetestpkg-1.0-py3-none-any.whl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	files := map[string]string{
		"kliquetestpkg/__init__.py":            "GREETING = 'hello from the wheel'\n",
		"kliquetestpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: kliquetestpkg\nVersion: 1.0\n",
		"kliquetestpkg-1.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: klique-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"kliquetestpkg-1.0.dist-info/RECORD":   "kliquetestpkg/__init__.py,,\nkliquetestpkg-1.0.dist-info/METADATA,,\nkliquetestpkg-1.0.dist-info/WHEEL,,\nkliquetestpkg-1.0.dist-info/RECORD,,\n",
	}
	for _, name := range []string{"kliquetestpkg/__init__.py", "kliquetestpkg-1.0.dist-info/METADATA", "kliquetestpkg-1.0.dist-info/WHEEL", "kliquetestpkg-1.0.dist-info/RECORD"} {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVirtualEnvironment(t *testing.T) {
	t.Parallel()
	if err := exec.Command("python3", "-m", "venv", "--help").Run(); err != nil {
		t.Skip("python3 -m venv is not available")
	}
	bare, first, _ := gitRepo(t)
	whl := wheel(t)
	cache := t.TempDir()
	r := New(Options{VenvCache: cache, PipArgs: []string{"--no-index"}})
	run := func(entry string) *output {
		t.Helper()
		out := &output{}
		job := newJob(t, &agentapi.Assignment{Repository: bare, Commit: first, EntryPoint: entry,
			Packages: []string{whl}, Command: []string{"python", "-c", "import sys, kliquetestpkg; print(kliquetestpkg.GREETING); print(sys.prefix)"}}, out)
		h, err := r.Submit(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if st := wait(t, h, 120*time.Second); st.ExitCode != 0 {
			t.Fatalf("exit %d: %s\n%s", st.ExitCode, st.Reason, out.text())
		}
		return out
	}
	out := run("train/main.py")
	key := VenvKey("python3", []string{whl})
	got := out.get(agentapi.StreamStdout)
	if len(got) != 2 || got[0] != "hello from the wheel" || got[1] != filepath.Join(cache, key) {
		t.Fatalf("stdout %q\n%s", got, out.text())
	}
	if !strings.Contains(out.text(), "creating the Python environment "+key) {
		t.Fatalf("log:\n%s", out.text())
	}
	out = run("train/main.py")
	if !strings.Contains(out.text(), "reusing the cached Python environment "+key) || strings.Contains(out.text(), "creating the Python environment") {
		t.Fatalf("the second task did not reuse the environment:\n%s", out.text())
	}
}

func TestStopWhilePreparing(t *testing.T) {
	t.Parallel()
	// A python whose venv creation never ends.
	python := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(python, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := &output{}
	h, err := New(Options{Python: python, VenvCache: t.TempDir()}).Submit(context.Background(),
		newJob(t, &agentapi.Assignment{Command: []string{"true"}, Packages: []string{"numpy"}}, out))
	if err != nil {
		t.Fatal(err)
	}
	var st runner.Status
	if !eventually.Poll(10*time.Second, func() bool {
		st, _ = h.Poll(context.Background())
		return st.Phase == runner.Pending && st.Reason == "creating a Python environment"
	}) {
		t.Fatalf("status %+v", st)
	}
	begin := time.Now()
	if err := h.Stop(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("stopping a task being prepared took %s", d)
	}
	if st := wait(t, h, time.Second); st.ExitCode != -1 || st.Reason != "stopped before it started" {
		t.Fatalf("status %+v", st)
	}
}

// TestGoneProcessIsNotARecordFailure: a task that exits before the runner
// reads its /proc entry (a task that ends at once) fails the read with an
// error gone recognises, so the task ends as it ended instead of failing
// with "could not record the task in the state directory".
func TestGoneProcessIsNotARecordFailure(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	_, _, err := state.Process(cmd.Process.Pid)
	if err == nil || !gone(err) {
		t.Fatalf("reading a reaped process: %v, want an error gone recognises", err)
	}
	if gone(errors.New("state directory: permission denied")) {
		t.Fatal("gone took another error for a reaped process")
	}
}
