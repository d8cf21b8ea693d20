package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/agents/runner/state"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

func job(dir string, gpus []agentapi.GPU, milli int64) *runner.Job {
	return &runner.Job{
		Task: &agentapi.Assignment{TaskID: "t-42", Attempt: 2, Name: "train", Project: "fraud-models", Image: "pytorch/pytorch:2.3",
			Command: []string{"python", "train.py", "--epochs", "3"}},
		GPUs: gpus, MilliGPUs: milli, Dir: dir,
		Env: map[string]string{"KLIQUE_TASK_ID": "t-42", "API_TOKEN": "s3cr3t", "PATH": "/opt/conda/bin:/usr/bin"},
		Log: func(string, string) {},
	}
}

func envOf(env []string, k string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestRender(t *testing.T) {
	t.Parallel()
	base := []string{"PATH=/usr/bin", "DOCKER_HOST=unix:///run/docker.sock"}

	t.Run("whole GPUs: the devices, the environment by name, the directory, the image and the command", func(t *testing.T) {
		r := New(Options{Instance: "gpu-host-1", Volumes: []string{"/data:/data:ro"}, BaseEnv: base})
		args, env, err := r.Render(job("/var/lib/kw/tasks/t-42.2", []agentapi.GPU{{Index: 2}, {Index: 3}}, 1000))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"run", "--rm", "--init", "--name", "klique-t-42-2",
			"--label", "ai.klique.task=t-42", "--label", "ai.klique.attempt=2", "--label", "ai.klique.task-name=train",
			"--label", "ai.klique.project=fraud-models", "--label", "ai.klique.worker=gpu-host-1",
			"--gpus", `"device=2,3"`,
			"-v", "/var/lib/kw/tasks/t-42.2:/var/lib/kw/tasks/t-42.2", "-v", "/data:/data:ro",
			"-w", "/var/lib/kw/tasks/t-42.2/work",
			"-e", "API_TOKEN", "-e", "CUDA_DEVICE_ORDER", "-e", "CUDA_VISIBLE_DEVICES", "-e", "KLIQUE_TASK_ID",
			"-e", "NVIDIA_VISIBLE_DEVICES", "-e", "PATH=/opt/conda/bin:/usr/bin",
			"pytorch/pytorch:2.3", "python", "train.py", "--epochs", "3"}
		if strings.Join(args, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("args:\n got %q\nwant %q", args, want)
		}
		for k, v := range map[string]string{"NVIDIA_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "0,1", "API_TOKEN": "s3cr3t",
			"KLIQUE_TASK_ID": "t-42", "PATH": "/usr/bin", "DOCKER_HOST": "unix:///run/docker.sock"} {
			if got, _ := envOf(env, k); got != v {
				t.Errorf("docker's environment %s=%q, want %q", k, got, v)
			}
		}
		for _, a := range args {
			if strings.Contains(a, "s3cr3t") {
				t.Fatalf("a secret is on docker's command line: %q", a)
			}
		}
	})

	t.Run("the compute resource's mounts come after the task's directory and before the worker's volumes", func(t *testing.T) {
		r := New(Options{Volumes: []string{"/data:/data:ro"}, BaseEnv: base})
		j := job("/w/t", []agentapi.GPU{{Index: 0}}, 1000)
		j.Task.Mounts = []string{"/data/hf-cache:/data/hf-cache", "/datasets:/datasets:ro"}
		args, _, err := r.Render(j)
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(args, " ")
		want := "-v /w/t:/w/t -v /data/hf-cache:/data/hf-cache -v /datasets:/datasets:ro -v /data:/data:ro -w /w/t/work"
		if !strings.Contains(joined, want) {
			t.Fatalf("args lack %q:\n%s", want, joined)
		}
	})

	t.Run("a malformed mount fails the task with the reason instead of reaching docker", func(t *testing.T) {
		for _, m := range []string{"data:/data", "/data:/data:rx", "/srv/../etc:/etc", "/a,b:/a"} {
			j := job("/w/t", nil, 0)
			j.Task.Mounts = []string{m}
			if _, _, err := New(Options{BaseEnv: base}).Render(j); err == nil || !strings.Contains(err.Error(), "mount") {
				t.Errorf("mount %q: err = %v", m, err)
			}
		}
	})

	t.Run("a fraction: one GPU, its memory cap and share in the environment", func(t *testing.T) {
		r := New(Options{MPSPipeDir: "/tmp/nvidia-mps", User: "1000:1000", Network: "host", BaseEnv: base})
		args, env, err := r.Render(job("/w/t", []agentapi.GPU{{Index: 1, MemoryMB: 81920}}, 250))
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(args, " ")
		for _, want := range []string{`--gpus "device=1"`, "--ipc host -v /tmp/nvidia-mps:/tmp/nvidia-mps", "--network host",
			"--user 1000:1000", "-e KLIQUE_GPU_FRACTION", "-e KLIQUE_GPU_MEMORY_LIMIT_MB", "-e CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
			"-e CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "-e CUDA_MPS_PIPE_DIRECTORY"} {
			if !strings.Contains(joined, want) {
				t.Errorf("args lack %q:\n%s", want, joined)
			}
		}
		for k, v := range map[string]string{"KLIQUE_GPU_FRACTION": "0.25", "KLIQUE_GPU_MEMORY_LIMIT_MB": "20480",
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=20480M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
			"NVIDIA_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0", "CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps"} {
			if got, _ := envOf(env, k); got != v {
				t.Errorf("%s=%q, want %q", k, got, v)
			}
		}
	})

	t.Run("a fraction of a GPU of unknown memory is refused", func(t *testing.T) {
		_, _, err := New(Options{BaseEnv: base}).Render(job("/w/t", []agentapi.GPU{{Index: 1}}, 500))
		if err == nil || !strings.Contains(err.Error(), "memory") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("no GPUs: none visible", func(t *testing.T) {
		args, env, err := New(Options{BaseEnv: base}).Render(job("/w/t", nil, 0))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(args, " "), "--gpus") {
			t.Fatalf("--gpus without GPUs: %q", args)
		}
		if v, _ := envOf(env, "NVIDIA_VISIBLE_DEVICES"); v != "void" {
			t.Fatalf("NVIDIA_VISIBLE_DEVICES=%q", v)
		}
	})

	t.Run("a repository task with packages installs them, then runs its entry point in the checkout", func(t *testing.T) {
		j := job("/w/t", []agentapi.GPU{{Index: 0}}, 1000)
		j.Task.Command, j.Task.Repository, j.Task.EntryPoint, j.Task.WorkingDir = nil, "https://git/x.git", "train.py", "src/model"
		j.Task.Packages = []string{"numpy"}
		args, _, err := New(Options{BaseEnv: base}).Render(j)
		if err != nil {
			t.Fatal(err)
		}
		tail := strings.Join(args[len(args)-6:], " ")
		if !strings.HasPrefix(tail, "sh -c python -m pip install") || !strings.HasSuffix(tail, "/w/t/requirements.txt python train.py") {
			t.Fatalf("command %q", tail)
		}
		if !strings.Contains(strings.Join(args, " "), "-w /w/t/src/src/model") {
			t.Fatalf("working dir: %q", args)
		}
	})

	t.Run("a task without an image is refused unless the worker has a default", func(t *testing.T) {
		j := job("/w/t", nil, 0)
		j.Task.Image = ""
		if _, _, err := New(Options{BaseEnv: base}).Render(j); err == nil {
			t.Fatal("no error")
		}
		args, _, err := New(Options{BaseEnv: base, DefaultImage: "python:3.11"}).Render(j)
		if err != nil || !strings.Contains(strings.Join(args, " "), "python:3.11 python train.py") {
			t.Fatalf("%q, %v", args, err)
		}
	})
}

// fakeDocker puts a docker on PATH that records each call (one argument a
// line, calls separated by "--") and its environment, prints lines, and on
// `run` waits until `stop` or `kill` is called (or exits at once with
// FAKE_DOCKER_EXIT).
const fakeDocker = `#!/bin/sh
d="$FAKE_DOCKER_DIR"
{ for a in "$@"; do echo "$a"; done; echo "--"; } >> "$d/calls"
case "$1" in
run)
  env > "$d/env"
  echo "container says hello"
  echo "pulling layer" >&2
  if [ -n "$FAKE_DOCKER_EXIT" ]; then exit "$FAKE_DOCKER_EXIT"; fi
  while [ ! -f "$d/stopped" ]; do sleep 0.02; done
  echo "container got SIGTERM"
  exit 143 ;;
stop|kill) touch "$d/stopped" ;;
ps) printf 'abc123\ndef456\n' ;;
rm) touch "$d/removed" ;;
inspect)
  if [ -f "$d/removed" ] || [ -f "$d/absent" ]; then echo "Error: No such container: $6" >&2; exit 1; fi
  if [ -f "$d/daemon-down" ]; then echo "Cannot connect to the Docker daemon" >&2; exit 1; fi
  echo 0123abcd ;;
esac
`

type fakeBundle struct {
	dir string
	mu  sync.Mutex
	out []string
}

func setupFake(t *testing.T, exit string) *fakeBundle {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fakeDocker), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &fakeBundle{dir: t.TempDir()}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_DOCKER_DIR", b.dir)
	t.Setenv("FAKE_DOCKER_EXIT", exit)
	return b
}

func (b *fakeBundle) sink(stream, line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out = append(b.out, stream+": "+line)
}

func (b *fakeBundle) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.out...)
}

// calls returns the recorded docker calls, each a list of arguments.
func (b *fakeBundle) calls(t *testing.T) [][]string {
	t.Helper()
	raw, _ := os.ReadFile(filepath.Join(b.dir, "calls"))
	var out [][]string
	var cur []string
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if l == "--" {
			out = append(out, cur)
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	return out
}

func waitDone(t *testing.T, h runner.Handle) runner.Status {
	t.Helper()
	select {
	case <-h.(runner.Notifier).Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the container did not end")
	}
	st, _ := h.Poll(context.Background())
	return st
}

// The fake docker tests change PATH, so they do not run in parallel.
func TestFakeDocker(t *testing.T) {
	t.Run("a container runs with the rendered arguments, its lines and exit code come back", func(t *testing.T) {
		b := setupFake(t, "3")
		j := job(t.TempDir(), []agentapi.GPU{{Index: 0}, {Index: 1}}, 1000)
		j.Log = b.sink
		h, err := New(Options{Instance: "host-a"}).Submit(context.Background(), j)
		if err != nil {
			t.Fatal(err)
		}
		st := waitDone(t, h)
		if st.Phase != runner.Ended || st.ExitCode != 3 {
			t.Fatalf("status %+v", st)
		}
		calls := b.calls(t)
		if len(calls) != 1 || calls[0][0] != "run" || !strings.Contains(strings.Join(calls[0], " "), `--gpus "device=0,1"`) {
			t.Fatalf("calls %q", calls)
		}
		env, _ := os.ReadFile(filepath.Join(b.dir, "env"))
		if !strings.Contains(string(env), "API_TOKEN=s3cr3t\n") || !strings.Contains(string(env), "NVIDIA_VISIBLE_DEVICES=0,1\n") {
			t.Fatalf("docker's environment lacks the task's values:\n%s", env)
		}
		got := strings.Join(b.lines(), "\n")
		if !strings.Contains(got, "stdout: container says hello") || !strings.Contains(got, "stderr: pulling layer") {
			t.Fatalf("lines:\n%s", got)
		}
		if _, err := os.Stat(filepath.Join(j.Dir, "work")); err != nil {
			t.Fatalf("the working directory was not created: %v", err)
		}
	})

	t.Run("stop uses docker stop with the grace in seconds", func(t *testing.T) {
		b := setupFake(t, "")
		j := job(t.TempDir(), []agentapi.GPU{{Index: 0}}, 1000)
		j.Log = b.sink
		h, err := New(Options{}).Submit(context.Background(), j)
		if err != nil {
			t.Fatal(err)
		}
		eventually.True(t, "the container to start", func() bool { return strings.Contains(strings.Join(b.lines(), "\n"), "container says hello") })
		if st, _ := h.Poll(context.Background()); st.Phase != runner.Running {
			t.Fatalf("phase %v, want running", st.Phase)
		}
		if err := h.Stop(context.Background(), 1500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		st := waitDone(t, h)
		if st.ExitCode != 143 {
			t.Fatalf("exit code %d", st.ExitCode)
		}
		calls := b.calls(t)
		if len(calls) != 2 || strings.Join(calls[1], " ") != "stop -t 2 klique-t-42-2" {
			t.Fatalf("calls %q, want docker stop -t 2 klique-t-42-2 second", calls)
		}
	})

	t.Run("a container is recorded while it runs, and a restarted worker removes what a killed one left", func(t *testing.T) {
		b := setupFake(t, "")
		st := state.New(t.TempDir())
		j := job(t.TempDir(), []agentapi.GPU{{Index: 1}, {Index: 3}}, 1000)
		j.Log = b.sink
		r := New(Options{Instance: "host-a", State: st})
		h, err := r.Submit(context.Background(), j)
		if err != nil {
			t.Fatal(err)
		}
		eventually.True(t, "the container to start", func() bool { return strings.Contains(strings.Join(b.lines(), "\n"), "container says hello") })
		es, err := st.List()
		if err != nil || len(es) != 1 || es[0].Record.Container != "klique-t-42-2" || es[0].Record.TaskID != "t-42" ||
			es[0].Record.Attempt != 2 || fmt.Sprint(es[0].Record.GPUs) != "[1 3]" || es[0].Record.Runner != "docker" {
			t.Fatalf("records while the container runs: %+v, %v", es, err)
		}
		if err := h.Stop(context.Background(), time.Second); err != nil {
			t.Fatal(err)
		}
		waitDone(t, h)
		if es, _ := st.List(); len(es) != 0 {
			t.Fatalf("the record of an ended container stays: %+v", es)
		}

		// A worker killed with SIGKILL leaves its record and its
		// container: the next run stops and removes it, and makes sure.
		if err := st.Write(&state.Record{TaskID: "t-7", Attempt: 1, GPUs: []int{0}, Runner: "docker", Container: "klique-t-7-1"}); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(filepath.Join(b.dir, "calls"))
		left, err := r.Recover(context.Background(), 1500*time.Millisecond)
		if err != nil || len(left) != 1 || !left[0].WasRunning || left[0].Running || left[0].Err != nil || left[0].TaskID != "t-7" {
			t.Fatalf("Recover = %+v, %v", left, err)
		}
		var got []string
		for _, c := range b.calls(t) {
			got = append(got, strings.Join(c, " "))
		}
		want := []string{"inspect --type container --format {{.Id}} klique-t-7-1", "stop -t 2 klique-t-7-1", "rm -f klique-t-7-1",
			"inspect --type container --format {{.Id}} klique-t-7-1"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("docker calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if es, _ := st.List(); len(es) != 0 {
			t.Fatalf("the record of a removed container stays: %+v", es)
		}

		// With the Docker daemon down the worker cannot tell: the
		// container counts as running, its record stays for a later try.
		_ = os.Remove(filepath.Join(b.dir, "removed"))
		if err := os.WriteFile(filepath.Join(b.dir, "daemon-down"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := st.Write(&state.Record{TaskID: "t-8", Attempt: 1, GPUs: []int{2}, Runner: "docker", Container: "klique-t-8-1"}); err != nil {
			t.Fatal(err)
		}
		left, err = r.Recover(context.Background(), time.Second)
		if err != nil || len(left) != 1 || !left[0].Running || left[0].Err == nil || !strings.Contains(left[0].Err.Error(), "Cannot connect to the Docker daemon") {
			t.Fatalf("Recover with the daemon down = %+v, %v", left, err)
		}
		if es, _ := st.List(); len(es) != 1 {
			t.Fatalf("the record of a container that may still run was removed: %+v", es)
		}
	})

	t.Run("cleanup removes the containers an earlier run left", func(t *testing.T) {
		b := setupFake(t, "")
		if err := New(Options{Instance: "host-a"}).Cleanup(context.Background()); err != nil {
			t.Fatal(err)
		}
		calls := b.calls(t)
		if len(calls) != 2 || strings.Join(calls[0], " ") != "ps -aq --filter label=ai.klique.worker=host-a" ||
			strings.Join(calls[1], " ") != "rm -f abc123 def456" {
			t.Fatalf("calls %q", calls)
		}
	})
}

// TestRenderAppInstance: an app instance's container publishes the app's
// port on the host port the worker picked, at the configured address, and
// runs the image with the app's container args (its process line is for
// process mode); a worker on the host's network cannot publish it, and
// says what to change.
func TestRenderAppInstance(t *testing.T) {
	t.Parallel()
	app := func() *runner.Job {
		j := job("/w/t", []agentapi.GPU{{Index: 0}, {Index: 1}}, 1000)
		j.Task.Image = "vllm/vllm-openai:latest"
		j.Task.Command = []string{"vllm", "serve", "m", "--port", "8000"}
		j.Task.App = &agentapi.AppAssignment{Port: 8000, HealthPath: "/health",
			Args: []string{"--model", "m", "--port", "8000", "--tensor-parallel-size", "2"}}
		j.AppPort = 41234
		return j
	}
	for _, c := range []struct{ publish, want string }{
		{"", "127.0.0.1:41234:8000/tcp"},
		{"10.0.0.7", "10.0.0.7:41234:8000/tcp"},
	} {
		args, _, err := New(Options{PublishHost: c.publish, BaseEnv: []string{}}).Render(app())
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(args, " ")
		if !strings.Contains(joined, " -p "+c.want+" ") {
			t.Errorf("publish host %q: docker run does not publish %s:\n%s", c.publish, c.want, joined)
		}
		if !strings.HasSuffix(joined, " vllm/vllm-openai:latest --model m --port 8000 --tensor-parallel-size 2") {
			t.Errorf("docker run does not run the image with the app's args:\n%s", joined)
		}
	}
	j := app()
	j.Task.App.Args = nil
	args, _, err := New(Options{BaseEnv: []string{}}).Render(j)
	if err != nil || args[len(args)-1] != "vllm/vllm-openai:latest" {
		t.Errorf("an app without container args runs the image's own command: %q %v", args, err)
	}
	if _, _, err := New(Options{Network: "host", BaseEnv: []string{}}).Render(app()); err == nil || !strings.Contains(err.Error(), "--docker-network host") {
		t.Errorf("an app on the host's network: %v, want a refusal naming --docker-network host", err)
	}
	j = app()
	j.AppPort = 0
	if _, _, err := New(Options{BaseEnv: []string{}}).Render(j); err == nil || !strings.Contains(err.Error(), "host port") {
		t.Errorf("an app without a host port: %v", err)
	}
}
