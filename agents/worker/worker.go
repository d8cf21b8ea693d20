// Package worker is the worker daemon's loop, written once for every
// environment: register, claim work (a long poll) whenever there is free
// capacity, start each task through a runner.Runner, heartbeat with the
// running tasks and obey the commands that come back (stop: abort or
// preemption), stream logs and metrics home in batches, and report each
// task's end. Only the runner knows the environment (a process, a Docker
// container, a pod, or a batch job on an HPC cluster).
//
// The worker survives a control-plane restart: tasks keep running, calls
// are retried with backoff, log lines wait in a bounded buffer and then in a
// spool file on disk and are sent in order when the control plane is back.
// A report answered 409 means the server moved on (the lease was lost, the
// task was requeued): the worker stops the task and forgets it.
//
// The worker survives its own SIGKILL too: its runner records each running
// attempt in a state directory (Config.State), and the restarted worker
// stops what its earlier run left running before it claims anything, and
// never hands out the GPUs of what it could not stop (recover.go).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/gpu"
	"github.com/klique-ai/klique/agents/hostuser"
	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/agents/runner/state"
	"github.com/klique-ai/klique/internal/agentapi"
)

// Config is what a worker needs. Client, Runner and WorkDir are required;
// the rest has defaults.
type Config struct {
	Client *client.Client
	Runner runner.Runner
	// GPUs the worker owns.
	GPUs []agentapi.GPU
	// Pool, when set, is the pool the operator expects; the worker refuses
	// to start when its credential belongs to another.
	Pool string
	// Hostname names the worker (default: the host name). Two workers on
	// one host for one pool need different names.
	Hostname string
	Version  string
	// Kind is the environment (default bare_metal).
	Kind string
	// Labels describe the worker in the orchestration view.
	Labels map[string]string
	// WorkDir holds the tasks' directories, the log spool and the cache of
	// Python environments.
	WorkDir string
	// Grace is how long a stopped task has between SIGTERM and SIGKILL
	// (default 30 s).
	Grace time.Duration
	// ShutdownTimeout bounds how long, after the grace period, shutting
	// down waits for the last reports (default 30 s).
	ShutdownTimeout time.Duration
	Log             *slog.Logger

	// ClaimWait is a claim's long-poll wait (default agentapi.MaxClaimWait).
	ClaimWait time.Duration
	// HeartbeatInterval overrides the server's HeartbeatSeconds.
	HeartbeatInterval time.Duration
	// Backoff spaces retries of the worker's own loops.
	Backoff client.Backoff
	// LogFlushInterval (default 1 s), LogBatchLines (default 500),
	// LogBatchBytes (default 512 KiB) and LogMemoryLines (default 10,000)
	// shape log shipping.
	LogFlushInterval time.Duration
	LogBatchLines    int
	LogBatchBytes    int
	LogMemoryLines   int
	// MetricsInterval is how often metrics are sent (default 2 s);
	// MetricsFilePoll how often a task's metrics file is read (default
	// 500 ms); MetricsListen where the local metrics endpoint listens
	// (default 127.0.0.1:0).
	MetricsInterval time.Duration
	MetricsFilePoll time.Duration
	MetricsListen   string
	// SMI samples GPU utilization every GPUSampleInterval (default 10 s)
	// when nvidia-smi is available.
	SMI               gpu.SMI
	GPUSampleInterval time.Duration
	// PollInterval is how often a task whose handle has no Done channel is
	// polled (default 1 s).
	PollInterval time.Duration
	// KeepTaskDirs keeps each task's directory after it ended.
	KeepTaskDirs bool
	// State is the state directory the runner records its running work
	// in (the runner's own option points at the same directory). The
	// worker locks it while it runs, so two workers never share one, and
	// before claiming anything has the runner (a runner.Recoverer) stop
	// what an earlier run left running.
	State *state.Dir
	// RecoverInterval is how often the worker tries again to stop what an
	// earlier run left and it could not stop (default 30 s); the GPUs of
	// that work stay out of its hands meanwhile.
	RecoverInterval time.Duration
	// Placed is set when the environment's own scheduler places the work
	// (Slurm, PBS, LSF, Kubernetes): the worker's GPUs are then only a
	// count of how much it may hold at once, not devices on this host.
	// A task's slots are not named to the runner, in its environment or
	// in heartbeats, and a task on several nodes is taken on, since the
	// scheduler places its nodes.
	Placed bool

	// AppHost is the host of an app instance's address as the worker
	// reports it: how the worker's site reaches this host (default
	// 127.0.0.1). AppStartTimeout bounds how long an instance has to
	// answer on its health path (default 10 min); AppProbeInterval spaces
	// the probes (default 2 s); after AppUnreadyAfter failed probes in a
	// row (default 3) a ready instance is not ready again.
	AppHost          string
	AppStartTimeout  time.Duration
	AppProbeInterval time.Duration
	AppUnreadyAfter  int
	// TaskUIDs, when set and the worker runs as root, gives each task in
	// process mode a uid of its own from this range, and each project a
	// gid (isolation.go); UserMap, when set, gives a task its owner's
	// account instead. Unset, tasks share the runner's user and the worker
	// runs tasks of one project at a time unless the pool is
	// single-tenant.
	TaskUIDs *hostuser.Range
	UserMap  AccountMap
	// TaskUIDsByDefault says TaskUIDs is the default, not asked for: when
	// the tasks' users could not reach the work directory, the worker then
	// runs tasks under its own user, one project at a time, and says why
	// at its start, rather than refusing to start (a quickstart run as
	// root in a home directory that is 0700).
	TaskUIDsByDefault bool
	// NoTunnel turns off the worker's tunnel (agents/tunnel), for a site
	// whose app instances the control plane and its routers reach
	// directly. By default the worker holds one.
	NoTunnel bool
}

// Worker is a running worker daemon.
type Worker struct {
	cfg     Config
	log     *slog.Logger
	alloc   *Allocator
	metrics *metricsServer
	smi     bool
	iso     *isolation

	workerID  string
	pool      string
	heartbeat time.Duration

	mu    sync.Mutex
	tasks map[string]*task
	// freed is signalled when capacity frees up.
	freed chan struct{}
	// beatNow is signalled when a heartbeat should go now.
	beatNow chan struct{}
	// reports is the context of reports about tasks; it outlives the
	// daemon's context so that tasks stopped at shutdown are reported.
	reports context.Context
	// draining is set once shutdown began: no new claims.
	draining bool
	// singleTenant: the pool's estate says its tasks need not be kept
	// apart (agentapi.RegisterResponse.SingleTenant).
	singleTenant bool
	tasksWG      sync.WaitGroup
}

// New checks cfg and returns a worker ready to Run.
func New(cfg Config) (*Worker, error) {
	if cfg.Client == nil || cfg.Runner == nil {
		return nil, errors.New("worker: a client and a runner are required")
	}
	if cfg.WorkDir == "" {
		return nil, errors.New("worker: a work directory is required")
	}
	if cfg.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("worker: host name: %w", err)
		}
		cfg.Hostname = h
	}
	if cfg.Kind == "" {
		cfg.Kind = "bare_metal"
	}
	cfg.appDefaults()
	setDefault(&cfg.Grace, 30*time.Second)
	setDefault(&cfg.ShutdownTimeout, 30*time.Second)
	setDefault(&cfg.ClaimWait, agentapi.MaxClaimWait)
	setDefault(&cfg.LogFlushInterval, time.Second)
	setDefault(&cfg.MetricsInterval, 2*time.Second)
	setDefault(&cfg.MetricsFilePoll, 500*time.Millisecond)
	setDefault(&cfg.GPUSampleInterval, 10*time.Second)
	setDefault(&cfg.PollInterval, time.Second)
	setDefault(&cfg.RecoverInterval, 30*time.Second)
	if cfg.LogBatchLines <= 0 {
		cfg.LogBatchLines = 500
	}
	cfg.LogBatchLines = min(cfg.LogBatchLines, agentapi.MaxLogLinesPerBatch)
	if cfg.LogBatchBytes <= 0 {
		cfg.LogBatchBytes = 512 << 10
	}
	if cfg.LogMemoryLines <= 0 {
		cfg.LogMemoryLines = 10000
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	fractions := cfg.Runner.Fractions()
	if fractions {
		for _, g := range cfg.GPUs {
			if g.MemoryMB <= 0 {
				cfg.Log.Warn("fractions of a GPU are off: the memory of a GPU is unknown (give --gpu-memory-mb)", "gpu", g.Index)
				fractions = false
				break
			}
		}
	}
	iso, err := newIsolation(&cfg)
	if err != nil {
		return nil, err
	}
	return &Worker{cfg: cfg, log: cfg.Log, alloc: NewAllocator(cfg.GPUs, fractions), tasks: map[string]*task{},
		freed: make(chan struct{}, 1), beatNow: make(chan struct{}, 1), iso: iso}, nil
}

// beatSoon asks for a heartbeat now rather than at the next tick: an app
// instance's readiness changed.
func (w *Worker) beatSoon() {
	select {
	case w.beatNow <- struct{}{}:
	default:
	}
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Allocator is the worker's view of its GPUs.
func (w *Worker) Allocator() *Allocator { return w.alloc }

// Dirs under the work directory.
func (w *Worker) tasksDir() string { return filepath.Join(w.cfg.WorkDir, "tasks") }
func (w *Worker) spoolDir() string { return filepath.Join(w.cfg.WorkDir, "spool") }

// Run registers the worker and serves until ctx is done, then stops its
// tasks (SIGTERM, the grace period, SIGKILL), reports them preempted so
// they are requeued at the front, and returns. It returns an error when it
// cannot work at all: the credential was refused, or it belongs to another
// pool than cfg.Pool.
func (w *Worker) Run(ctx context.Context) error {
	unlock, err := w.cfg.State.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	// What an earlier run left running is stopped before anything else
	// (its directories are removed next): the worker does not reattach to
	// it, and the control plane requeues it once its lease runs out.
	held, err := w.recoverLeftovers(ctx)
	if err != nil {
		return err
	}
	for _, d := range []string{w.tasksDir(), w.spoolDir()} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("clean %s: %w", d, err)
		}
		// Traversable, not listable: a task reaches its own directory
		// (0700, its own) and sees no other's name.
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := w.iso.prepare(w.cfg.WorkDir, w.tasksDir(), w.cfg.TaskUIDsByDefault); err != nil {
		return fmt.Errorf("prepare the work directory for tasks of their own users: %w", err)
	}
	if c, ok := w.cfg.Runner.(runner.Cleaner); ok {
		if err := c.Cleanup(ctx); err != nil {
			w.log.Warn("could not clean up after an earlier run", "err", err)
		}
	}
	if err := w.register(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	ms, err := startMetricsServer(w.cfg.MetricsListen)
	if err != nil {
		return err
	}
	w.metrics = ms
	defer ms.close()
	w.smi = w.cfg.SMI.Available()

	reports, stopReports := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReports()
	w.mu.Lock()
	w.reports = reports
	w.mu.Unlock()

	fatal := make(chan error, 2)
	claimCtx, stopClaims := context.WithCancel(ctx)
	defer stopClaims()
	claiming := make(chan struct{})
	go func() {
		defer close(claiming)
		if err := w.claimLoop(claimCtx); err != nil {
			fatal <- err
		}
	}()
	var loops sync.WaitGroup
	hbCtx, stopHB := context.WithCancel(reports)
	defer stopHB()
	loops.Add(1)
	go func() {
		defer loops.Done()
		if err := w.heartbeatLoop(hbCtx); err != nil {
			fatal <- err
		}
	}()
	if w.smi {
		loops.Add(1)
		go func() { defer loops.Done(); w.sampleGPUs(ctx) }()
	}
	if !w.cfg.NoTunnel {
		loops.Add(1)
		go func() { defer loops.Done(); w.serveTunnel(ctx) }()
	}
	if len(held) > 0 {
		loops.Add(1)
		go func() { defer loops.Done(); w.retryLeftovers(ctx, held) }()
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-fatal:
	}
	// No claim after this: a task claimed as the claim loop stops is
	// started and stopped with the rest.
	stopClaims()
	<-claiming
	w.drain(reports, "the worker "+w.cfg.Hostname+" is shutting down")
	stopHB()
	stopReports()
	loops.Wait()
	return runErr
}

// register announces the worker, retrying while the control plane is
// unreachable.
func (w *Worker) register(ctx context.Context) error {
	req := &agentapi.RegisterRequest{Hostname: w.cfg.Hostname, GPUs: w.cfg.GPUs, Version: w.cfg.Version,
		Mode: w.cfg.Runner.Name(), Kind: w.cfg.Kind, Labels: w.cfg.Labels}
	if req.GPUs == nil {
		req.GPUs = []agentapi.GPU{}
	}
	for n := 0; ; n++ {
		resp, err := w.cfg.Client.Register(ctx, req)
		if err == nil {
			if w.cfg.Pool != "" && resp.Pool != "" && resp.Pool != w.cfg.Pool {
				return fmt.Errorf("the worker credential belongs to pool %q, not %q: check --pool and --token-file", resp.Pool, w.cfg.Pool)
			}
			if c, ok := w.cfg.Runner.(runner.ProfileChecker); ok {
				if err := c.CheckProfiles(resp.Profiles); err != nil {
					return fmt.Errorf("pool %s: %w", resp.Pool, err)
				}
			}
			w.mu.Lock()
			w.workerID, w.pool, w.singleTenant = resp.WorkerID, resp.Pool, resp.SingleTenant
			w.mu.Unlock()
			w.heartbeat = time.Duration(resp.HeartbeatSeconds) * time.Second
			if w.cfg.HeartbeatInterval > 0 {
				w.heartbeat = w.cfg.HeartbeatInterval
			}
			if w.heartbeat <= 0 {
				w.heartbeat = 10 * time.Second
			}
			w.log.Info("registered", "worker", w.workerID, "pool", w.pool, "gpus", len(w.cfg.GPUs),
				"mode", w.cfg.Runner.Name(), "heartbeat", w.heartbeat)
			w.logIsolation(resp.SingleTenant)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if !client.IsTransient(err) {
			if errors.Is(err, client.ErrUnauthorized) {
				return fmt.Errorf("register: the control plane refused the worker credential (revoked, or for another control plane): %w", err)
			}
			return fmt.Errorf("register: %w", err)
		}
		w.log.Warn("the control plane is unreachable; retrying registration", "err", err)
		if !client.Sleep(ctx, w.cfg.Backoff.Delay(n)) {
			return nil
		}
	}
}

// claimLoop long-polls for work whenever there is free capacity.
func (w *Worker) claimLoop(ctx context.Context) error {
	failures := 0
	for {
		idle, share := w.alloc.Free()
		if idle == 0 && share == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-w.freed:
				continue
			}
		}
		req := &agentapi.ClaimRequest{WorkerID: w.id(), FreeGPUs: idle, Fractions: w.alloc.fractions,
			WaitSeconds: int(w.cfg.ClaimWait / time.Second), Project: w.claimProject()}
		if req.WaitSeconds <= 0 {
			req.WaitSeconds = 1
		}
		if w.alloc.fractions {
			// The largest size per node this worker can run now: any
			// fraction fits on an idle GPU, or on the emptiest shared one.
			req.FreeMilliGPUs = max(int64(idle)*1000, share)
		}
		a, err := w.cfg.Client.Claim(ctx, req)
		if ctx.Err() != nil {
			if a != nil {
				// Claimed as we were told to stop: run it anyway, so the
				// drain stops it and reports it rather than losing it.
				w.start(a)
			}
			return nil
		}
		if err != nil {
			if errors.Is(err, client.ErrUnauthorized) {
				return fmt.Errorf("claim: the worker credential was refused: %w", err)
			}
			if unknownWorker(err) {
				// The control plane forgot this worker (its record was
				// removed): register again.
				w.log.Warn("the control plane does not know this worker; registering again", "err", err)
				if err := w.register(ctx); err != nil {
					return err
				}
				continue
			}
			w.log.Warn("claim failed; retrying", "err", err)
			if !client.Sleep(ctx, w.cfg.Backoff.Delay(failures)) {
				return nil
			}
			failures++
			continue
		}
		failures = 0
		if a != nil {
			w.start(a)
		}
	}
}

// id is the worker's id, as the last registration gave it.
func (w *Worker) id() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.workerID
}

// unknownWorker reports whether the control plane answered that it does not
// know the worker id.
func unknownWorker(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// heartbeatLoop extends the leases of the running tasks and obeys the
// commands that come back.
func (w *Worker) heartbeatLoop(ctx context.Context) error {
	t := time.NewTicker(w.heartbeat)
	defer t.Stop()
	unreachable := false
	for {
		resp, err := w.beat(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, client.ErrUnauthorized):
			return fmt.Errorf("heartbeat: the worker credential was refused: %w", err)
		case unknownWorker(err):
			// The claim loop registers again; the next heartbeat uses the
			// new id.
			w.log.Warn("the control plane does not know this worker", "err", err)
		case err != nil:
			if !unreachable {
				w.log.Warn("heartbeat failed; tasks keep running and heartbeats resume when the control plane is back", "err", err)
			}
			unreachable = true
		default:
			if unreachable {
				w.log.Info("the control plane is reachable again")
			}
			unreachable = false
			for _, c := range resp.Commands {
				w.obey(c)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-w.beatNow:
		}
	}
}

// beat sends one heartbeat for the running tasks: several requests when
// the worker holds more than one request may list
// (agentapi.MaxHeartbeatTasks), with their commands put together.
func (w *Worker) beat(ctx context.Context) (*agentapi.HeartbeatResponse, error) {
	return heartbeatAll(ctx, w.cfg.Client, w.id(), w.running())
}

// heartbeatAll sends tasks in heartbeats of at most
// agentapi.MaxHeartbeatTasks (one empty heartbeat when there are none).
func heartbeatAll(ctx context.Context, c *client.Client, workerID string, tasks []agentapi.TaskHeartbeat) (*agentapi.HeartbeatResponse, error) {
	out := &agentapi.HeartbeatResponse{}
	for first := true; first || len(tasks) > 0; first = false {
		n := min(len(tasks), agentapi.MaxHeartbeatTasks)
		resp, err := c.Heartbeat(ctx, &agentapi.HeartbeatRequest{WorkerID: workerID, Tasks: tasks[:n]})
		if err != nil {
			return nil, err
		}
		out.Commands = append(out.Commands, resp.Commands...)
		out.LeaseSeconds = resp.LeaseSeconds
		tasks = tasks[n:]
	}
	return out, nil
}

// running lists the tasks the worker holds, for a heartbeat.
func (w *Worker) running() []agentapi.TaskHeartbeat {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]agentapi.TaskHeartbeat, 0, len(w.tasks))
	for _, t := range w.tasks {
		hb := agentapi.TaskHeartbeat{TaskID: t.a.TaskID, Attempt: t.a.Attempt, App: t.appStatus()}
		for _, g := range t.devices() {
			hb.GPUs = append(hb.GPUs, g.Index)
		}
		out = append(out, hb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

func (w *Worker) obey(c agentapi.Command) {
	w.mu.Lock()
	t := w.tasks[taskKey(c.TaskID, c.Attempt)]
	w.mu.Unlock()
	if t == nil {
		return
	}
	switch c.Action {
	case agentapi.ActionStop:
		state := c.State
		if state != agentapi.StatePreempted {
			state = agentapi.StateAborted
		}
		t.mu.Lock()
		t.byCommand = true
		t.mu.Unlock()
		t.requestStop(c.Reason, state)
	default:
		w.log.Warn("unknown command", "action", c.Action, "task", c.TaskID)
	}
}

// Tasks lists the tasks the worker holds now, by id.
func (w *Worker) Tasks() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, t := range w.tasks {
		out = append(out, t.a.TaskID)
	}
	sort.Strings(out)
	return out
}

// drain stops claiming, stops every task and waits for their reports, at
// most the grace period and the shutdown timeout.
func (w *Worker) drain(ctx context.Context, reason string) {
	w.mu.Lock()
	w.draining = true
	tasks := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	if len(tasks) > 0 {
		w.log.Info("stopping the running tasks", "tasks", len(tasks), "grace", w.cfg.Grace)
	}
	for _, t := range tasks {
		t.requestStop(reason, agentapi.StatePreempted)
	}
	done := make(chan struct{})
	go func() { w.tasksWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.Grace + w.cfg.ShutdownTimeout):
		w.log.Warn("gave up waiting for the last reports")
	case <-ctx.Done():
	}
}

func (w *Worker) signalFreed() {
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

func taskKey(id string, attempt int) string { return fmt.Sprintf("%s#%d", id, attempt) }

// safeName makes a task id usable in a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}
