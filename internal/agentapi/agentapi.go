// Package agentapi is the worker protocol: the versioned HTTP+JSON API
// under /api/agent/v1/ through which worker daemons, HPC submitters and
// cloud autoscalers pull work from the control plane, and through which the
// jobs an HPC submitter starts report with a task credential. The control
// plane never connects into an environment; agents connect out, pull, and
// report. docs/agent-protocol.md describes the protocol for people; these
// types are the wire format both sides share.
//
// Every request carries the worker credential as "Authorization: Bearer
// kqw_…". Reports about a task carry the attempt number the claim returned
// (a fencing token): a report with an old attempt is refused with 409, so a
// worker that lost its lease can never overwrite what a newer attempt did.
package agentapi

import "time"

// Version is the protocol version in the path.
const Version = "v1"

// Prefix is where the protocol is served.
const Prefix = "/api/agent/" + Version

// Paths of the protocol.
const (
	PathRegister  = Prefix + "/register"
	PathClaim     = Prefix + "/claim"
	PathHeartbeat = Prefix + "/heartbeat"
	// Per task: Prefix + "/tasks/{id}/logs", "/metrics", "/finish", "/secrets".
	PathTasks = Prefix + "/tasks/"
)

// Limits a server applies.
const (
	// MaxClaimWait bounds a claim's long poll.
	MaxClaimWait = 25 * time.Second
	// MaxLogLinesPerBatch and MaxLogLineBytes bound one logs request.
	MaxLogLinesPerBatch = 5000
	MaxLogLineBytes     = 16 << 10
	// MaxMetricsPerBatch bounds one metrics request.
	MaxMetricsPerBatch = 5000
	// MaxHeartbeatTasks bounds the tasks one heartbeat lists: more than a
	// worker of 1024 GPUs runs in eighths. A worker that holds more sends
	// several heartbeats.
	MaxHeartbeatTasks = 10000
)

// GPU is one GPU a worker owns.
type GPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid,omitempty"`
	MemoryMB int    `json:"memoryMb,omitempty"`
}

// Worker modes.
const (
	ModeProcess = "process"
	ModeDocker  = "docker"
	// ModePod: the worker renders each task as a Kubernetes pod (or an
	// indexed Job across nodes) and the cluster's scheduler places it.
	ModePod = "pod"
	// ModeBatch: an HPC submitter turns each task into a batch job
	// (sbatch, qsub, bsub) and the cluster's scheduler places it.
	ModeBatch = "batch"
)

// RegisterRequest announces a worker daemon. Registering again from the same
// host for the same pool updates the same worker.
type RegisterRequest struct {
	Hostname string `json:"hostname"`
	GPUs     []GPU  `json:"gpus"`
	Version  string `json:"version"`
	// Mode is process (virtual environment) or docker.
	Mode string `json:"mode"`
	// Kind is the environment: bare_metal (the default), kubernetes, slurm,
	// pbs, lsf, cloud.
	Kind string `json:"kind,omitempty"`
	// Labels describe the worker (rack=r7, site=dc1); shown in the
	// orchestration view.
	Labels map[string]string `json:"labels,omitempty"`
}

// RegisterResponse says who the worker is and how often to call.
type RegisterResponse struct {
	WorkerID string `json:"workerId"`
	Pool     string `json:"pool"`
	// LeaseSeconds is how long a claimed task stays the worker's without a
	// heartbeat; HeartbeatSeconds how often to send one.
	LeaseSeconds     int `json:"leaseSeconds"`
	HeartbeatSeconds int `json:"heartbeatSeconds"`
	// LogLimitBytes is how much log one task may store.
	LogLimitBytes int64 `json:"logLimitBytes"`
	// Profiles are the sizes of the profiles that place work on the pool,
	// so that a worker whose environment fixes a size (a Kubernetes pod
	// template with a GPU limit) can refuse to start when they disagree,
	// rather than fail every task.
	Profiles []ProfileSize `json:"profiles,omitempty"`
	// SingleTenant is true when the pool's estate says its tasks need not
	// be kept apart on a host: a worker whose tasks share one user then
	// runs tasks of different projects side by side.
	SingleTenant bool `json:"singleTenant,omitempty"`
}

// ProfileSize is the task size of one profile that lists the pool.
type ProfileSize struct {
	Name string `json:"name"`
	// MilliGPUsPerNode and Nodes are the profile's size; when
	// SizeParameter is set it is the default, and a task may give its own.
	MilliGPUsPerNode int64  `json:"milliGpusPerNode"`
	Nodes            int    `json:"nodes"`
	SizeParameter    string `json:"sizeParameter,omitempty"`
}

// ClaimRequest asks for work the worker can run now. The server waits up to
// WaitSeconds (at most MaxClaimWait) for a task to be placed on the
// worker's pool.
type ClaimRequest struct {
	WorkerID string `json:"workerId"`
	// FreeGPUs is how many whole GPUs the worker has free; a task whose
	// GPUs per node exceed it is not claimed. FreeMilliGPUs, when set, is
	// the free capacity in thousandths (fractions in docker mode).
	FreeGPUs      int   `json:"freeGpus"`
	FreeMilliGPUs int64 `json:"freeMilliGpus,omitempty"`
	// Fractions is true when the worker can run a fraction of a GPU
	// (docker mode, with a memory cap).
	Fractions   bool `json:"fractions"`
	WaitSeconds int  `json:"waitSeconds"`
	// Project, when set, is the id of the only project whose task the
	// worker takes now: its tasks share one user on its host, so it runs
	// tasks of one project at a time (the pool is not single-tenant).
	Project string `json:"project,omitempty"`
}

// Assignment is a claimed task: everything the worker needs to run it.
// Secrets are not in it: the worker fetches them with the attempt.
type Assignment struct {
	TaskID string `json:"taskId"`
	// ProjectID is the id of the task's project (Project is its name).
	ProjectID string `json:"projectId,omitempty"`
	Attempt   int    `json:"attempt"`
	Name      string `json:"name"`
	// Size: GPUs per node in thousandths (125 is an eighth), and nodes.
	MilliGPUsPerNode int64    `json:"milliGpusPerNode"`
	Nodes            int      `json:"nodes"`
	Command          []string `json:"command,omitempty"`
	Repository       string   `json:"repository,omitempty"`
	Commit           string   `json:"commit,omitempty"`
	Diff             string   `json:"diff,omitempty"`
	EntryPoint       string   `json:"entryPoint,omitempty"`
	WorkingDir       string   `json:"workingDir,omitempty"`
	Packages         []string `json:"packages,omitempty"`
	// Image is the task's image, else its compute resource's; empty when
	// neither names one (the worker's default applies).
	Image      string            `json:"image,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	// ComputeResource names the compute resource the task came from (an
	// HPC submitter picks its batch template by it).
	ComputeResource string `json:"computeResource,omitempty"`
	// Env is the compute resource's variables overlaid by the task's own.
	Env map[string]string `json:"env,omitempty"`
	// Mounts are the compute resource's extra container mounts, as docker
	// -v writes them (/host/path:/container/path[:ro|:rw]): Docker mode
	// adds one -v for each; process mode ignores them.
	Mounts []string `json:"mounts,omitempty"`
	// Secrets names the secrets to fetch and inject as environment
	// variables of the same name.
	Secrets []string `json:"secrets,omitempty"`
	// OutputDestination is where the task writes outputs: its pool's,
	// else its project's; empty, the control plane's own artifact storage
	// (through KLIQUE_ARTIFACTS_DIR).
	OutputDestination string `json:"outputDestination,omitempty"`
	// Inputs are earlier runs' artifacts the task reads: the worker
	// fetches each (PathInput) before the task starts.
	Inputs []Input `json:"inputs,omitempty"`
	// Project and Owner, for the task's environment (KLIQUE_PROJECT...).
	Project string `json:"project"`
	Owner   string `json:"owner"`
	// LeaseSeconds: the task is the worker's until then without heartbeat.
	LeaseSeconds int `json:"leaseSeconds"`
	// App is set when the task is an app instance (a task of kind
	// application): the worker picks its port, fills {port} in Command and
	// Env, probes its health path and reports it ready in heartbeats.
	App *AppAssignment `json:"app,omitempty"`
}

// AppAssignment is what a worker needs to run an app instance.
type AppAssignment struct {
	// Port is the port the app listens on inside a container (docker,
	// Kubernetes). A process-mode worker picks a free port of its own
	// instead, since several instances share the host's ports.
	Port int `json:"port"`
	// HealthPath answers (2xx or 3xx) once the app is ready; "/" when
	// empty.
	HealthPath string `json:"healthPath,omitempty"`
	// Args are the container's arguments (docker, Kubernetes), rendered
	// with Port; empty: the image's own command.
	Args []string `json:"args,omitempty"`
	// Pod is the app's Kubernetes pod template fragment (YAML), rendered,
	// merged into the worker's pod template.
	Pod string `json:"pod,omitempty"`
	// Batch is the shell line an HPC batch job runs, with {port} left for
	// the job to fill with a free port of its compute node.
	Batch string `json:"batch,omitempty"`
}

// AppReportRequest is an app instance's readiness reported from inside
// its batch job, with the task credential (the job's node is where the
// health path is reachable; the worker on the login node cannot see it).
//
// It is sent as POST PathTasks+"{id}/"+PathAppStatus.
type AppReportRequest struct {
	Attempt int `json:"attempt"`
	AppStatus
}

// PortPlaceholder is left in an app's process line and KLIQUE_APP_PORT by
// the control plane; the worker replaces it with the port it picked.
const PortPlaceholder = "{port}"

// PathAppStatus is the suffix, after PathTasks+"{id}/", of the call that
// reports an app instance's readiness from where it runs (an HPC job).
const PathAppStatus = "app"

// ClaimResponse holds the claimed task; none (HTTP 204) after the wait.
type ClaimResponse struct {
	Task *Assignment `json:"task,omitempty"`
}

// Task states a worker reports in heartbeats and at the end.
const (
	StateRunning   = "running"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateAborted   = "aborted"
	StatePreempted = "preempted"
)

// TaskHeartbeat is one running task in a heartbeat.
type TaskHeartbeat struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	// GPUs are the indices the task runs on.
	GPUs []int `json:"gpus,omitempty"`
	// App is set for an app instance: whether its health path answers,
	// and where it listens.
	App *AppStatus `json:"app,omitempty"`
}

// AppStatus is an app instance's readiness as its worker sees it.
type AppStatus struct {
	// Ready is true while the health path answers.
	Ready bool `json:"ready"`
	// Address is host:port as reachable from the worker's site; set when
	// ready.
	Address string `json:"address,omitempty"`
}

// HeartbeatRequest extends the leases of the worker's tasks.
type HeartbeatRequest struct {
	WorkerID string          `json:"workerId"`
	Tasks    []TaskHeartbeat `json:"tasks"`
}

// Command actions.
const (
	// ActionStop: stop the task (SIGTERM, the grace period, SIGKILL) and
	// report its end.
	ActionStop = "stop"
)

// Command tells a worker to do something with one of its tasks.
type Command struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	Action  string `json:"action"`
	// Reason says why, for the task's log: "aborted by alice",
	// "preempted: reclaimed by group A: …", "lease lost".
	Reason string `json:"reason"`
	// State is the end state to report: aborted or preempted.
	State string `json:"state,omitempty"`
}

// HeartbeatResponse returns what the worker must do.
type HeartbeatResponse struct {
	Commands     []Command `json:"commands,omitempty"`
	LeaseSeconds int       `json:"leaseSeconds"`
}

// Streams of log lines.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	// StreamWorker holds lines the worker itself writes about the task
	// (cloning, installing, stopping).
	StreamWorker = "worker"
)

// LogLine is one line a task printed.
type LogLine struct {
	At     time.Time `json:"t"`
	Stream string    `json:"stream"`
	Line   string    `json:"line"`
	// N numbers the attempt's lines from 1, in the order the worker took
	// them. The server keeps a line once however often it is sent: a
	// batch whose answer was lost (the control plane went away after
	// storing it) is sent again, and the lines it already has are skipped.
	// Zero is stored as sent: an older worker, or `klique task-run`, whose
	// lines share the attempt with its submitter's numbered ones.
	N int64 `json:"n,omitempty"`
}

// LogsRequest sends a batch of log lines, in order.
type LogsRequest struct {
	Attempt int       `json:"attempt"`
	Lines   []LogLine `json:"lines"`
}

// LogsResponse says what was kept. Truncated is true once the task's log
// limit is reached: later lines are dropped, and the log says so once.
type LogsResponse struct {
	Accepted  int  `json:"accepted"`
	Truncated bool `json:"truncated"`
}

// MetricPoint is one scalar a task reported, such as loss or GPU use.
type MetricPoint struct {
	At    time.Time `json:"t"`
	Name  string    `json:"name"`
	Value float64   `json:"value"`
	// Step is the training step or iteration, when the task gives one.
	Step int64 `json:"step,omitempty"`
}

// MetricsRequest sends a batch of metric points.
type MetricsRequest struct {
	Attempt int           `json:"attempt"`
	Points  []MetricPoint `json:"points"`
}

// FinishRequest reports a task's end.
type FinishRequest struct {
	Attempt int `json:"attempt"`
	// State is completed, failed, aborted or preempted.
	State    string `json:"state"`
	ExitCode int    `json:"exitCode"`
	// Message says why it ended, when not completed.
	Message string `json:"message,omitempty"`
	// Outputs are pointers to where the task wrote its outputs (a
	// directory or bucket URL), never the bytes.
	Outputs []string `json:"outputs,omitempty"`
}

// SecretsResponse holds the values of the secrets a task names, for the
// worker to inject into its environment.
type SecretsResponse struct {
	Secrets map[string]string `json:"secrets"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}
