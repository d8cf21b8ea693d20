// Package docker is the Docker mode of the bare-metal worker: each task runs
// in its own container of the task's image, on the GPUs the worker assigned
// (--gpus "device=…"), with the task's directory mounted at the same path,
// its compute resource's mounts and the worker's own volumes.
// A task with a repository is cloned on the host into that directory first.
//
// Docker mode can run a fraction of a GPU as a memory-capped share: the
// container gets the one GPU and environment variables that cap its memory
// (CUDA MPS) and tell frameworks their share; docs/worker.md lists them.
//
// The runner drives the docker CLI, so it needs no Docker SDK and its tests
// run a fake docker on PATH.
//
// A container outlives a worker killed with SIGKILL (the docker CLI dies
// with the worker; the container does not). With a state directory
// (Options.State), each container is recorded on disk before it is
// started, and a restarted worker removes what its earlier run left
// (Recover) before it claims anything.
package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/agents/runner/internal/pgroup"
	"github.com/klique-ai/klique/agents/runner/source"
	"github.com/klique-ai/klique/agents/runner/state"
	"github.com/klique-ai/klique/internal/agentapi"
)

// Labels put on every container.
const (
	LabelTask    = "ai.klique.task"
	LabelAttempt = "ai.klique.attempt"
	LabelName    = "ai.klique.task-name"
	LabelProject = "ai.klique.project"
	LabelWorker  = "ai.klique.worker"
)

// Environment variables of a fractional share.
const (
	EnvFraction      = "KLIQUE_GPU_FRACTION"
	EnvMemoryLimitMB = "KLIQUE_GPU_MEMORY_LIMIT_MB"
	EnvMPSMemLimit   = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
	EnvMPSThreads    = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	EnvMPSPipeDir    = "CUDA_MPS_PIPE_DIRECTORY"
)

// Options configure the runner.
type Options struct {
	// Docker is the docker executable (default "docker").
	Docker string
	// Git clones repositories on the host (default "git").
	Git string
	// Instance names this worker on its containers (label
	// ai.klique.worker), so Cleanup finds what an earlier run left.
	Instance string
	// DefaultImage runs tasks that name no image.
	DefaultImage string
	// Volumes are extra -v mounts for every container (the shared
	// filesystem, datasets), as docker writes them: /data:/data:ro.
	Volumes []string
	// Network is the container network (--network), such as host.
	Network string
	// User runs the container as this user (--user uid:gid).
	User string
	// MPSPipeDir, when set, is the CUDA MPS pipe directory of the host's
	// MPS control daemon: fractional tasks share it (--ipc host and a
	// mount), so the memory cap is enforced by MPS.
	MPSPipeDir string
	// PublishHost is the host address an app instance's port is published
	// on (docker run -p PublishHost:port:appPort): 127.0.0.1 (the
	// default) keeps it on loopback; the host's own address, or 0.0.0.0,
	// lets the site reach it.
	PublishHost string
	// ExtraArgs are added to every docker run before the image.
	ExtraArgs []string
	// BaseEnv is the docker CLI's own environment (default: the daemon's,
	// without its KLIQUE_ variables).
	BaseEnv []string
	// State, when set, records each attempt's container, for Recover
	// after the worker was killed.
	State *state.Dir
}

// Runner runs tasks as Docker containers.
type Runner struct{ opts Options }

// New returns a docker runner.
func New(opts Options) *Runner {
	if opts.Docker == "" {
		opts.Docker = "docker"
	}
	if opts.Git == "" {
		opts.Git = "git"
	}
	if opts.PublishHost == "" {
		opts.PublishHost = "127.0.0.1"
	}
	if opts.BaseEnv == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "KLIQUE_") {
				opts.BaseEnv = append(opts.BaseEnv, kv)
			}
		}
	}
	return &Runner{opts: opts}
}

// Name is "docker".
func (r *Runner) Name() string { return agentapi.ModeDocker }

// Fractions is true: a fraction runs as a memory-capped container.
func (r *Runner) Fractions() bool { return true }

// Cleanup removes containers an earlier run of this worker left behind (a
// daemon killed with SIGKILL leaves its --rm containers running).
func (r *Runner) Cleanup(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, r.opts.Docker, "ps", "-aq", "--filter", "label="+LabelWorker+"="+r.opts.Instance).Output()
	if err != nil {
		return fmt.Errorf("list containers left by an earlier run: %w", err)
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return nil
	}
	if out, err := exec.CommandContext(ctx, r.opts.Docker, append([]string{"rm", "-f"}, ids...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("remove containers left by an earlier run: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Recover removes the containers an earlier run of the worker left running,
// as recorded in the state directory: docker stop with the grace period,
// then docker rm -f, and docker inspect to be sure each is gone.
func (r *Runner) Recover(ctx context.Context, grace time.Duration) ([]runner.Leftover, error) {
	return r.opts.State.Recover(ctx, grace, func(ctx context.Context, name string) (bool, error) {
		return r.removeContainer(ctx, name, grace)
	})
}

// removeContainer stops and removes a container and reports whether it
// existed; an error when it is still there or docker cannot tell.
func (r *Runner) removeContainer(ctx context.Context, name string, grace time.Duration) (existed bool, err error) {
	if existed, err = r.containerExists(ctx, name); err != nil || !existed {
		return existed, err
	}
	secs := int((grace + time.Second - 1) / time.Second)
	_, _ = r.cli(ctx, grace+time.Minute, "stop", "-t", strconv.Itoa(secs), name)
	if out, err := r.cli(ctx, 2*time.Minute, "rm", "-f", name); err != nil && !noSuchContainer(out) {
		return true, fmt.Errorf("docker rm -f %s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	still, err := r.containerExists(ctx, name)
	if err == nil && still {
		err = fmt.Errorf("container %s is still there after docker rm -f", name)
	}
	return true, err
}

// containerExists asks docker whether the container exists.
func (r *Runner) containerExists(ctx context.Context, name string) (bool, error) {
	out, err := r.cli(ctx, time.Minute, "inspect", "--type", "container", "--format", "{{.Id}}", name)
	switch {
	case err == nil:
		return true, nil
	case noSuchContainer(out):
		return false, nil
	}
	return false, fmt.Errorf("docker inspect %s: %w: %s", name, err, bytes.TrimSpace(out))
}

func noSuchContainer(out []byte) bool {
	return bytes.Contains(bytes.ToLower(out), []byte("no such"))
}

// cli runs a short docker command and returns its output.
func (r *Runner) cli(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, r.opts.Docker, args...)
	cmd.Env = r.opts.BaseEnv
	return cmd.CombinedOutput()
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// ContainerName is the container of one attempt of a task.
func ContainerName(taskID string, attempt int) string {
	return "klique-" + nameUnsafe.ReplaceAllString(taskID, "-") + "-" + strconv.Itoa(attempt)
}

// inArgv are variables passed with their value on docker's command line,
// because the docker CLI reads them itself. Every other value goes through
// the CLI's environment (-e NAME), so secrets never show in `ps`.
func inArgv(name string) bool {
	switch name {
	case "PATH", "HOME", "TMPDIR", "LD_LIBRARY_PATH", "LD_PRELOAD", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
		"http_proxy", "https_proxy", "no_proxy":
		return true
	}
	return strings.HasPrefix(name, "DOCKER_")
}

func setEnv(env []string, k, v string) []string {
	prefix := k + "="
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return append(out, prefix+v)
}

// Submit renders the container and starts it (after cloning the task's
// repository, when it has one).
func (r *Runner) Submit(ctx context.Context, job *runner.Job) (runner.Handle, error) {
	args, env, err := r.Render(job)
	if err != nil {
		return nil, err
	}
	if len(job.Task.Packages) > 0 {
		if err := os.WriteFile(filepath.Join(job.Dir, "requirements.txt"), []byte(strings.Join(job.Task.Packages, "\n")+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	h := &handle{r: r, job: job, args: args, env: env, name: ContainerName(job.Task.TaskID, job.Task.Attempt),
		tail: runner.NewTail(20), done: make(chan struct{}), reason: "preparing"}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancelPrep = cancel
	go h.run(pctx)
	return h, nil
}

type handle struct {
	r          *Runner
	job        *runner.Job
	args, env  []string
	name       string
	tail       *runner.Tail
	done       chan struct{}
	cancelPrep context.CancelFunc

	mu       sync.Mutex
	phase    runner.Phase
	reason   string
	proc     *pgroup.Proc
	stopped  bool
	exitCode int
	signal   string
	message  string
}

func (h *handle) Done() <-chan struct{} { return h.done }

func (h *handle) Poll(context.Context) (runner.Status, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := runner.Status{Phase: h.phase, Reason: h.reason}
	if h.phase == runner.Ended {
		st.ExitCode, st.Reason = h.exitCode, h.message
	}
	return st, nil
}

func (h *handle) Diagnostics(context.Context) runner.Diagnostics {
	h.mu.Lock()
	defer h.mu.Unlock()
	return runner.Diagnostics{ExitCode: h.exitCode, Signal: h.signal, Message: h.message, LastLines: h.tail.Lines()}
}

func (h *handle) end(code int, signal, message string) {
	h.mu.Lock()
	h.phase, h.exitCode, h.signal, h.message, h.reason = runner.Ended, code, signal, message, ""
	h.mu.Unlock()
	close(h.done)
}

func (h *handle) run(ctx context.Context) {
	defer h.cancelPrep()
	t := h.job.Task
	if err := os.MkdirAll(filepath.Join(h.job.Dir, "work"), 0o755); err != nil {
		h.end(-1, "", err.Error())
		return
	}
	if t.Repository != "" {
		h.mu.Lock()
		h.reason = "cloning " + t.Repository
		h.mu.Unlock()
		h.job.Log(agentapi.StreamWorker, fmt.Sprintf("cloning %s at %s", t.Repository, orDefault(t.Commit, "the default branch")))
		err := source.Checkout(ctx, h.exec, h.r.opts.Git, t.Repository, t.Commit, t.Diff,
			filepath.Join(h.job.Dir, "src"), filepath.Join(h.job.Dir, "uncommitted.diff"))
		if err != nil {
			if h.isStopped() {
				h.end(-1, "", "stopped before it started")
				return
			}
			h.job.Log(agentapi.StreamWorker, "could not start the task: "+err.Error())
			h.end(-1, "", err.Error())
			return
		}
	}
	if err := ownDir(h.job.Dir, h.r.opts.User); err != nil {
		h.job.Log(agentapi.StreamWorker, "could not start the task: "+err.Error())
		h.end(-1, "", err.Error())
		return
	}
	cmd := exec.Command(h.r.opts.Docker, h.args...)
	cmd.Env = h.env
	cmd.Dir = h.job.Dir
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		h.end(-1, "", "stopped before it started")
		return
	}
	// Recorded before it exists, so that no container outlives a killed
	// worker unrecorded.
	rec := &state.Record{TaskID: t.TaskID, Attempt: t.Attempt, Runner: agentapi.ModeDocker, Container: h.name,
		GPUs: make([]int, len(h.job.GPUs))}
	for i, g := range h.job.GPUs {
		rec.GPUs[i] = g.Index
	}
	if err := h.r.opts.State.Write(rec); err != nil {
		h.mu.Unlock()
		msg := "could not record the container in the state directory: " + err.Error()
		h.job.Log(agentapi.StreamWorker, msg)
		h.end(-1, "", msg)
		return
	}
	h.job.Log(agentapi.StreamWorker, "starting container "+h.name)
	proc, err := pgroup.Start(cmd, nil, func(stream, line string) {
		h.tail.Add(line)
		h.job.Log(stream, line)
	})
	if err != nil {
		h.mu.Unlock()
		h.forget()
		msg := fmt.Sprintf("start docker: %v", err)
		h.job.Log(agentapi.StreamWorker, "could not start the task: "+msg)
		h.end(-1, "", msg)
		return
	}
	h.proc, h.phase, h.reason = proc, runner.Running, ""
	h.mu.Unlock()
	<-proc.Done()
	code, sig, werr := proc.Exit()
	if sig == "" {
		h.forget()
	}
	msg := ""
	switch {
	case werr != nil:
		msg = werr.Error()
	case code == 125:
		msg = "docker could not run the container (exit code 125)"
	case code == 137 && sig == "":
		sig = "killed"
		msg = "the container was killed (SIGKILL): out of memory, or stopped"
	}
	h.end(code, sig, msg)
}

// forget removes the attempt's record once the docker CLI has ended on its
// own: with --rm, the container is gone with it. A CLI that was killed may
// leave its container (still being created, say): the record stays for the
// next Recover, which finds the container or its absence.
func (h *handle) forget() {
	if err := h.r.opts.State.Remove(h.job.Task.TaskID, h.job.Task.Attempt); err != nil {
		h.job.Log(agentapi.StreamWorker, "warning: "+err.Error())
	}
}

func (h *handle) isStopped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}

// exec runs a preparation command on the host, its output as worker lines.
func (h *handle) exec(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = setEnv(h.r.opts.BaseEnv, "GIT_TERMINAL_PROMPT", "0")
	tail := runner.NewTail(3)
	proc, err := pgroup.Start(cmd, nil, func(_, line string) {
		tail.Add(line)
		h.job.Log(agentapi.StreamWorker, line)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	select {
	case <-proc.Done():
	case <-ctx.Done():
		_ = proc.Stop(context.Background(), 0)
		return context.Canceled
	}
	if code, _, werr := proc.Exit(); werr != nil || code != 0 {
		return fmt.Errorf("%s %s exited with %d: %s", filepath.Base(name), args[0], code, strings.Join(tail.Lines(), " / "))
	}
	return nil
}

// Stop asks docker to stop the container (SIGTERM, the grace period,
// SIGKILL: docker stop -t), then makes sure with docker kill, and ends the
// docker CLI.
func (h *handle) Stop(ctx context.Context, grace time.Duration) error {
	h.mu.Lock()
	h.stopped = true
	proc := h.proc
	h.mu.Unlock()
	h.cancelPrep()
	if proc != nil {
		secs := int((grace + time.Second - 1) / time.Second)
		h.docker(ctx, "stop", "-t", strconv.Itoa(secs), h.name)
		select {
		case <-proc.Done():
		case <-time.After(5 * time.Second):
			h.docker(ctx, "kill", h.name)
			// The container may not exist yet (image still pulling):
			// end the docker CLI itself.
			_ = proc.Stop(ctx, 5*time.Second)
		case <-ctx.Done():
		}
	}
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// docker runs a short docker command, its output in the task's log.
func (h *handle) docker(ctx context.Context, args ...string) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, h.r.opts.Docker, args...)
	cmd.Env = h.r.opts.BaseEnv
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.job.Log(agentapi.StreamWorker, fmt.Sprintf("docker %s: %v: %s", args[0], err, bytes.TrimSpace(out)))
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ownDir gives the task's directory (0700: no other task's user enters it)
// to the container's user, when it is given as numbers (uid[:gid]), so
// that the task can read and write what the worker and the clone put
// there. A user named otherwise is one of the image's: the directory is
// then left 0711 and its files as they are.
func ownDir(dir, user string) error {
	if user == "" {
		return os.Chmod(dir, 0o700)
	}
	u, g, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		return os.Chmod(dir, 0o711)
	}
	gid := -1
	if g != "" {
		if gid, err = strconv.Atoi(g); err != nil {
			gid = -1
		}
	}
	err = filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("give the task's directory to the container's user %s: %w", user, err)
	}
	return os.Chmod(dir, 0o700)
}
