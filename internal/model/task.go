package model

import "time"

// TaskStatus is where a task is in its life.
type TaskStatus string

const (
	// TaskQueued waits in its compute resource for the engine to place it.
	TaskQueued TaskStatus = "queued"
	// TaskPlaced is placed on a pool and waits in the pool's hidden queue for
	// a worker to claim it. Capacity is held from here on.
	TaskPlaced TaskStatus = "placed"
	// TaskRunning is claimed by a worker and running.
	TaskRunning TaskStatus = "running"
	// TaskCompleted ended with success.
	TaskCompleted TaskStatus = "completed"
	// TaskFailed ended with an error.
	TaskFailed TaskStatus = "failed"
	// TaskAborted was stopped by a person or a program.
	TaskAborted TaskStatus = "aborted"
	// TaskLocal is a run on its owner's own machine, recorded by the SDK
	// (docs/experiments.md, "The run record"): no worker runs it, so the
	// engine never places, counts or charges it. It has no compute
	// resource until it is sent to one (execute remotely), when it
	// becomes queued like any task.
	TaskLocal TaskStatus = "local"
)

// Valid reports whether s is a known status.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskQueued, TaskPlaced, TaskRunning, TaskCompleted, TaskFailed, TaskAborted, TaskLocal:
		return true
	}
	return false
}

// Final reports whether a task in this status will not change again.
func (s TaskStatus) Final() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskAborted
}

// TaskSpec is what a task runs: a command, or a repository at a commit with an
// entry point, with its packages, container image, parameters and environment.
// Secrets are never part of a spec: they come from vaults at start.
type TaskSpec struct {
	Command    []string          `json:"command,omitempty"`
	Repository string            `json:"repository,omitempty"`
	Commit     string            `json:"commit,omitempty"`
	Diff       string            `json:"diff,omitempty"`
	EntryPoint string            `json:"entryPoint,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	Packages   []string          `json:"packages,omitempty"`
	Image      string            `json:"image,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	// Secrets names vault secrets the worker injects into the task's
	// environment at start, under the same names. Only names are kept.
	Secrets []string `json:"secrets,omitempty"`
	// Kind is empty for work that runs to completion, or
	// TaskKindApplication for an app instance, whose App says what it runs.
	Kind string     `json:"kind,omitempty"`
	App  *AppLaunch `json:"app,omitempty"`
	// Inputs are earlier runs' artifacts the task reads, by reference: the
	// worker fetches each under the task owner's authority before the
	// task starts.
	Inputs []ArtifactInput `json:"inputs,omitempty"`
}

// ArtifactInput gives a task an artifact of an earlier run as an input.
// The worker puts it at a path it names in KLIQUE_INPUT_<NAME> (as
// ParamEnvName forms names) and lists every input in KLIQUE_INPUTS_FILE.
type ArtifactInput struct {
	// Name is what the task calls the input: letters, digits, '-', '_'
	// and '.', unique in the task.
	Name string `json:"name"`
	// TaskID is the run that published the artifact.
	TaskID string `json:"taskId"`
	// Artifact is the artifact's name on that run.
	Artifact string `json:"artifact"`
}

// Artifact is a file a run published: stored by the control plane (in its
// data directory or its bucket), or, when larger than the stored limit or
// written to a destination of its own, a pointer to where it is.
type Artifact struct {
	ID       string
	TenantID string
	TaskID   string
	// Name is unique in the run (a later upload of the same name replaces
	// it).
	Name string
	// Size in bytes, and the SHA-256 of the content as lowercase hex; a
	// pointer has them when its publisher gave them.
	Size   int64
	SHA256 string
	// ContentType is what the publisher said it is (default
	// application/octet-stream).
	ContentType string
	// Pointer is where a pointer artifact is (a URL or path in the
	// run's output destination); empty for a stored artifact.
	Pointer string
	// StorageKey is where a stored artifact's bytes are in the control
	// plane's artifact storage; empty for a pointer. Never shown to users.
	StorageKey string
	// CreatedBy is the user the run belongs to (the publisher acts for
	// them: the SDK under their key, or the run's worker).
	CreatedBy string
	CreatedAt time.Time
}

// Task is one tracked run on a compute resource.
type Task struct {
	ID                string
	TenantID          string
	ProjectID         string
	OwnerID           string
	ComputeResourceID string
	// PolicyID, ProfileID and GroupID are copied from the compute resource
	// when the task is enqueued, so that queue and ledger queries need no join.
	PolicyID  string
	ProfileID string
	GroupID   string
	Name      string
	Spec      TaskSpec
	// Size is the task's resolved GPU size: the profile's, or the task's own
	// when the profile reads it from a parameter.
	Size   Size
	Status TaskStatus
	// Reason says why the task is in its status: why it waits, why it was
	// preempted, who aborted it.
	Reason string
	// QueueSeq is the task's sequence number, set once at enqueue: the
	// order task lists and their cursors follow. A preempted task keeps it.
	QueueSeq int64
	// QueueRank and QueueOrder are the task's place in its compute
	// resource's queue: the queue is in (QueueRank, QueueOrder, QueueSeq)
	// order. QueueRank is its project's place in its team's project
	// priority (QueueRankUnlisted when the project is not listed, or the
	// task has none); QueueOrder starts as QueueSeq and changes only when
	// a lead moves the task. A preempted task keeps both, so it goes back
	// in its old order.
	QueueRank    int
	QueueOrder   int64
	PoolID       string
	ClonedFromID string
	// Tags label the task for people and for triggers (a schedule can
	// start when a task of a project completes with a tag). Set at
	// enqueue, kept on clone.
	Tags []string
	// Run is set once a worker has claimed the task.
	Run        TaskRun
	CreatedAt  time.Time
	UpdatedAt  time.Time
	PlacedAt   *time.Time
	FinishedAt *time.Time
}

// TaskRun is what a task's run adds to it once a worker claims it.
type TaskRun struct {
	// WorkerID is the worker that claimed the current attempt.
	WorkerID string
	// Attempt counts claims; it is the fencing token of reports.
	Attempt int
	// LeaseExpiresAt: without a heartbeat by then, the worker is lost.
	LeaseExpiresAt *time.Time
	// Retries counts requeues after a lost worker.
	Retries   int
	StartedAt *time.Time
	ExitCode  *int
	// Outputs point to where the task wrote its outputs.
	Outputs []string
	// AppAddress is where an app instance's current attempt answers on its
	// health path (host:port as reachable from its worker's site), as its
	// worker last reported; empty while it is not ready.
	AppAddress string
	// AppAllow is what the platform decided when the address was
	// reported: the networks a direct dial to it may reach, as CIDRs
	// joined by commas (the network the report came from, then the pool's
	// appNetworks), or "*" for a pool declared local (appnet.ParseAllow).
	// The router and the gateway check the IP they actually dial against
	// it, so a name that resolves elsewhere later is refused.
	AppAllow string
	// AppRefused is why the reported address was refused by the router's
	// address rule ("" when it was accepted): the instance stays ready
	// (its worker's tunnel still reaches it), but no direct dial is made.
	AppRefused string
	// AppActiveAt is when an app instance's attempt was last used
	// (traffic, or GPU or CPU over the idle thresholds), to about a
	// minute; nil when it has not been since it started.
	AppActiveAt *time.Time
	// AppWarnedAt is when the instance was warned that its idle limits
	// will stop it; nil when it has not been (or was used since).
	AppWarnedAt *time.Time
}

// MaxDiffBytes bounds a task spec's diff (the uncommitted changes a run
// carries). It is a model-level constant so that the code recorder
// (internal/codestate) and the task spec's check (tasks.ValidateTaskSpec)
// share it without the recorder importing a domain.
const MaxDiffBytes = 2 << 20

// AppAddress is an app instance's address as the platform records it from
// its worker's report: where it answers, the networks a direct dial may
// reach, and why the address was refused (see TaskRun's fields).
type AppAddress struct {
	Address string
	Allow   string
	Refused string
}
