// Package runner is the one small interface every environment implements
// behind the worker daemon's claim, heartbeat and report loop: a process or
// virtual environment on the host, a Docker container, and (issue 8) a
// Kubernetes pod or an HPC batch job. In the spirit of Kueue's
// jobframework.GenericJob, an environment only turns a claimed task into its
// own unit of work, says how it is doing, stops it, and tells what it knows
// at the end; the loop around it (agents/worker) is written once.
package runner

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// Runner starts tasks in one environment.
type Runner interface {
	// Name names the environment in logs: "process", "docker".
	Name() string
	// Fractions reports whether it can run a share of a GPU. When false,
	// the worker never claims a fraction.
	Fractions() bool
	// Submit starts the work and returns at once; preparing it (cloning,
	// installing, pulling) happens after, and Poll reports it as pending.
	Submit(ctx context.Context, job *Job) (Handle, error)
}

// Handle is one submitted task.
type Handle interface {
	// Poll says how the work is doing: pending (with a reason), running,
	// or ended (with an exit code).
	Poll(ctx context.Context) (Status, error)
	// Stop stops the work: SIGTERM (or the environment's equivalent), up
	// to grace for it to exit (so checkpointing code can save), then
	// SIGKILL. It returns once the work has ended or been killed.
	Stop(ctx context.Context, grace time.Duration) error
	// Diagnostics tells what is known once the work ended: exit code,
	// signal, out of memory, the last lines it printed.
	Diagnostics(ctx context.Context) Diagnostics
}

// Notifier is an optional capability of a Handle: Done is closed when the
// work has ended, so the worker need not poll for the end.
type Notifier interface {
	Done() <-chan struct{}
}

// CPUUser is an optional capability of a Handle: CPUTime is the CPU time
// the work's processes have used so far (false when it cannot be read),
// which the worker samples into an app instance's cpu.utilization for its
// idle limits.
type CPUUser interface {
	CPUTime() (time.Duration, bool)
}

// Cleaner is an optional capability of a Runner: Cleanup removes what an
// earlier run of the worker left behind (such as containers of a daemon
// that was killed), before the worker claims anything.
type Cleaner interface {
	Cleanup(ctx context.Context) error
}

// Job is a claimed task as the worker hands it to a runner.
type Job struct {
	// Task is the assignment as claimed.
	Task *agentapi.Assignment
	// GPUs are the GPUs assigned to the task, host indices.
	GPUs []agentapi.GPU
	// MilliGPUs is the share of each GPU in thousandths: 1000 for whole
	// GPUs, less for a fraction (then GPUs holds exactly one).
	MilliGPUs int64
	// Env is the task's environment, without the device variables, which
	// each runner sets in its own way (CUDA_VISIBLE_DEVICES, --gpus, ...).
	Env map[string]string
	// Dir is the task's own directory on the host, empty and writable: the
	// runner works (clones, runs) inside it.
	Dir string
	// Log receives every line the task prints (stream stdout or stderr)
	// and lines about preparing it (stream worker).
	Log LogSink
	// User, when set, is the account this task runs as, its own on this
	// host (the worker gave it a uid of its own, or its owner's mapped
	// account): it replaces the runner's configured user, and the task's
	// directory is given to it (0700). Process mode only.
	User *Account
	// Cache, when set, is the directory of the task's project's cached
	// Python environments (process mode), which tasks of no other project
	// can enter; it replaces the runner's own cache.
	Cache string
	// AppPort is, for an app instance in docker mode, the free port of
	// the host the worker picked for it: the runner publishes the app's
	// own port (Task.App.Port) on it, and the worker probes it there.
	AppPort int
}

// Account is a Linux account a task runs as.
type Account struct {
	Name     string
	UID, GID uint32
	// Groups are its supplementary groups.
	Groups []uint32
	Home   string
}

// AppReadiness is an optional capability of a Handle whose environment
// judges an app instance's readiness itself (a Kubernetes readiness probe
// on the health path): AppReady says whether the instance is ready now,
// and the address it answers at on the site's network (a pod's IP and the
// app's port). The worker asks it as often as it would probe.
type AppReadiness interface {
	AppReady(ctx context.Context) (address string, ready bool)
}

// LogSink receives one line of a task's output, without its newline.
type LogSink func(stream, line string)

// Phase is where a task is in its life.
type Phase int

// Phases.
const (
	// Pending: submitted, not running yet (preparing, pulling, queued).
	Pending Phase = iota
	// Running: the task's code runs.
	Running
	// Ended: it exited, failed to start, or was stopped.
	Ended
)

func (p Phase) String() string {
	switch p {
	case Pending:
		return "pending"
	case Running:
		return "running"
	case Ended:
		return "ended"
	}
	return "unknown"
}

// Status is a task's state as Poll reports it.
type Status struct {
	Phase Phase
	// Reason says why a task is pending ("cloning the repository") or,
	// when it ended without running, why.
	Reason string
	// ExitCode is the exit code once ended: 128+n when killed by signal
	// n, -1 when the task never ran.
	ExitCode int
}

// Diagnostics is what a runner knows at the end.
type Diagnostics struct {
	ExitCode int
	// Signal names the signal that ended the task, such as "killed".
	Signal string
	// OOMKilled is true when the environment says the task ran out of
	// memory.
	OOMKilled bool
	// Message says what went wrong when the task could not be started
	// ("git clone: exit status 128").
	Message string
	// LastLines are the last lines the task printed.
	LastLines []string
	// Reported is true when the work reported its own end to the control
	// plane (an HPC job does, with its task credential): the worker then
	// does not report it again.
	Reported bool
}

// ProfileChecker is an optional capability of a Runner whose environment
// fixes a task size of its own (a Kubernetes pod template with a GPU
// limit): CheckProfiles is given the sizes of the profiles that place work
// on the worker's pool when the worker registers, and an error stops the
// worker with its message, naming what disagrees, rather than failing
// every task later.
type ProfileChecker interface {
	CheckProfiles(profiles []agentapi.ProfileSize) error
}

// Recoverer is an optional capability of a Runner whose work can outlive
// the worker (a process group, a container): the runner keeps a record on
// disk of each attempt it started, and Recover, called once at start
// before anything is claimed (and again later for what it could not stop),
// stops what an earlier run of the worker left running: SIGTERM, grace,
// SIGKILL, or the environment's equivalent. It returns what it found, so
// the worker keeps the GPUs of work still running out of its hands.
type Recoverer interface {
	Recover(ctx context.Context, grace time.Duration) ([]Leftover, error)
}

// Leftover is one attempt an earlier run of the worker left, as Recover
// found it.
type Leftover struct {
	TaskID  string
	Attempt int
	// GPUs are the host indices it held.
	GPUs []int
	// What names it in logs: "process group 1234", "container klique-t-1".
	What string
	// WasRunning is true when its work was still running and was stopped.
	WasRunning bool
	// Running is true when it could not be stopped: its GPUs are in use.
	Running bool
	// Err says why it could not be stopped, or why its record could not
	// be read (then TaskID is empty and What is the file).
	Err error
}
