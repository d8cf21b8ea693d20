package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
)

// task is one claimed attempt of a task, from claim to report.
type task struct {
	w    *Worker
	a    *agentapi.Assignment
	key  string
	gpus []agentapi.GPU
	// share is the thousandths of each GPU (1000 for whole GPUs).
	share int64
	dir   string
	files taskFiles

	logs    *logStream
	metrics *metricStream
	// ctx carries the task's reports; cancelled when the task is dropped.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	redact *redactor
	// lastOut and lastErr are the last lines the task printed on stdout
	// and stderr, for the message of a failure.
	lastOut, lastErr string
	running          bool
	stopReason       string
	stopState        string
	stopCh           chan struct{}
	byCommand        bool
	dropped          bool
	// tail holds the last lines the task printed (stdout and stderr), for
	// the message of an app instance's exit.
	tail []string
	// appReady and appAddress are an app instance's readiness, for
	// heartbeats.
	appReady   bool
	appAddress string
	probing    bool
	// release gives back the task's own uid (isolation.go).
	release func()
}

// start takes on a claimed task and runs it in the background.
func (w *Worker) start(a *agentapi.Assignment) {
	key := taskKey(a.TaskID, a.Attempt)
	w.mu.Lock()
	_, dup := w.tasks[key]
	reports := w.reports
	w.mu.Unlock()
	if dup {
		w.log.Warn("claimed a task this worker already runs", "task", a.TaskID, "attempt", a.Attempt)
		return
	}

	name := safeName(a.TaskID) + "." + strconv.Itoa(a.Attempt)
	ctx, cancel := context.WithCancel(reports)
	t := &task{w: w, a: a, key: key, dir: filepath.Join(w.tasksDir(), name), ctx: ctx, cancel: cancel,
		stopCh: make(chan struct{})}
	t.files = taskFiles{
		params:  filepath.Join(t.dir, "params.json"),
		metrics: filepath.Join(t.dir, "metrics.jsonl"),
		outputs: filepath.Join(t.dir, "outputs.txt"),
	}
	onStale := func(err error) { t.drop(err) }
	warn := func(msg string, err error) { w.log.Warn(msg, "task", a.TaskID, "err", err) }
	t.logs = newLogStream(filepath.Join(w.spoolDir(), name+".jsonl"), logLimits{
		BatchLines: w.cfg.LogBatchLines, BatchBytes: w.cfg.LogBatchBytes,
		FlushInterval: w.cfg.LogFlushInterval, MemoryLines: w.cfg.LogMemoryLines,
	}, w.cfg.Backoff, func(ctx context.Context, lines []agentapi.LogLine) (*agentapi.LogsResponse, error) {
		return w.cfg.Client.Logs(ctx, a.TaskID, &agentapi.LogsRequest{Attempt: a.Attempt, Lines: lines})
	})
	t.logs.onStale, t.logs.warn = onStale, warn
	t.metrics = &metricStream{maxPoints: 100000, interval: w.cfg.MetricsInterval, backoff: w.cfg.Backoff,
		onStale: onStale, warn: warn,
		send: func(ctx context.Context, points []agentapi.MetricPoint) error {
			return w.cfg.Client.Metrics(ctx, a.TaskID, &agentapi.MetricsRequest{Attempt: a.Attempt, Points: points})
		}}

	var gpus []agentapi.GPU
	var share int64
	var err error
	if w.cfg.Placed {
		gpus, share, err = w.alloc.AllocateSlots(key, a.MilliGPUsPerNode, a.Nodes)
	} else {
		gpus, share, err = w.alloc.Allocate(key, a.MilliGPUsPerNode)
	}
	t.gpus, t.share = gpus, share

	// Registered and counted in one step with the draining check, so a
	// drain either sees the task or the task sees the drain.
	w.mu.Lock()
	w.tasks[key] = t
	w.tasksWG.Add(1)
	draining := w.draining
	w.mu.Unlock()
	w.log.Info("claimed a task", "task", a.TaskID, "name", a.Name, "attempt", a.Attempt, "gpus", indices(gpus))
	go t.run(err)
	if draining {
		t.requestStop("the worker "+w.cfg.Hostname+" is shutting down", agentapi.StatePreempted)
	}
}

// devices are the host GPUs the task runs on: none when the environment's
// scheduler places the work (the worker then only counts slots).
func (t *task) devices() []agentapi.GPU {
	if t.w.cfg.Placed {
		return nil
	}
	return t.gpus
}

func indices(gpus []agentapi.GPU) []int {
	out := make([]int, len(gpus))
	for i, g := range gpus {
		out[i] = g.Index
	}
	return out
}

// workerLine writes a line about the task, from the worker, into its log.
func (t *task) workerLine(format string, args ...any) {
	t.logLine(agentapi.StreamWorker, fmt.Sprintf(format, args...))
}

// logLine is the runner's log sink: lines are made valid, redacted, cut
// to size, stamped and queued.
func (t *task) logLine(stream, line string) {
	t.mu.Lock()
	r := t.redact
	t.mu.Unlock()
	now := time.Now()
	pieces := splitLine(line, r)
	if last := pieces[len(pieces)-1]; strings.TrimSpace(last) != "" && stream != agentapi.StreamWorker {
		t.mu.Lock()
		if stream == agentapi.StreamStderr {
			t.lastErr = last
		} else {
			t.lastOut = last
		}
		if t.a.App != nil {
			if len(t.tail) >= tailLines {
				t.tail = t.tail[1:]
			}
			t.tail = append(t.tail, last)
		}
		t.mu.Unlock()
	}
	lines := make([]agentapi.LogLine, len(pieces))
	for i, p := range pieces {
		lines[i] = agentapi.LogLine{At: now, Stream: stream, Line: p}
	}
	t.logs.Add(lines...)
}

func (t *task) isRunning() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// requestStop asks the task to stop (once) and says why in its log.
func (t *task) requestStop(reason, state string) {
	t.mu.Lock()
	if t.stopState != "" {
		t.mu.Unlock()
		return
	}
	t.stopReason, t.stopState = reason, state
	close(t.stopCh)
	t.mu.Unlock()
	t.w.log.Info("stopping a task", "task", t.a.TaskID, "attempt", t.a.Attempt, "state", state, "reason", reason)
	t.workerLine("stopping (%s): %s; SIGTERM, then SIGKILL after %s", state, reason, t.w.cfg.Grace)
}

// drop forgets the task after the server refused its attempt (409): it is
// stopped and never reported.
func (t *task) drop(err error) {
	t.mu.Lock()
	already := t.dropped
	t.dropped = true
	t.mu.Unlock()
	if already {
		return
	}
	t.w.log.Warn("the control plane moved on from this attempt (lease lost or task requeued); dropping it",
		"task", t.a.TaskID, "attempt", t.a.Attempt, "err", err)
	t.logs.stop()
	t.metrics.stop()
	t.requestStop("the control plane no longer holds this attempt", agentapi.StateAborted)
	t.cancel()
}

func (t *task) isDropped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

// run carries the task from claim to report.
func (t *task) run(allocErr error) {
	w := t.w
	defer w.tasksWG.Done()
	defer t.forget()

	streams, stopStreams := context.WithCancel(t.ctx)
	var streamWG sync.WaitGroup
	streamWG.Add(2)
	go func() { defer streamWG.Done(); t.logs.run(streams) }()
	go func() { defer streamWG.Done(); t.metrics.run(streams) }()
	finishStreams := func() {
		stopStreams()
		streamWG.Wait()
	}

	end := t.execute(allocErr)
	w.alloc.Release(t.key)
	w.signalFreed()
	finishStreams()
	if t.isDropped() {
		return
	}
	// Everything the task printed and reported goes home before its end.
	if err := t.metrics.close(t.ctx); err != nil {
		w.log.Warn("metrics not delivered", "task", t.a.TaskID, "err", err)
	}
	if err := t.logs.close(t.ctx); err != nil {
		w.log.Warn("log lines not delivered", "task", t.a.TaskID, "err", err)
	}
	if t.isDropped() {
		return
	}
	t.finish(end)
}

// execute prepares and runs the task, and returns how it ended.
func (t *task) execute(allocErr error) *agentapi.FinishRequest {
	w, a := t.w, t.a
	failed := func(msg string) *agentapi.FinishRequest {
		t.workerLine("%s", msg)
		return &agentapi.FinishRequest{Attempt: a.Attempt, State: agentapi.StateFailed, ExitCode: -1, Message: msg}
	}
	if a.Nodes > 1 && !w.cfg.Placed {
		return failed(fmt.Sprintf("a task on %d nodes cannot run on one %s worker", a.Nodes, w.cfg.Kind))
	}
	if allocErr != nil {
		if errors.Is(allocErr, ErrNoFractions) {
			if w.cfg.Runner.Fractions() {
				return failed("fractions of a GPU are off on this worker: the memory of its GPUs is unknown (start it with --gpu-memory-mb)")
			}
			return failed(fmt.Sprintf("a fraction of a GPU needs a worker that caps GPU memory (docker mode); this worker runs tasks in %s mode", w.cfg.Runner.Name()))
		}
		return failed("the worker cannot give the task its GPUs: " + allocErr.Error())
	}
	if w.cfg.Placed {
		t.workerLine("claimed by worker %s (attempt %d); the %s scheduler places its GPUs", w.cfg.Hostname, a.Attempt, w.cfg.Kind)
	} else {
		t.workerLine("claimed by worker %s (attempt %d) on GPUs [%s]", w.cfg.Hostname, a.Attempt, joinInts(indices(t.gpus)))
	}

	secrets, err := t.fetchSecrets()
	if err != nil {
		if st := t.stopped(); st != nil {
			return st
		}
		// A 409 may mean the attempt is stale, or that the task cannot
		// start (a secret left its vault): report it failed; if the
		// attempt is stale that report is refused too, and dropped.
		return failed("could not fetch the task's secrets: " + err.Error())
	}
	t.mu.Lock()
	t.redact = newRedactor(secrets)
	t.mu.Unlock()

	if err := t.writeFiles(); err != nil {
		return failed("could not prepare the task's directory: " + err.Error())
	}
	acct, cache, err := t.takeAccount()
	if err != nil {
		return failed("could not give the task a user of its own on this host: " + err.Error())
	}
	inputs, err := t.fetchInputs()
	if err != nil {
		if st := t.stopped(); st != nil {
			return st
		}
		return failed("could not fetch the task's inputs: " + err.Error())
	}
	url, token := w.metrics.add(func(p []agentapi.MetricPoint) { t.metrics.Add(p...) })
	defer w.metrics.remove(token)
	env := taskEnv(a, secrets, t.files, url, w.cfg.Hostname, w.pool, t.devices())
	maps.Copy(env, inputs)
	env[EnvArtifactsURL] = w.metrics.addUploads(token, t.artifactHandler)
	if acct != nil {
		env["TMPDIR"] = filepath.Join(t.dir, "tmp")
	}
	if st := t.stopped(); st != nil {
		return st
	}
	a, hostPort, err := t.appPorts(a, env)
	if err != nil {
		return failed(err.Error())
	}
	job := &runner.Job{Task: a, GPUs: t.devices(), MilliGPUs: t.share, Env: env, Dir: t.dir, Log: t.logLine, AppPort: hostPort,
		User: acct, Cache: cache}
	h, err := w.cfg.Runner.Submit(t.ctx, job)
	if err != nil {
		return failed("could not start the task: " + err.Error())
	}
	t.mu.Lock()
	t.running = true
	t.mu.Unlock()

	tailCtx, stopTail := context.WithCancel(context.Background())
	tailDone := make(chan struct{})
	tailer := &fileTailer{path: t.files.metrics, sink: func(p []agentapi.MetricPoint) { t.metrics.Add(p...) },
		bad: func(n int, err error) {
			if n <= 10 {
				t.workerLine("metrics file line %d skipped: %v", n, err)
			}
		}}
	go func() { defer close(tailDone); tailer.run(tailCtx, w.cfg.MetricsFilePoll) }()
	stopProbe := func() {}
	if a.App != nil {
		if stop := t.startProbe(h, hostPort); stop != nil {
			stopProbe = stop
		}
	}

	st := t.wait(h)
	stopProbe()
	stopTail()
	<-tailDone
	t.mu.Lock()
	t.running = false
	t.mu.Unlock()
	t.uploadArtifacts()
	diag := h.Diagnostics(context.Background())
	if diag.Reported {
		// The work reported its own end (an HPC job with its task
		// credential); reporting it again would only be refused.
		t.workerLine("the task reported its end itself (exit code %d)", st.ExitCode)
		return nil
	}
	return t.outcome(st, diag)
}

// fetchSecrets gets the secrets the task names, retrying while the control
// plane is unreachable.
func (t *task) fetchSecrets() (map[string]string, error) {
	if len(t.a.Secrets) == 0 {
		return map[string]string{}, nil
	}
	for n := 0; ; n++ {
		s, err := t.w.cfg.Client.Secrets(t.ctx, t.a.TaskID, t.a.Attempt)
		switch {
		case err == nil:
			return s, nil
		case !client.IsTransient(err) && !errors.Is(err, client.ErrUnauthorized):
			return nil, err
		}
		select {
		case <-t.stopCh:
			return nil, err
		case <-time.After(t.w.cfg.Backoff.Delay(n)):
		case <-t.ctx.Done():
			return nil, err
		}
	}
}

// stopped returns the end to report when the task was asked to stop before
// it started, or nil.
func (t *task) stopped() *agentapi.FinishRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopState == "" {
		return nil
	}
	return &agentapi.FinishRequest{Attempt: t.a.Attempt, State: t.stopState, ExitCode: -1, Message: t.stopReason}
}

// writeFiles creates the task's directory and the files the worker gives
// it: its parameters, and empty metrics and outputs files.
func (t *task) writeFiles() error {
	// The task's own: the runner gives it to the task's user.
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return err
	}
	params := t.a.Parameters
	if params == nil {
		params = map[string]string{}
	}
	b, err := json.MarshalIndent(params, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(t.files.params, append(b, '\n'), 0o600); err != nil {
		return err
	}
	for _, f := range []string{t.files.metrics, t.files.outputs} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for the task to end, stopping it when asked.
func (t *task) wait(h runner.Handle) runner.Status {
	var done <-chan struct{}
	if n, ok := h.(runner.Notifier); ok {
		done = n.Done()
	}
	poll := time.NewTicker(t.w.cfg.PollInterval)
	defer poll.Stop()
	stopCh := t.stopCh
	stopping := make(chan error, 1)
	for {
		select {
		case <-done:
			st, _ := h.Poll(context.Background())
			return st
		case <-poll.C:
			st, err := h.Poll(context.Background())
			if err == nil && st.Phase == runner.Ended {
				return st
			}
		case <-stopCh:
			stopCh = nil
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), t.w.cfg.Grace+time.Minute)
				defer cancel()
				stopping <- h.Stop(ctx, t.w.cfg.Grace)
			}()
		case err := <-stopping:
			if err != nil {
				t.w.log.Warn("stop a task", "task", t.a.TaskID, "err", err)
			}
		}
	}
}

// outcome turns how the task ended into its report.
func (t *task) outcome(st runner.Status, d runner.Diagnostics) *agentapi.FinishRequest {
	f := &agentapi.FinishRequest{Attempt: t.a.Attempt, ExitCode: st.ExitCode, Outputs: t.outputs()}
	t.mu.Lock()
	stopState, stopReason := t.stopState, t.stopReason
	t.mu.Unlock()
	switch {
	case stopState != "":
		f.State, f.Message = stopState, stopReason
		t.workerLine("stopped with exit code %d", st.ExitCode)
	case t.a.App != nil:
		// An app never completes on its own: any exit is a failure.
		f.State = agentapi.StateFailed
		msg := t.appExit(st.ExitCode, d.Signal)
		if st.ExitCode < 0 && d.Message != "" {
			msg = d.Message
		}
		f.Message = t.quote(msg)
		t.workerLine("failed: %s", f.Message)
	case st.ExitCode == 0:
		f.State = agentapi.StateCompleted
		t.workerLine("completed")
	default:
		f.State = agentapi.StateFailed
		msg := fmt.Sprintf("exited with code %d", st.ExitCode)
		switch {
		case st.ExitCode < 0 && d.Message != "":
			msg = d.Message
		case d.OOMKilled:
			msg += " (out of memory)"
		case d.Signal != "":
			msg += " (" + d.Signal + ")"
		}
		t.mu.Lock()
		last := t.lastErr
		if last == "" {
			last = t.lastOut
		}
		t.mu.Unlock()
		if st.ExitCode >= 0 && last != "" {
			// Redacted before it is cut: a cut secret is no longer
			// found whole.
			msg += "; last line: " + cut(t.quote(last), maxLastLine)
		}
		f.Message = t.quote(msg)
		t.workerLine("failed: %s", f.Message)
	}
	return f
}

// outputs are the task's output destination and what it listed in its
// outputs file, one pointer per line.
func (t *task) outputs() []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		s = strings.TrimSpace(s)
		switch {
		case s == "" || seen[s]:
		case len(out) >= 100 || len(s) > 2048 || strings.ContainsAny(s, " \t"):
			// The protocol takes at most 100 pointers, each a path or URL
			// without spaces of at most 2048 bytes.
			t.workerLine("output %q skipped: outputs are at most 100 paths or URLs without spaces, of at most 2048 bytes", s)
		default:
			seen[s] = true
			out = append(out, s)
		}
	}
	add(t.a.OutputDestination)
	if f, err := os.Open(t.files.outputs); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			add(sc.Text())
		}
		f.Close()
	}
	return out
}

// finish reports the task's end, retrying while the control plane is
// unreachable; a 409 means the server moved on and the report is dropped.
func (t *task) finish(f *agentapi.FinishRequest) {
	if f == nil {
		return
	}
	w := t.w
	// Every end message goes through the redactor, before it is cut.
	f.Message = cut(t.quote(f.Message), maxMessage-3)
	simplified := false
	for n := 0; ; n++ {
		err := w.cfg.Client.Finish(t.ctx, t.a.TaskID, f)
		var ce *client.Error
		switch {
		case err == nil:
			w.log.Info("reported a task's end", "task", t.a.TaskID, "attempt", t.a.Attempt, "state", f.State, "exitCode", f.ExitCode)
			return
		case errors.Is(err, client.ErrStaleAttempt):
			// Expected after a stop command: the control plane already
			// ended the attempt (aborted, preempted, requeued).
			level := slog.LevelWarn
			if t.commanded() {
				level = slog.LevelInfo
			}
			w.log.Log(context.Background(), level, "the control plane moved on from this attempt; its end is not recorded again",
				"task", t.a.TaskID, "attempt", t.a.Attempt, "state", f.State, "err", err)
			return
		case t.ctx.Err() != nil:
			w.log.Warn("gave up reporting a task's end", "task", t.a.TaskID, "state", f.State)
			return
		case errors.As(err, &ce) && ce.Status == http.StatusBadRequest && !simplified:
			// Refused as invalid: report the end without the parts that
			// may be at fault rather than not at all.
			w.log.Warn("the control plane refused a task's end; reporting it without outputs", "task", t.a.TaskID, "err", err)
			f.Outputs, simplified = nil, true
			f.Message = cut(f.Message, 200)
			continue
		case !client.IsTransient(err) && !errors.Is(err, client.ErrUnauthorized):
			w.log.Error("the control plane refused a task's end", "task", t.a.TaskID, "err", err)
			return
		}
		if n == 0 {
			w.log.Warn("report of a task's end failed; retrying", "task", t.a.TaskID, "err", err)
		}
		if !client.Sleep(t.ctx, w.cfg.Backoff.Delay(n)) {
			return
		}
	}
}

// commanded reports whether the control plane asked the task to stop.
func (t *task) commanded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byCommand
}

// forget removes the task from the worker, with its directory: the
// directory goes first, so a task the worker no longer lists has left
// nothing behind.
func (t *task) forget() {
	w := t.w
	t.logs.stop()
	t.cancel()
	if !w.cfg.KeepTaskDirs {
		if err := os.RemoveAll(t.dir); err != nil {
			w.log.Warn("remove a task's directory", "dir", t.dir, "err", err)
		}
	}
	t.releaseAccount()
	w.alloc.Release(t.key)
	w.mu.Lock()
	delete(w.tasks, t.key)
	w.mu.Unlock()
	w.signalFreed()
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
