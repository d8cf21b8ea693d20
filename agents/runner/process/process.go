// Package process is the virtual-environment mode of the bare-metal worker:
// it runs a task natively on the host. A task that is a command runs in a
// fresh working directory; a task with a repository is cloned at its
// recorded commit with its uncommitted changes applied, gets a Python
// virtual environment with its packages (cached by package set) when it
// lists any, and runs its entry point.
//
// Each task runs in its own process group, as the configured user, with
// CUDA_VISIBLE_DEVICES set to its GPUs. Stopping it sends SIGTERM to the
// whole group, waits the grace period, then sends SIGKILL; whatever the task
// started in its group is killed when it ends. Fractions of a GPU are
// refused: they need memory-capped containers (docker mode).
//
// With a state directory (Options.State), each running attempt's process
// group is recorded on disk, so that a worker restarted after SIGKILL stops
// what its earlier run left (Recover) before it claims anything; the
// leader of each group also dies with the worker (PR_SET_PDEATHSIG).
package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/agents/runner/internal/pgroup"
	"github.com/klique-ai/klique/agents/runner/source"
	"github.com/klique-ai/klique/agents/runner/state"
	"github.com/klique-ai/klique/internal/agentapi"
)

// ErrFractions is the reason a fraction of a GPU is refused in process mode.
var ErrFractions = errors.New("a fraction of a GPU needs docker mode (memory-capped containers); this worker runs tasks as processes, which cannot share a GPU safely")

// Options configure the runner.
type Options struct {
	// Python is the interpreter for entry points and new virtual
	// environments (default "python3").
	Python string
	// Git is the git executable (default "git").
	Git string
	// VenvCache is where virtual environments are kept, one per package
	// set. Tasks that list packages need it.
	VenvCache string
	// PipArgs are added to every pip install (such as --index-url URL or
	// --no-index --find-links DIR).
	PipArgs []string
	// User, when set, is the account tasks run as (the daemon must run as
	// root). Preparation (clone, venv, pip) runs as that user too.
	User *User
	// BaseEnv is the environment every task starts from before its own
	// (default: the daemon's, without its KLIQUE_ variables).
	BaseEnv []string
	// State, when set, records each running attempt's process group, for
	// Recover after the worker was killed.
	State *state.Dir
}

// User is an account to run tasks as.
type User = runner.Account

func credential(u *User) *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// user is the account the job runs as: its own when the worker gave it
// one, else the runner's configured user (nil: the daemon's).
func (r *Runner) user(job *runner.Job) *User {
	if job.User != nil {
		return job.User
	}
	return r.opts.User
}

// Runner runs tasks as process groups on the host.
type Runner struct {
	opts Options

	mu    sync.Mutex
	venvs map[string]*sync.Mutex
}

// New returns a process runner.
func New(opts Options) *Runner {
	if opts.Python == "" {
		opts.Python = "python3"
	}
	if opts.Git == "" {
		opts.Git = "git"
	}
	if opts.BaseEnv == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "KLIQUE_") {
				opts.BaseEnv = append(opts.BaseEnv, kv)
			}
		}
	}
	return &Runner{opts: opts, venvs: map[string]*sync.Mutex{}}
}

// Name is "process".
func (r *Runner) Name() string { return agentapi.ModeProcess }

// Fractions is false: processes cannot share a GPU with a memory cap.
func (r *Runner) Fractions() bool { return false }

// Recover stops the process groups an earlier run of the worker left
// running, as recorded in the state directory.
func (r *Runner) Recover(ctx context.Context, grace time.Duration) ([]runner.Leftover, error) {
	return r.opts.State.Recover(ctx, grace, nil)
}

// Submit validates the job and starts preparing and running it.
func (r *Runner) Submit(ctx context.Context, job *runner.Job) (runner.Handle, error) {
	t := job.Task
	if job.MilliGPUs > 0 && job.MilliGPUs < 1000 {
		return nil, ErrFractions
	}
	if len(t.Command) == 0 && (t.Repository == "" || t.EntryPoint == "") {
		return nil, errors.New("the task has nothing to run: give it a command, or a repository with an entry point")
	}
	if len(t.Packages) > 0 && r.opts.VenvCache == "" && job.Cache == "" {
		return nil, errors.New("the task lists packages but the worker has no directory for virtual environments")
	}
	// The task's directory is its own: no other task's user enters it.
	if err := chownTree(job.Dir, r.user(job)); err != nil {
		return nil, err
	}
	if err := os.Chmod(job.Dir, 0o700); err != nil {
		return nil, err
	}
	h := &handle{r: r, job: job, tail: runner.NewTail(20), done: make(chan struct{}), reason: "preparing"}
	h.log = func(stream, line string) {
		if stream != agentapi.StreamWorker {
			h.tail.Add(line)
		}
		job.Log(stream, line)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancelPrep = cancel
	go h.run(pctx)
	return h, nil
}

type handle struct {
	r          *Runner
	job        *runner.Job
	log        runner.LogSink
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
		st.ExitCode = h.exitCode
		st.Reason = h.message
	}
	return st, nil
}

// CPUTime is the CPU time of the task's process group so far (false
// while it has not started, or once it has ended).
func (h *handle) CPUTime() (time.Duration, bool) {
	h.mu.Lock()
	proc := h.proc
	h.mu.Unlock()
	if proc == nil {
		return 0, false
	}
	return proc.CPUTime()
}

func (h *handle) Diagnostics(context.Context) runner.Diagnostics {
	h.mu.Lock()
	defer h.mu.Unlock()
	return runner.Diagnostics{ExitCode: h.exitCode, Signal: h.signal, Message: h.message, LastLines: h.tail.Lines()}
}

func (h *handle) Stop(ctx context.Context, grace time.Duration) error {
	h.mu.Lock()
	h.stopped = true
	proc := h.proc
	h.mu.Unlock()
	h.cancelPrep()
	if proc != nil {
		if err := proc.Stop(ctx, grace); err != nil {
			return err
		}
	}
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *handle) setPending(reason string) {
	h.mu.Lock()
	h.reason = reason
	h.mu.Unlock()
}

func (h *handle) end(code int, signal, message string) {
	h.mu.Lock()
	h.phase, h.exitCode, h.signal, h.message, h.reason = runner.Ended, code, signal, message, ""
	h.mu.Unlock()
	close(h.done)
}

// run prepares the task, runs it and records how it ended.
func (h *handle) run(ctx context.Context) {
	defer h.cancelPrep()
	argv, dir, env, err := h.prepare(ctx)
	if err != nil {
		if h.isStopped() {
			h.end(-1, "", "stopped before it started")
			return
		}
		h.log(agentapi.StreamWorker, "could not start the task: "+err.Error())
		h.end(-1, "", err.Error())
		return
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		h.end(-1, "", "stopped before it started")
		return
	}
	proc, err := pgroup.Start(cmd, credential(h.r.user(h.job)), h.log)
	if err != nil {
		h.mu.Unlock()
		msg := fmt.Sprintf("start %s: %v", argv[0], err)
		h.log(agentapi.StreamWorker, "could not start the task: "+msg)
		h.end(-1, "", msg)
		return
	}
	h.proc, h.phase, h.reason = proc, runner.Running, ""
	h.mu.Unlock()
	if err := h.track(proc); err != nil && !gone(err) {
		// Unrecorded, the task would outlive a killed worker unseen.
		_ = proc.Stop(context.Background(), 0)
		<-proc.Done()
		h.untrack()
		msg := "could not record the task in the state directory: " + err.Error()
		h.log(agentapi.StreamWorker, msg)
		h.end(-1, "", msg)
		return
	}
	<-proc.Done()
	h.untrack()
	code, sig, werr := proc.Exit()
	msg := ""
	if werr != nil {
		msg = werr.Error()
	}
	h.end(code, sig, msg)
}

// gone reports whether track failed because the process had already
// exited and been reaped (a task that ends at once): there is then nothing
// left to record, and the task ends as it ended, not as a failure of the
// worker.
func gone(err error) bool {
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, fs.ErrNotExist)
}

// track records the running process group of the attempt (the main
// process, or a preparation command), replacing the record of the one
// before.
func (h *handle) track(proc *pgroup.Proc) error {
	if h.r.opts.State == nil {
		return nil
	}
	start, boot, err := state.Process(proc.Pid())
	if err != nil {
		return err
	}
	t := h.job.Task
	rec := &state.Record{TaskID: t.TaskID, Attempt: t.Attempt, Runner: agentapi.ModeProcess, PID: proc.Pid(),
		StartTime: start, BootID: boot, GPUs: make([]int, len(h.job.GPUs))}
	for i, g := range h.job.GPUs {
		rec.GPUs[i] = g.Index
	}
	return h.r.opts.State.Write(rec)
}

// untrack forgets the attempt's record once its process group is gone.
func (h *handle) untrack() {
	if err := h.r.opts.State.Remove(h.job.Task.TaskID, h.job.Task.Attempt); err != nil {
		h.log(agentapi.StreamWorker, "warning: "+err.Error())
	}
}

func (h *handle) isStopped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}

// prepare builds what the task needs and returns its command line, working
// directory and environment.
func (h *handle) prepare(ctx context.Context) (argv []string, dir string, env []string, err error) {
	t, opts := h.job.Task, h.r.opts
	env = taskEnv(opts.BaseEnv, h.job, h.r.user(h.job))
	base := filepath.Join(h.job.Dir, "work")
	if t.Repository != "" {
		base = filepath.Join(h.job.Dir, "src")
		h.setPending("cloning " + t.Repository)
		h.log(agentapi.StreamWorker, fmt.Sprintf("cloning %s at %s", t.Repository, orDefault(t.Commit, "the default branch")))
		if err := source.Checkout(ctx, h.exec(env), opts.Git, t.Repository, t.Commit, t.Diff, base,
			filepath.Join(h.job.Dir, "uncommitted.diff")); err != nil {
			return nil, "", nil, err
		}
		if t.Diff != "" {
			h.log(agentapi.StreamWorker, "applied the recorded uncommitted changes")
		}
	} else {
		if err := mkdirOwned(base, h.r.user(h.job)); err != nil {
			return nil, "", nil, err
		}
		if t.Diff != "" {
			// A script uploaded from outside a git checkout: a diff that
			// creates its files in the empty working directory.
			if err := source.Create(ctx, h.exec(env), opts.Git, t.Diff, base, filepath.Join(h.job.Dir, "uploaded.diff")); err != nil {
				return nil, "", nil, err
			}
			h.log(agentapi.StreamWorker, "wrote the uploaded files")
		}
	}
	python := opts.Python
	if len(t.Packages) > 0 {
		venv, err := h.r.venv(ctx, h, env, t.Packages)
		if err != nil {
			return nil, "", nil, err
		}
		python = filepath.Join(venv, "bin", "python")
		env = setEnv(env, "VIRTUAL_ENV", venv)
		env = setEnv(env, "PATH", filepath.Join(venv, "bin")+string(os.PathListSeparator)+getEnv(env, "PATH"))
	}
	dir = base
	if t.WorkingDir != "" {
		if filepath.IsAbs(t.WorkingDir) {
			dir = t.WorkingDir
		} else {
			dir = filepath.Join(base, filepath.Clean(string(filepath.Separator)+t.WorkingDir))
		}
	}
	if len(t.Command) > 0 {
		argv = append([]string(nil), t.Command...)
	} else {
		argv = []string{python, t.EntryPoint}
	}
	path, err := lookPath(argv[0], getEnv(env, "PATH"), dir)
	if err != nil {
		return nil, "", nil, err
	}
	argv[0] = path
	h.log(agentapi.StreamWorker, "running "+strings.Join(argv, " ")+" in "+dir)
	return argv, dir, env, nil
}

// exec runs a preparation command as the task's user, its output in the
// task's log as worker lines.
func (h *handle) exec(env []string) source.Exec {
	return func(ctx context.Context, dir, name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = setEnv(env, "GIT_TERMINAL_PROMPT", "0")
		tail := runner.NewTail(3)
		proc, err := pgroup.Start(cmd, credential(h.r.user(h.job)), func(_, line string) {
			tail.Add(line)
			h.job.Log(agentapi.StreamWorker, line)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer h.untrack()
		// A quick command (git apply) may end before it is read: gone.
		if err := h.track(proc); err != nil && !gone(err) {
			_ = proc.Stop(context.Background(), 0)
			return fmt.Errorf("could not record %s in the state directory: %w", name, err)
		}
		select {
		case <-proc.Done():
		case <-ctx.Done():
			_ = proc.Stop(context.Background(), 0)
			return context.Canceled
		}
		code, _, werr := proc.Exit()
		if werr != nil {
			return fmt.Errorf("%s: %w", filepath.Base(name), werr)
		}
		if code != 0 {
			last := strings.Join(tail.Lines(), " / ")
			if last != "" {
				return fmt.Errorf("%s %s exited with %d: %s", filepath.Base(name), firstArg(args), code, last)
			}
			return fmt.Errorf("%s %s exited with %d", filepath.Base(name), firstArg(args), code)
		}
		return nil
	}
}

func firstArg(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// taskEnv is the base environment with the task's variables and its GPUs on
// top.
func taskEnv(base []string, job *runner.Job, u *User) []string {
	env := append([]string(nil), base...)
	if u != nil {
		env = setEnv(env, "HOME", u.Home)
		env = setEnv(env, "USER", u.Name)
		env = setEnv(env, "LOGNAME", u.Name)
	}
	keys := make([]string, 0, len(job.Env))
	for k := range job.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = setEnv(env, k, job.Env[k])
	}
	idx := make([]string, len(job.GPUs))
	for i, g := range job.GPUs {
		idx[i] = strconv.Itoa(g.Index)
	}
	// nvidia-smi numbers GPUs in PCI bus order; CUDA does too with this set.
	env = setEnv(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	env = setEnv(env, "CUDA_VISIBLE_DEVICES", strings.Join(idx, ","))
	return env
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

func getEnv(env []string, k string) string {
	prefix := k + "="
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], prefix) {
			return env[i][len(prefix):]
		}
	}
	return ""
}

// lookPath finds name the way a shell would with the task's PATH (not the
// daemon's), so a virtual environment's python comes first.
func lookPath(name, path, dir string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the task's PATH", name)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// mkdirOwned creates dir (and parents) owned by u when set.
func mkdirOwned(dir string, u *User) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if u != nil {
		return os.Chown(dir, int(u.UID), int(u.GID))
	}
	return nil
}

// chownTree gives dir and everything in it to u, when set.
func chownTree(dir string, u *User) error {
	if u == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(u.UID), int(u.GID))
	})
}
