// Package hpc is the runner of the HPC submitter (`klique hpc-submitter`):
// on a login node it turns each claimed task into a batch job of the
// cluster's scheduler (Slurm, PBS or LSF, behind one Scheduler interface),
// submitted as the Linux account the user map gives the task's owner, and
// tracks it until it ends. The claim, heartbeat and report loop stays the
// worker's (agents/worker), run with Placed: the scheduler places the work.
//
// Inside the job, `klique task-run` runs the task's command and reports its
// logs, metrics and end with a credential good for that task attempt only
// (agentapi.TaskCredentialPrefix), so compute nodes need outbound HTTPS to
// the control plane and nothing else, and never hold the pool's worker
// credential. docs/hpc.md tells the whole story.
package hpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
)

// Options configure a Runner. Scheduler, Users, Credential, Server and
// Klique are required.
type Options struct {
	Scheduler Scheduler
	// Users maps platform users to Linux accounts.
	Users *UserMap
	// Credential issues the task credential of a claimed attempt (the
	// worker's client.TaskCredential).
	Credential func(ctx context.Context, taskID string, attempt int) (string, error)
	// Server is the control plane's URL as compute nodes reach it.
	Server string
	// Klique is the klique executable as compute nodes see it.
	Klique string
	// Templates render batch scripts (default: the scheduler's built-in).
	Templates *Templates
	// Params are parameter defaults for templates (time_limit,
	// partition, queue, account); the task's parameters win.
	Params map[string]string
	// AsUser runs a scheduler command as an account: its words, with
	// {account} replaced (default: runuser -u {account} -- as root; none
	// when the account is the submitter's own; else sudo -n -u {account} --).
	AsUser []string
	// Container wraps a task that names an image: apptainer (default),
	// singularity, pyxis or none.
	Container string
	// StatusInterval is how often the scheduler is asked about a job
	// (default 5 s): a poll in between answers from the last reply.
	StatusInterval time.Duration
	// Gone is how long a job the scheduler no longer knows is given to
	// reappear (in the accounting) before it is taken as lost (1 min).
	Gone time.Duration
	// Now is the clock StatusInterval and Gone are measured by (default
	// time.Now; tests move their own rather than sleep).
	Now func() time.Time
	// Exec runs a command (tests replace it); default: os/exec.
	Exec func(ctx context.Context, argv []string, stdin string) (string, error)
	// JobsFile, when set, lists the jobs this submitter has in the
	// scheduler, so that after a crash or restart Cleanup cancels them
	// rather than leave them running beside the attempts the control
	// plane starts again.
	JobsFile string
	// AppStartTimeout bounds how long an app instance has, from the start
	// of its command in the job, to answer on its health path (default
	// 10 min); AppProbeInterval spaces the job's probes (default 2 s).
	AppStartTimeout  time.Duration
	AppProbeInterval time.Duration
}

// Runner submits tasks as batch jobs.
type Runner struct {
	o Options

	mu   sync.Mutex
	jobs map[string]string // job id → account
}

// New checks o and returns a Runner.
func New(o Options) (*Runner, error) {
	switch {
	case o.Scheduler == nil:
		return nil, errors.New("hpc: a scheduler is required (slurm, pbs or lsf)")
	case o.Users == nil:
		return nil, errors.New("hpc: a user map is required (--user-map FILE)")
	case o.Credential == nil || o.Server == "":
		return nil, errors.New("hpc: the control plane's URL and a credential issuer are required")
	case o.Klique == "":
		return nil, errors.New("hpc: the klique executable as compute nodes see it is required (--klique PATH)")
	}
	if o.Templates == nil {
		t, err := NewTemplates(o.Scheduler, "", nil)
		if err != nil {
			return nil, err
		}
		o.Templates = t
	}
	switch o.Container {
	case "":
		o.Container = "apptainer"
	case "apptainer", "singularity", "pyxis", "none":
	default:
		return nil, fmt.Errorf("hpc: container %q: use apptainer, singularity, pyxis or none", o.Container)
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = 5 * time.Second
	}
	if o.Gone <= 0 {
		o.Gone = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Exec == nil {
		o.Exec = runCommand
	}
	if o.AppStartTimeout <= 0 {
		o.AppStartTimeout = 10 * time.Minute
	}
	if o.AppProbeInterval <= 0 {
		o.AppProbeInterval = 2 * time.Second
	}
	return &Runner{o: o, jobs: map[string]string{}}, nil
}

// Cleanup cancels the jobs an earlier run of the submitter left in the
// scheduler: their attempts are lost (the control plane requeues them when
// their leases lapse), and left running they would run beside the new ones.
func (r *Runner) Cleanup(ctx context.Context) error {
	if r.o.JobsFile == "" {
		return nil
	}
	raw, err := os.ReadFile(r.o.JobsFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the list of submitted jobs: %w", err)
	}
	var left map[string]string
	if err := json.Unmarshal(raw, &left); err != nil {
		return fmt.Errorf("list of submitted jobs %s: %w", r.o.JobsFile, err)
	}
	var errs []error
	for id, account := range left {
		if _, err := r.o.Exec(ctx, r.as(account, r.o.Scheduler.CancelCommand(id), ""), ""); err != nil {
			// Most often the job ended meanwhile.
			errs = append(errs, fmt.Errorf("cancel %s job %s left by an earlier run: %w", r.o.Scheduler.Title(), id, err))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.saveJobs(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// track records (account != "") or forgets a submitted job in JobsFile.
func (r *Runner) track(id, account string) {
	if r.o.JobsFile == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if account == "" {
		delete(r.jobs, id)
	} else {
		r.jobs[id] = account
	}
	_ = r.saveJobs()
}

func (r *Runner) saveJobs() error {
	b, err := json.Marshal(r.jobs)
	if err != nil {
		return err
	}
	tmp := r.o.JobsFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save the list of submitted jobs: %w", err)
	}
	return os.Rename(tmp, r.o.JobsFile)
}

// Name is "batch": the worker registers in batch mode.
func (r *Runner) Name() string { return agentapi.ModeBatch }

// Fractions is false: a batch job gets whole GPUs.
func (r *Runner) Fractions() bool { return false }

// Files of a job, in its directory.
const (
	jobSpecFile    = "job.json"
	credentialFile = ".task-credential"
	scriptFile     = "job.sh"
	reportedFile   = "end-reported"
)

// Submit writes the job's files and submits its batch script as the
// account the task's owner maps to.
func (r *Runner) Submit(ctx context.Context, job *runner.Job) (runner.Handle, error) {
	a := job.Task
	s := r.o.Scheduler
	account, err := r.o.Users.Account(a.Owner)
	if err != nil {
		return nil, fmt.Errorf("refused: %w", err)
	}
	acct, err := user.Lookup(account)
	if err != nil {
		return nil, fmt.Errorf("refused: the user map %s gives %q the Linux account %q, which does not exist on this host: %w", r.o.Users.Path(), a.Owner, account, err)
	}
	command, app, err := r.jobCommand(a)
	if err != nil {
		return nil, err
	}
	if a.MilliGPUsPerNode%1000 != 0 {
		return nil, fmt.Errorf("a batch job gets whole GPUs; this task asks for %d thousandths of one per node", a.MilliGPUsPerNode)
	}
	if err := r.ownable(account); err != nil {
		return nil, err
	}
	tok, err := r.o.Credential(ctx, a.TaskID, a.Attempt)
	if err != nil {
		return nil, fmt.Errorf("get the task credential: %w", err)
	}
	env, metrics, outputs := jobEnv(job)
	wrapper := r.wrapper(a)
	spec := JobSpec{Server: r.o.Server, TaskID: a.TaskID, Attempt: a.Attempt, CredentialFile: filepath.Join(job.Dir, credentialFile),
		Command: append(append([]string(nil), wrapper...), command...), Env: env, Secrets: len(a.Secrets) > 0, Dir: job.Dir,
		MetricsFile: metrics, OutputsFile: outputs, ReportedFile: filepath.Join(job.Dir, reportedFile), App: app}
	specJSON, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("job description: %w", err)
	}
	params := map[string]string{}
	for k, v := range r.o.Params {
		params[k] = v
	}
	for k, v := range a.Parameters {
		params[k] = v
	}
	data := ScriptData{TaskID: a.TaskID, Name: a.Name, JobName: jobName(a.Name), Attempt: a.Attempt, Scheduler: s.Name(),
		Account: account, ComputeResource: a.ComputeResource, Nodes: max(a.Nodes, 1), GPUsPerNode: int(a.MilliGPUsPerNode / 1000),
		Dir: job.Dir, Image: a.Image, Container: shellJoin(wrapper),
		Command: shellJoin([]string{r.o.Klique, "task-run", "--job", filepath.Join(job.Dir, jobSpecFile)}), Params: params}
	script, err := r.o.Templates.Render(data)
	if err != nil {
		return nil, err
	}
	if err := r.writeJob(job.Dir, acct, specJSON, tok, script); err != nil {
		return nil, err
	}

	argv, stdin := s.SubmitCommand(filepath.Join(job.Dir, scriptFile))
	in := ""
	if stdin {
		in = script
	}
	out, err := r.o.Exec(ctx, r.as(account, argv, job.Dir), in)
	if err != nil {
		return nil, fmt.Errorf("%s as %s: %w", argv[0], account, err)
	}
	id, err := s.ParseSubmit(out)
	if err != nil {
		return nil, err
	}
	r.track(id, account)
	job.Log(agentapi.StreamWorker, fmt.Sprintf("submitted to %s as job %s by Linux account %s (%d node(s) × %d GPU(s))",
		s.Title(), id, account, data.Nodes, data.GPUsPerNode))
	return &handle{r: r, job: job, id: id, account: account, dir: job.Dir, done: make(chan struct{})}, nil
}

// jobCommand is what the job runs: the task's command, or for an app
// instance its batch line in a shell, as a batch script would ({port} is
// left for the job to fill on its node), with how task-run probes it. A
// task without one is refused: an HPC job runs commands only.
func (r *Runner) jobCommand(a *agentapi.Assignment) ([]string, *JobApp, error) {
	command := a.Command
	var app *JobApp
	if a.App != nil {
		if a.App.Batch != "" {
			command = []string{"/bin/sh", "-c", a.App.Batch}
		}
		app = &JobApp{HealthPath: a.App.HealthPath, StartTimeoutSeconds: int(r.o.AppStartTimeout / time.Second),
			ProbeIntervalMillis: int(r.o.AppProbeInterval / time.Millisecond)}
	}
	if len(command) == 0 {
		if a.App != nil {
			return nil, nil, errors.New("the app has no batch line (run.batch) to run in an HPC job: give its catalogue entry one")
		}
		return nil, nil, errors.New("an HPC job runs a task given as a command; this task has none (a repository or entry point alone is not supported here)")
	}
	return command, app, nil
}

// jobEnv is the job's environment. The task's own files move with it:
// metrics and outputs files in the job's directory, its variables without
// the secrets' values (the job fetches those itself), and no metrics URL
// of the login node. The job's own metrics file: task-run sends what is
// written to it; the worker's file (which the worker itself reads) stays
// empty, so no point is sent twice.
func jobEnv(job *runner.Job) (env map[string]string, metrics, outputs string) {
	env = map[string]string{}
	secret := map[string]bool{}
	for _, n := range job.Task.Secrets {
		secret[n] = true
	}
	for k, v := range job.Env {
		if !secret[k] && k != "KLIQUE_METRICS_URL" {
			env[k] = v
		}
	}
	metrics, outputs = filepath.Join(job.Dir, "job-metrics.jsonl"), env["KLIQUE_OUTPUTS_FILE"]
	env["KLIQUE_METRICS_FILE"] = metrics
	if outputs == "" {
		outputs = filepath.Join(job.Dir, "outputs.txt")
	}
	return env, metrics, outputs
}

// writeJob writes the job's description, credential and script into its
// directory (the first two readable by their owner only), then gives the
// directory to the Linux account the job runs as.
func (r *Runner) writeJob(dir string, acct *user.User, specJSON []byte, tok, script string) error {
	uid, _ := strconv.Atoi(acct.Uid)
	gid, _ := strconv.Atoi(acct.Gid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("job directory: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{jobSpecFile, specJSON, 0o600}, {credentialFile, []byte(tok + "\n"), 0o600}, {scriptFile, []byte(script), 0o700},
	} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("write the job's %s: %w", f.name, err)
		}
	}
	return r.chown(dir, uid, gid)
}

// wrapper is the container command a task with an image runs in.
func (r *Runner) wrapper(a *agentapi.Assignment) []string {
	if a.Image == "" || r.o.Container == "none" {
		return nil
	}
	switch r.o.Container {
	case "pyxis":
		w := []string{"srun", "--ntasks=1", "--container-image=" + a.Image}
		if len(a.Mounts) > 0 {
			w = append(w, "--container-mounts="+strings.Join(a.Mounts, ","))
		}
		return w
	default: // apptainer, singularity
		w := []string{r.o.Container, "exec", "--nv"}
		for _, m := range a.Mounts {
			w = append(w, "--bind", m)
		}
		return append(w, a.Image)
	}
}

// ownable checks that the job's files can be handed to account: as root
// they are given to it; otherwise it must be the submitter's own.
func (r *Runner) ownable(account string) error {
	if os.Geteuid() == 0 {
		return nil
	}
	if me, err := user.Current(); err == nil && me.Username == account {
		return nil
	}
	return fmt.Errorf("the job would run as %s, but this submitter runs as another user that cannot hand it its files: run the submitter as root, or map users to the submitter's own account", account)
}

func (r *Runner) chown(dir string, uid, gid int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("hand the job's files to its account: %w", err)
		}
		return nil
	})
}

// as is argv run as account, from dir.
func (r *Runner) as(account string, argv []string, _ string) []string {
	prefix := r.o.AsUser
	if prefix == nil {
		switch {
		case os.Geteuid() == 0:
			prefix = []string{"runuser", "-u", "{account}", "--"}
		default:
			if me, err := user.Current(); err == nil && me.Username == account {
				return argv
			}
			prefix = []string{"sudo", "-n", "-u", "{account}", "--"}
		}
	}
	out := make([]string, 0, len(prefix)+len(argv))
	for _, w := range prefix {
		out = append(out, strings.ReplaceAll(w, "{account}", account))
	}
	return append(out, argv...)
}

// runCommand runs argv and returns its standard output.
func runCommand(ctx context.Context, argv []string, stdin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	// The account's commands run from a directory it may enter.
	cmd.Dir = "/"
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return out.String(), nil
}

// handle is one submitted batch job.
type handle struct {
	r       *Runner
	job     *runner.Job
	id      string
	account string
	dir     string
	done    chan struct{}

	mu     sync.Mutex
	last   JobState
	asked  time.Time
	shown  string
	lostAt time.Time
	ended  bool
}

// Poll asks the scheduler (at most every StatusInterval) and says where
// the job is; each change of state is written to the task's log.
func (h *handle) Poll(ctx context.Context) (runner.Status, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended || h.r.o.Now().Sub(h.asked) < h.r.o.StatusInterval {
		return h.status(), nil
	}
	h.asked = h.r.o.Now()
	st, err := h.r.o.Scheduler.State(ctx, h.run, h.id)
	if err != nil {
		return h.status(), err
	}
	if !st.Known {
		// Between the queue and the accounting a job may be unknown for a
		// moment; one that stays unknown is lost.
		if h.lostAt.IsZero() {
			h.lostAt = h.r.o.Now()
		}
		if h.r.o.Now().Sub(h.lostAt) < h.r.o.Gone {
			return h.status(), nil
		}
		st = JobState{Known: true, State: "UNKNOWN", Phase: runner.Ended, ExitCode: 1,
			Reason: fmt.Sprintf("%s no longer knows job %s", h.r.o.Scheduler.Title(), h.id)}
	}
	h.lostAt = time.Time{}
	h.last = st
	if line := h.describe(st); line != h.shown {
		h.shown = line
		h.job.Log(agentapi.StreamWorker, line)
	}
	if st.Phase == runner.Ended {
		h.ended = true
		close(h.done)
		h.r.track(h.id, "")
	}
	return h.status(), nil
}

func (h *handle) describe(st JobState) string {
	line := fmt.Sprintf("%s job %s: %s", h.r.o.Scheduler.Title(), h.id, st.State)
	if st.Node != "" && st.Phase != runner.Pending {
		line += " on " + st.Node
	}
	if st.Phase == runner.Ended {
		line += fmt.Sprintf(", exit code %d", st.ExitCode)
	}
	if st.Reason != "" {
		line += " (" + st.Reason + ")"
	}
	return line
}

func (h *handle) status() runner.Status {
	st := runner.Status{Phase: h.last.Phase, ExitCode: h.last.ExitCode}
	if h.last.State == "" {
		st.Phase, st.Reason = runner.Pending, fmt.Sprintf("submitted to %s as job %s", h.r.o.Scheduler.Title(), h.id)
		return st
	}
	if st.Phase == runner.Pending {
		st.Reason = fmt.Sprintf("waiting in the %s queue as job %s", h.r.o.Scheduler.Title(), h.id)
		if h.last.Reason != "" {
			st.Reason += ": " + h.last.Reason
		}
	}
	return st
}

func (h *handle) run(ctx context.Context, argv []string, stdin string) (string, error) {
	return h.r.o.Exec(ctx, h.r.as(h.account, argv, h.dir), stdin)
}

// Stop cancels the job (the scheduler sends SIGTERM, and SIGKILL after
// its own grace) and waits for it to end, up to grace and a minute.
func (h *handle) Stop(ctx context.Context, grace time.Duration) error {
	h.mu.Lock()
	ended := h.ended
	h.mu.Unlock()
	if ended {
		return nil
	}
	if _, err := h.run(ctx, h.r.o.Scheduler.CancelCommand(h.id), ""); err != nil {
		// A job that ended meanwhile cannot be cancelled; the poll tells.
		h.job.Log(agentapi.StreamWorker, fmt.Sprintf("cancel %s job %s: %v", h.r.o.Scheduler.Title(), h.id, err))
	}
	deadline := time.Now().Add(grace + time.Minute)
	for time.Now().Before(deadline) {
		if st, err := h.Poll(ctx); err == nil && st.Phase == runner.Ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.done:
			return nil
		case <-time.After(min(h.r.o.StatusInterval, time.Second)):
		}
	}
	return fmt.Errorf("%s job %s did not end within %s of its cancellation", h.r.o.Scheduler.Title(), h.id, grace+time.Minute)
}

// Diagnostics tells the scheduler's end of the job, the last lines of its
// output file, and whether the job reported its own end.
func (h *handle) Diagnostics(context.Context) runner.Diagnostics {
	h.mu.Lock()
	st := h.last
	h.mu.Unlock()
	d := runner.Diagnostics{ExitCode: st.ExitCode, OOMKilled: st.OOM}
	if st.Phase == runner.Ended && st.State != "" && st.State != "COMPLETED" && st.State != "DONE" && st.State != "F" {
		d.Signal = fmt.Sprintf("%s job %s ended %s", h.r.o.Scheduler.Title(), h.id, st.State)
		if st.Reason != "" {
			d.Signal += ": " + st.Reason
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, reportedFile)); err == nil {
		d.Reported = true
	}
	if outs, _ := filepath.Glob(filepath.Join(h.dir, "job*.out")); len(outs) > 0 {
		if b, err := os.ReadFile(outs[0]); err == nil {
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			d.LastLines = lines[max(0, len(lines)-20):]
		}
	}
	return d
}
