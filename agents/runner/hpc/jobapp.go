package hpc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/tunnel"
	"github.com/klique-ai/klique/internal/agentapi"
)

// An app instance in a batch job: the worker on the login node cannot see
// the compute node's ports, so the job does what a bare-metal worker does
// for its instances. It picks a free port on its node, fills {port} in
// the batch line and the variables, probes the health path on loopback,
// and reports the instance ready at the node's name and that port (or not
// ready again) with the task credential.

// jobApp follows one app instance inside its job.
type jobApp struct {
	spec     *JobSpec
	cl       *client.Client
	say      func(string, ...any)
	host     string
	port     int
	path     string
	interval time.Duration
	timeout  time.Duration
	// unreadyAfter failed probes in a row make a ready instance not ready.
	unreadyAfter int

	mu      sync.Mutex
	failure string
}

func newJobApp(spec *JobSpec, cl *client.Client, say func(string, ...any)) (*jobApp, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return nil, fmt.Errorf("the app's node has no host name to report it at: %v", err)
	}
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return nil, fmt.Errorf("pick a free port for the app on %s: %w", host, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	a := &jobApp{spec: spec, cl: cl, say: say, host: host, port: port, path: spec.App.HealthPath,
		interval: time.Duration(spec.App.ProbeIntervalMillis) * time.Millisecond,
		timeout:  time.Duration(spec.App.StartTimeoutSeconds) * time.Second, unreadyAfter: 3}
	if a.interval <= 0 {
		a.interval = 2 * time.Second
	}
	if a.timeout <= 0 {
		a.timeout = 10 * time.Minute
	}
	if a.path == "" {
		a.path = "/"
	}
	if !strings.HasPrefix(a.path, "/") {
		a.path = "/" + a.path
	}
	return a, nil
}

// tunnel holds the job's tunnel until ctx ends: streams for this task's
// attempt reach the app's port on loopback; any other is refused.
func (a *jobApp) tunnel(ctx context.Context) {
	local := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port))
	err := tunnel.Serve(ctx, tunnel.Options{Client: a.cl,
		Lookup: func(taskID string, attempt int) (string, error) {
			if taskID != a.spec.TaskID || attempt != a.spec.Attempt {
				return "", fmt.Errorf("this job runs task %s at attempt %d only: a job's tunnel reaches its own app instance", a.spec.TaskID, a.spec.Attempt)
			}
			return local, nil
		},
		Connected: func() { a.say("the tunnel to the control plane is up: the instance is reachable through it") },
	})
	if err != nil && ctx.Err() == nil {
		a.say("no tunnel to the control plane: %v; the instance is reachable only where its node is", err)
	}
}

// fill replaces {port} with the port picked, in a command's words or in
// an environment's NAME=value entries.
func (a *jobApp) fill(words []string) []string {
	p := strconv.Itoa(a.port)
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strings.ReplaceAll(w, agentapi.PortPlaceholder, p)
	}
	return out
}

// address is where the site reaches the instance: the node's name and
// the port.
func (a *jobApp) address() string { return net.JoinHostPort(a.host, strconv.Itoa(a.port)) }

// run probes until ctx ends, reporting each change of readiness; it
// returns an error when the app did not answer within the start timeout.
func (a *jobApp) run(ctx context.Context) error {
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port)) + a.path
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start := time.Now()
	ready, answered, fails := false, false, 0
	tick := time.NewTicker(a.interval)
	defer tick.Stop()
	for {
		ok := probeOnce(ctx, hc, url, max(a.interval, time.Second))
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case ok:
			fails, answered = 0, true
			if !ready {
				ready = true
				a.report(ctx, true)
			}
		case ready:
			if fails++; fails >= a.unreadyAfter {
				ready, fails = false, 0
				a.report(ctx, false)
			}
		case !answered && time.Since(start) >= a.timeout:
			return fmt.Errorf("the app did not answer on its health path %s within %s (the start timeout)", a.path, a.timeout)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func probeOnce(ctx context.Context, hc *http.Client, url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// report tells the control plane the instance's readiness; the client
// retries what is transient, and a failed report is said in the job's
// output (the next change reports again).
func (a *jobApp) report(ctx context.Context, ready bool) {
	st := agentapi.AppStatus{Ready: ready}
	if ready {
		st.Address = a.address()
		a.say("ready: %s answers at %s", a.path, st.Address)
	} else {
		a.say("not ready: %s stopped answering (%d probes in a row)", a.path, a.unreadyAfter)
	}
	if err := a.cl.ReportApp(ctx, a.spec.TaskID, &agentapi.AppReportRequest{Attempt: a.spec.Attempt, AppStatus: st}); err != nil {
		a.say("report the app's readiness: %v", err)
	}
}

func (a *jobApp) setFailure(msg string) {
	a.mu.Lock()
	a.failure = msg
	a.mu.Unlock()
}

// exitMessage is the end of an app instance whose command exited: always a
// failure, with the exit code and its last line, or why the job stopped it.
func (a *jobApp) exitMessage(code int, last string) string {
	a.mu.Lock()
	failure := a.failure
	a.mu.Unlock()
	msg := fmt.Sprintf("the app's process exited with exit code %d; an app never completes on its own", code)
	if failure != "" {
		msg = failure
	}
	if last != "" {
		msg += "; last line: " + last
	}
	return msg
}
