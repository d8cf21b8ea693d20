package hpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
)

// JobSpec is what the submitter hands the job (job.json in its directory):
// everything `klique task-run` needs to run the task and report on it. It
// holds no secret: the credential is in its own file, readable by the
// job's account only, and the task's secrets are fetched with it.
type JobSpec struct {
	Server  string `json:"server"`
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	// CredentialFile holds the task credential (kqt_…).
	CredentialFile string `json:"credentialFile"`
	// Command is the task's command, with the container wrapper first.
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	// Secrets is true when the task names secrets, to fetch at the start.
	Secrets bool   `json:"secrets,omitempty"`
	Dir     string `json:"dir"`
	// MetricsFile and OutputsFile are the task's files (KLIQUE_METRICS_FILE,
	// KLIQUE_OUTPUTS_FILE); ReportedFile is written once the end was
	// reported, so the submitter does not report it again.
	MetricsFile  string `json:"metricsFile"`
	OutputsFile  string `json:"outputsFile"`
	ReportedFile string `json:"reportedFile"`
	// App is set when the task is an app instance: the job picks a free
	// port on its node for {port}, probes the health path there and
	// reports the instance ready (node:port) with the task credential.
	App *JobApp `json:"app,omitempty"`
}

// JobApp is what a job needs to serve an app instance.
type JobApp struct {
	HealthPath string `json:"healthPath,omitempty"`
	// StartTimeoutSeconds bounds how long the app has to answer first;
	// ProbeIntervalMillis spaces the probes.
	StartTimeoutSeconds int `json:"startTimeoutSeconds,omitempty"`
	ProbeIntervalMillis int `json:"probeIntervalMillis,omitempty"`
}

// ReadJobSpec reads a job.json.
func ReadJobSpec(path string) (*JobSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the job description: %w", err)
	}
	var s JobSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("job description %s: %w", path, err)
	}
	if s.Server == "" || s.TaskID == "" || len(s.Command) == 0 || s.CredentialFile == "" {
		return nil, fmt.Errorf("job description %s: server, taskId, credentialFile and command are required", path)
	}
	return &s, nil
}

// TaskRunOptions shape RunTask; zero values are fine.
type TaskRunOptions struct {
	// FlushInterval is how often log lines and metrics are sent (1 s).
	FlushInterval time.Duration
	// Stderr receives task-run's own messages (the job's output file).
	Stderr io.Writer
}

// RunTask runs a task inside its batch job: it runs the command, sends its
// output lines and the metrics it writes home with the task credential,
// and reports its end. Stopped by the scheduler (scancel, qdel, bkill, a
// time limit), it passes SIGTERM on and does not report: the submitter
// reports the end it asked for, or the scheduler's. It returns the
// command's exit code.
func RunTask(ctx context.Context, spec *JobSpec, o TaskRunOptions) int {
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	say := func(format string, args ...any) { fmt.Fprintf(o.Stderr, "klique task-run: "+format+"\n", args...) }
	tok, err := os.ReadFile(spec.CredentialFile)
	if err != nil {
		say("read the task credential: %v", err)
		return 1
	}
	cl := client.New(spec.Server, strings.TrimSpace(string(tok)))
	cl.UserAgent = "klique-task-run"
	r := &reporter{cl: cl, spec: spec, say: say}

	env, err := taskEnv(ctx, spec, cl)
	if err != nil {
		msg := "could not fetch the task's secrets: " + err.Error()
		say("%s", msg)
		r.finish(ctx, agentapi.StateFailed, -1, msg)
		return 1
	}
	command := spec.Command
	var app *jobApp
	if spec.App != nil {
		if app, err = newJobApp(spec, cl, say); err != nil {
			say("%s", err)
			r.finish(ctx, agentapi.StateFailed, -1, err.Error())
			return 1
		}
		command, env = app.fill(command), app.fill(env)
		say("an app instance: listening on port %d of %s, ready once %s answers", app.port, app.host, app.path)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env, cmd.Dir = env, spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		msg := "could not start the task's command: " + err.Error()
		say("%s", msg)
		r.finish(ctx, agentapi.StateFailed, -1, msg)
		return 1
	}
	stopped, stopSignals := passSignals(cmd)
	defer stopSignals()

	sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.scan(stdout, agentapi.StreamStdout) }()
	go func() { defer wg.Done(); r.scan(stderr, agentapi.StreamStderr) }()
	sendDone, sendStop := make(chan struct{}), make(chan struct{})
	go func() { defer close(sendDone); r.send(context.WithoutCancel(ctx), sendStop, o.FlushInterval) }()
	probeDone := r.serveApp(sendCtx, app, cmd)

	// Every line is read before Wait, which closes the pipes.
	wg.Wait()
	err = cmd.Wait()
	stopSend()
	close(sendStop)
	<-sendDone
	<-probeDone
	code, signaled := exitStatus(err)
	wasStopped := stoppedByScheduler(stopped, signaled, code)
	// What is left goes home before the end.
	r.flush(context.WithoutCancel(ctx))
	if wasStopped {
		say("stopped by the scheduler; the submitter reports the end")
		return code
	}
	r.end(ctx, app, code)
	return code
}

// taskEnv is the command's environment: task-run's own, the task's
// variables, and its secrets, fetched with the task credential when it has
// any (they are never written in the job description on shared disk).
func taskEnv(ctx context.Context, spec *JobSpec, cl *client.Client) ([]string, error) {
	env := os.Environ()
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	if spec.Secrets {
		sec, err := cl.Secrets(ctx, spec.TaskID, spec.Attempt)
		if err != nil {
			return nil, err
		}
		for k, v := range sec {
			env = append(env, k+"="+v)
		}
	}
	return env, nil
}

// passSignals passes the scheduler's SIGTERM and SIGINT on to the
// command's process group, and closes stopped on the first, so that
// task-run knows the scheduler stopped the job. Call the returned func to
// stop listening.
func passSignals(cmd *exec.Cmd) (stopped <-chan struct{}, stop func()) {
	var once sync.Once
	ch := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for range sigs {
			once.Do(func() { close(ch) })
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		}
	}()
	return ch, func() { signal.Stop(sigs) }
}

// serveApp, for an app instance, holds the job's own tunnel and probes the
// instance until it answers; the returned channel closes when the probe
// is done (at once for a task that is no app). A compute node seldom has
// an inbound path, so the control plane reaches the instance through this
// outbound connection, held with the task credential for this attempt
// only (docs/apps.md, "The tunnel").
func (r *reporter) serveApp(ctx context.Context, app *jobApp, cmd *exec.Cmd) <-chan struct{} {
	probeDone := make(chan struct{})
	if app == nil {
		close(probeDone)
		return probeDone
	}
	go app.tunnel(ctx)
	go func() {
		defer close(probeDone)
		if err := app.run(ctx); err != nil {
			// Never answered: stopped, and failed with why.
			app.setFailure(err.Error())
			r.say("%s; stopping it", err)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		}
	}()
	return probeDone
}

// exitStatus is the command's exit code from Wait's error, 128 plus the
// signal's number for a command a signal ended (as a shell reports it).
func exitStatus(err error) (code int, signaled bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code, signaled = 128+int(ws.Signal()), true
		}
	}
	return code, signaled
}

// stoppedByScheduler reports whether the scheduler stopped the job. The
// scheduler signals every process of the job at once: a command killed by
// a signal may end before task-run sees its own, so it waits a little for
// it then.
func stoppedByScheduler(stopped <-chan struct{}, signaled bool, code int) bool {
	wait := time.Duration(0)
	if signaled || code == 128+int(syscall.SIGTERM) {
		wait = 2 * time.Second
	}
	select {
	case <-stopped:
		return true
	case <-time.After(wait):
		return false
	}
}

// end reports the task's end: completed on a zero exit, else failed with
// the code and the last line it wrote. An app never completes on its own:
// any exit is a failure.
func (r *reporter) end(ctx context.Context, app *jobApp, code int) {
	state, msg := agentapi.StateCompleted, ""
	if app != nil {
		state, msg = agentapi.StateFailed, app.exitMessage(code, r.lastLine())
		r.finish(ctx, state, code, msg)
		return
	}
	if code != 0 {
		state = agentapi.StateFailed
		msg = fmt.Sprintf("exited with code %d", code)
		if last := r.lastLine(); last != "" {
			msg += "; last line: " + last
		}
	}
	r.finish(ctx, state, code, msg)
}

// reporter batches a task's lines and metrics and sends them home.
type reporter struct {
	cl   *client.Client
	spec *JobSpec
	say  func(string, ...any)

	mu      sync.Mutex
	lines   []agentapi.LogLine
	last    string
	metrics int64 // bytes of the metrics file already sent
	stale   bool
}

func (r *reporter) scan(rd io.Reader, stream string) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), agentapi.MaxLogLineBytes)
	for sc.Scan() {
		line := strings.ToValidUTF8(sc.Text(), "\uFFFD")
		r.mu.Lock()
		r.lines = append(r.lines, agentapi.LogLine{At: time.Now().UTC(), Stream: stream, Line: line})
		if strings.TrimSpace(line) != "" {
			r.last = line
		}
		r.mu.Unlock()
	}
	if err := sc.Err(); err != nil {
		// A line beyond the limit: drain the rest so the task never blocks.
		_, _ = io.Copy(io.Discard, rd)
	}
}

func (r *reporter) lastLine() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.last) > 300 {
		return strings.ToValidUTF8(r.last[:300], "") + "…"
	}
	return r.last
}

// send flushes every interval until stop closes. A flush under way when
// stop closes goes to its end: cancelling it would lose the lines it took
// (the command's last ones, often), which the final flush no longer has.
func (r *reporter) send(ctx context.Context, stop <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.flush(ctx)
		}
	}
}

// flush sends the waiting lines and the new metrics. The client retries
// what is transient; a refused attempt (409) means the control plane moved
// on, and nothing more is sent.
func (r *reporter) flush(ctx context.Context) {
	r.mu.Lock()
	lines := r.lines
	r.lines = nil
	stale := r.stale
	r.mu.Unlock()
	if stale {
		return
	}
	for len(lines) > 0 {
		n := min(len(lines), 500)
		_, err := r.cl.Logs(ctx, r.spec.TaskID, &agentapi.LogsRequest{Attempt: r.spec.Attempt, Lines: lines[:n]})
		if err != nil {
			r.refused("send log lines", err)
			break
		}
		lines = lines[n:]
	}
	if points := r.readMetrics(); len(points) > 0 {
		if err := r.cl.Metrics(ctx, r.spec.TaskID, &agentapi.MetricsRequest{Attempt: r.spec.Attempt, Points: points}); err != nil {
			r.refused("send metrics", err)
		}
	}
}

func (r *reporter) refused(what string, err error) {
	r.say("%s: %v", what, err)
	if errors.Is(err, client.ErrStaleAttempt) {
		r.mu.Lock()
		r.stale = true
		r.mu.Unlock()
	}
}

// readMetrics reads the complete lines added to the metrics file since the
// last read: {"name":"loss","value":0.42,"step":10}.
func (r *reporter) readMetrics() []agentapi.MetricPoint {
	f, err := os.Open(r.spec.MetricsFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(r.metrics, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, 8<<20))
	end := strings.LastIndexByte(string(b), '\n')
	if end < 0 {
		return nil
	}
	r.metrics += int64(end + 1)
	var out []agentapi.MetricPoint
	for _, line := range strings.Split(string(b[:end]), "\n") {
		var m struct {
			Name  string     `json:"name"`
			Value *float64   `json:"value"`
			Step  int64      `json:"step"`
			At    *time.Time `json:"t"`
		}
		if strings.TrimSpace(line) == "" || json.Unmarshal([]byte(line), &m) != nil || m.Name == "" || m.Value == nil {
			continue
		}
		p := agentapi.MetricPoint{Name: m.Name, Value: *m.Value, Step: m.Step, At: time.Now().UTC()}
		if m.At != nil {
			p.At = *m.At
		}
		out = append(out, p)
	}
	return out
}

// finish reports the end with the task's outputs, retrying while the
// control plane is unreachable (a few minutes at most: the submitter
// reports the scheduler's end when this one does not arrive), and leaves
// the mark that says it was reported.
func (r *reporter) finish(ctx context.Context, state string, code int, msg string) {
	if len(msg) > 4000 {
		msg = strings.ToValidUTF8(msg[:4000], "") + "…"
	}
	f := &agentapi.FinishRequest{Attempt: r.spec.Attempt, State: state, ExitCode: code, Message: msg, Outputs: r.outputs()}
	deadline := time.Now().Add(3 * time.Minute)
	for n := 0; ; n++ {
		err := r.cl.Finish(ctx, r.spec.TaskID, f)
		if err == nil {
			if r.spec.ReportedFile != "" {
				_ = os.WriteFile(r.spec.ReportedFile, []byte(state+"\n"), 0o644)
			}
			return
		}
		if !client.IsTransient(err) || time.Now().After(deadline) {
			r.say("report the end: %v", err)
			return
		}
		if !client.Sleep(ctx, r.cl.Backoff.Delay(n)) {
			return
		}
	}
}

// outputs are the pointers the task listed in its outputs file.
func (r *reporter) outputs() []string {
	b, _ := os.ReadFile(r.spec.OutputsFile)
	var out []string
	seen := map[string]bool{}
	lines := append([]string{r.spec.Env["KLIQUE_OUTPUT_DESTINATION"]}, strings.Split(string(b), "\n")...)
	for _, s := range lines {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] || len(s) > 2048 || strings.ContainsAny(s, " \t") || len(out) >= 100 {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}
