package worker

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/agents/runner/docker"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// appReadyIn returns the address the worker's latest heartbeat reports for
// the task's app, and whether it reports it ready.
func appReadyIn(s *fakeServer, id string) (string, bool) {
	beats := s.heartbeats()
	for i := len(beats) - 1; i >= 0; i-- {
		for _, hb := range beats[i].Tasks {
			if hb.TaskID == id && hb.App != nil {
				return hb.App.Address, hb.App.Ready
			}
		}
	}
	return "", false
}

// appDocker stands in for the docker CLI: `docker run` records its
// arguments and runs, in place of the container, an HTTP server on the
// host port the -p option publishes (as the published container port
// would answer there); `docker stop` ends it.
const appDocker = `#!/bin/sh
dir="$FAKE_DOCKER_DIR"
case "$1" in
run)
	printf '%s\n' "$@" > "$dir/run-args"
	pub=""
	prev=""
	for a in "$@"; do
		[ "$prev" = "-p" ] && pub="$a"
		prev="$a"
	done
	hostport="${pub#*:}"; hostport="${hostport%%:*}"
	echo $$ > "$dir/pid"
	exec python3 -m http.server "$hostport" --bind 127.0.0.1
	;;
stop|kill)
	kill "$(cat "$dir/pid")" 2>/dev/null
	;;
esac
exit 0
`

// TestDockerAppInstanceIsPublishedAndProbed: in docker mode the worker
// picks a free host port, the runner publishes the app's own port on it
// (-p 127.0.0.1:HOST:8000) and runs the image with the app's container
// args (the app's port filled in, not the host's), and the worker probes
// the published port and reports ready with 127.0.0.1:HOST; a stop ends
// the container. Docker cannot run containers on this machine (no
// daemon), so a fake docker on PATH stands in for the container with a
// real HTTP server on the published port.
func TestDockerAppInstanceIsPublishedAndProbed(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(appDocker), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_DOCKER_DIR", dir)
	b := setup(t, func(c *Config) {
		c.Runner = docker.New(docker.Options{Instance: "gpu-host-1"})
		c.AppProbeInterval = 50 * time.Millisecond
		c.AppStartTimeout = 20 * time.Second
	})
	a := agentapi.Assignment{TaskID: "web", Name: "web-alice-1", MilliGPUsPerNode: 1000, Nodes: 1, Image: "python:3.12-slim",
		Command: []string{"python3", "-m", "http.server", "{port}"}, Env: map[string]string{"KLIQUE_APP_PORT": "{port}"},
		Project: "fraud-models", Owner: "alice", LeaseSeconds: 10,
		App: &agentapi.AppAssignment{Port: 8000, HealthPath: "/", Args: []string{"python3", "-m", "http.server", "8000"}}}
	b.srv.enqueue(a)

	var addr string
	eventually.Within(t, 20*time.Second, "the instance to be reported ready", func() bool {
		var ready bool
		addr, ready = appReadyIn(b.srv, "web")
		return ready
	})
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "8000" {
		t.Fatalf("reported address %q, want 127.0.0.1 and the host port the worker picked", addr)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "run-args"))
	args := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	joined := strings.Join(args, " ")
	if !strings.Contains(joined, " -p 127.0.0.1:"+port+":8000/tcp ") {
		t.Fatalf("docker run does not publish the app's port 8000 on host port %s:\n%s", port, joined)
	}
	if !strings.HasSuffix(joined, " python:3.12-slim python3 -m http.server 8000") {
		t.Fatalf("docker run does not run the image with the app's container args:\n%s", joined)
	}
	if resp, err := http.Get("http://" + addr + "/"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the reported address does not answer: %v %v", resp, err)
	}
	b.srv.stop("web", "stopped by alice", agentapi.StateAborted)
	f := b.srv.finished(t, "web", 20*time.Second)
	if f.State != agentapi.StateAborted {
		t.Fatalf("stopped: %+v", f)
	}
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Fatalf("the instance still answers at %s after its stop", addr)
	}
}

// readyRunner runs nothing, like fakeRunner, in pod mode; its handles say
// whether the instance is ready, as a pod's Ready condition would.
type readyRunner struct {
	*fakeRunner
	mu    sync.Mutex
	ready bool
	addr  string
}

func (r *readyRunner) Name() string { return agentapi.ModePod }

func (r *readyRunner) Submit(ctx context.Context, job *runner.Job) (runner.Handle, error) {
	h, err := r.fakeRunner.Submit(ctx, job)
	return &readyHandle{fakeHandle: h.(*fakeHandle), r: r}, err
}

func (r *readyRunner) set(ready bool, addr string) {
	r.mu.Lock()
	r.ready, r.addr = ready, addr
	r.mu.Unlock()
}

type readyHandle struct {
	*fakeHandle
	r *readyRunner
}

func (h *readyHandle) AppReady(context.Context) (string, bool) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.r.addr, h.r.ready
}

// TestPodAppInstanceReadinessFromTheHandle: in pod mode the app listens on
// its own port ({port} is the app's port, no host port is picked), and the
// worker reports what the runner's handle says (the pod's readiness and
// IP): not ready until it is, then ready with its address, then not ready
// again after UnreadyAfter checks.
func TestPodAppInstanceReadinessFromTheHandle(t *testing.T) {
	t.Parallel()
	rr := &readyRunner{fakeRunner: newFakeRunner()}
	b := setup(t, func(c *Config) {
		c.Runner, c.Placed, c.PollInterval = rr, true, 20*time.Millisecond
		c.AppProbeInterval, c.AppUnreadyAfter = 20*time.Millisecond, 2
	})
	b.srv.enqueue(agentapi.Assignment{TaskID: "vllm", Name: "vllm-alice-1", MilliGPUsPerNode: 2000, Nodes: 1,
		Command: []string{"vllm", "serve", "m", "--port", "{port}"}, Env: map[string]string{"KLIQUE_APP_PORT": "{port}"}, LeaseSeconds: 10,
		App: &agentapi.AppAssignment{Port: 8000, HealthPath: "/health"}})
	eventually.Within(t, 10*time.Second, "the job to be submitted", func() bool { return rr.job("vllm") != nil })
	j := rr.job("vllm")
	if j.AppPort != 0 || j.Env["KLIQUE_APP_PORT"] != "8000" || strings.Join(j.Task.Command, " ") != "vllm serve m --port 8000" {
		t.Fatalf("pod mode: host port %d, KLIQUE_APP_PORT %q, command %q; want no host port and the app's own port 8000",
			j.AppPort, j.Env["KLIQUE_APP_PORT"], j.Task.Command)
	}
	eventually.Within(t, 10*time.Second, "a heartbeat saying not ready", func() bool {
		addr, ready := appReadyIn(b.srv, "vllm")
		return !ready && addr == "" && len(b.srv.heartbeats()) > 2
	})
	rr.set(true, "10.1.2.3:8000")
	eventually.Within(t, 10*time.Second, "the pod's address reported ready", func() bool {
		addr, ready := appReadyIn(b.srv, "vllm")
		return ready && addr == "10.1.2.3:8000"
	})
	rr.set(false, "")
	eventually.Within(t, 10*time.Second, "not ready again", func() bool {
		_, ready := appReadyIn(b.srv, "vllm")
		return !ready
	})
	rr.end("vllm")
	if f := b.srv.finished(t, "vllm", 10*time.Second); f.State != agentapi.StateFailed {
		t.Fatalf("an app whose pod ended: %+v, want failed", f)
	}
}
