package hpc

import (
	"context"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/agents/runner"
)

// Scheduler is what differs between Slurm, PBS and LSF: how a batch script
// is submitted, how a job's state is read, how a job is cancelled, and the
// built-in batch template. Everything else (the user map, the job's files,
// its credential, the state machine the worker sees) is written once, in
// Runner.
type Scheduler interface {
	// Name is slurm, pbs or lsf.
	Name() string
	// Title names the scheduler for people: "Slurm".
	Title() string
	// DefaultTemplate is the batch template used when none is configured.
	DefaultTemplate() string
	// SubmitCommand is the command that submits the script at path; when
	// stdin is true the script's text is given on standard input
	// (bsub < script) instead.
	SubmitCommand(path string) (argv []string, stdin bool)
	// ParseSubmit reads the job id from what the submit command printed.
	ParseSubmit(out string) (string, error)
	// State reads a job's state, running commands with run.
	State(ctx context.Context, run Exec, jobID string) (JobState, error)
	// CancelCommand cancels a job: the scheduler signals it (SIGTERM,
	// then SIGKILL after its own grace).
	CancelCommand(jobID string) []string
}

// Exec runs a scheduler command (as the job's Linux account) and returns
// its standard output; err is set when it exits non-zero, with its
// standard error in the message.
type Exec func(ctx context.Context, argv []string, stdin string) (string, error)

// JobState is a batch job's state as the scheduler tells it.
type JobState struct {
	// Known is false when the scheduler does not know the job (any more).
	Known bool
	// State is the scheduler's own word: PENDING, R, EXIT.
	State string
	Phase runner.Phase
	// Reason says why a job waits (Resources, Priority) or how it ended.
	Reason string
	// Node is where it runs, when the scheduler says.
	Node string
	// ExitCode is set once ended: 128+n when killed by signal n.
	ExitCode int
	// OOM is true when the scheduler says the job ran out of memory.
	OOM bool
}

// ByName returns the scheduler of that name.
func ByName(name string) (Scheduler, bool) {
	switch strings.ToLower(name) {
	case "slurm":
		return Slurm{}, true
	case "pbs":
		return PBS{}, true
	case "lsf":
		return LSF{}, true
	}
	return nil, false
}

// atoiOr parses n, or returns def.
func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return def
	}
	return n
}
