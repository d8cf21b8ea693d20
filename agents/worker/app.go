package worker

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// An app instance (a task with an App) differs from other tasks in three
// ways, all here: the worker owns its port (it picks one and fills {port}
// in), it is ready only once its health path answers (probed over HTTP and
// reported in heartbeats), and it never completes on its own (any exit is a
// failure).

// appDefaults fill the app settings of a Config.
func (c *Config) appDefaults() {
	setDefault(&c.AppStartTimeout, 10*time.Minute)
	setDefault(&c.AppProbeInterval, 2*time.Second)
	if c.AppUnreadyAfter <= 0 {
		c.AppUnreadyAfter = 3
	}
	if c.AppHost == "" {
		c.AppHost = "127.0.0.1"
	}
}

// probes reports whether the worker probes its app instances: in process
// mode, where the app listens on the host's loopback. In the other modes
// the app listens inside its container, pod or batch job, which a later
// slice reaches; their instances are run (and fail on exit) like here,
// without readiness.
func (w *Worker) probes() bool {
	return w.cfg.Runner.Name() == agentapi.ModeProcess && !w.cfg.Placed
}

// appPort is the port an app instance listens on: a free port of the host
// in process mode, where instances share the host's ports; the app's own
// port in a container, which has its own network.
func (w *Worker) appPort(a *agentapi.Assignment) (int, error) {
	if w.cfg.Runner.Name() != agentapi.ModeProcess {
		return a.App.Port, nil
	}
	return freePort()
}

// freePort asks the kernel for a free TCP port. Between closing the
// listener and the app binding it another process could take it; the app
// then fails to start and is reported failed with its last lines.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port for the app: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// withPort returns a copy of the assignment with {port} filled in its
// command and its variables.
func withPort(a *agentapi.Assignment, port int) *agentapi.Assignment {
	c := *a
	p := strconv.Itoa(port)
	c.Command = make([]string, len(a.Command))
	for i, s := range a.Command {
		c.Command[i] = strings.ReplaceAll(s, agentapi.PortPlaceholder, p)
	}
	c.Env = maps.Clone(a.Env)
	for k, v := range c.Env {
		c.Env[k] = strings.ReplaceAll(v, agentapi.PortPlaceholder, p)
	}
	return &c
}

// appProbe polls an app's health path until it answers, then keeps
// polling to notice when it stops answering.
type appProbe struct {
	// URL is the health path on the app's port, on loopback.
	URL string
	// Interval between probes; StartTimeout bounds how long the app has
	// to answer the first time; UnreadyAfter failed probes in a row after
	// ready make it not ready again.
	Interval     time.Duration
	StartTimeout time.Duration
	UnreadyAfter int
	// Client makes the probes (each bounded by Interval, at least 1 s).
	Client *http.Client
	// Set is told each change of readiness.
	Set func(ready bool)
}

// errNotStarted is run's answer when the app never answered in time.
type errNotStarted struct{ timeout time.Duration }

func (e errNotStarted) Error() string {
	return fmt.Sprintf("the app did not answer on its health path within %s (the start timeout); its last lines may say why", e.timeout)
}

// run probes until ctx ends. It returns errNotStarted when the app did
// not answer within StartTimeout, and nil when ctx ended.
func (p *appProbe) run(ctx context.Context) error {
	start := time.Now()
	// answered: once the app has answered, it is never failed for the
	// start timeout, only made not ready.
	ready, answered, fails := false, false, 0
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	for {
		ok := p.once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case ok:
			fails, answered = 0, true
			if !ready {
				ready = true
				p.Set(true)
			}
		case ready:
			if fails++; fails >= p.UnreadyAfter {
				ready, fails = false, 0
				p.Set(false)
			}
		case !answered && time.Since(start) >= p.StartTimeout:
			return errNotStarted{p.StartTimeout}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// once makes one probe: an answer of 2xx or 3xx (redirects not followed)
// is healthy.
func (p *appProbe) once(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, max(p.Interval, time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return false
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// probeClient does not follow redirects: a 3xx is an answer.
var probeClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// healthURL is the app's health path on its port on loopback.
func healthURL(port int, path string) string {
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + path
}

// startProbe probes a running app instance until stop is called, keeping
// its readiness for heartbeats; an app that never answers is stopped and
// reported failed.
func (t *task) startProbe(port int) (stop func()) {
	w := t.w
	addr := net.JoinHostPort(w.cfg.AppHost, strconv.Itoa(port))
	p := &appProbe{URL: healthURL(port, t.a.App.HealthPath), Interval: w.cfg.AppProbeInterval,
		StartTimeout: w.cfg.AppStartTimeout, UnreadyAfter: w.cfg.AppUnreadyAfter, Client: probeClient,
		Set: func(ready bool) {
			t.mu.Lock()
			t.appReady = ready
			t.mu.Unlock()
			if ready {
				t.workerLine("ready: %s answers at %s", p0(t.a.App.HealthPath), addr)
			} else {
				t.workerLine("not ready: %s stopped answering (%d probes in a row)", p0(t.a.App.HealthPath), w.cfg.AppUnreadyAfter)
			}
			w.beatSoon()
		}}
	t.mu.Lock()
	t.appAddress, t.probing = addr, true
	t.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.run(ctx); err != nil {
			t.requestStop(err.Error()+t.lastLines(), agentapi.StateFailed)
		}
	}()
	return func() {
		cancel()
		<-done
		t.mu.Lock()
		t.appReady = false
		t.mu.Unlock()
	}
}

func p0(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// appStatus is the instance's readiness for a heartbeat; nil for a task
// that is not an app instance.
func (t *task) appStatus() *agentapi.AppStatus {
	if t.a.App == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.probing {
		return nil // not probed (yet, or in this mode): not reported
	}
	if !t.appReady {
		return &agentapi.AppStatus{}
	}
	return &agentapi.AppStatus{Ready: true, Address: t.appAddress}
}

// appExit is the message of an app instance whose process exited: always
// a failure, with the exit code and its last lines.
func (t *task) appExit(code int, signal string) string {
	msg := fmt.Sprintf("the app's process exited with exit code %d", code)
	if signal != "" {
		msg += " (" + signal + ")"
	}
	return msg + "; an app never completes on its own" + t.lastLines()
}

// lastLines quotes the last lines the app printed ("; last lines: a | b"),
// or is empty when it printed none.
func (t *task) lastLines() string {
	t.mu.Lock()
	last := slices.Clone(t.tail)
	t.mu.Unlock()
	if len(last) == 0 {
		return ""
	}
	for i, l := range last {
		if len(l) > 300 {
			last[i] = strings.ToValidUTF8(l[:300], "") + "…"
		}
	}
	return "; last lines: " + strings.Join(last, " | ")
}

// tailLines is how many of its last lines an app's failure quotes.
const tailLines = 5
