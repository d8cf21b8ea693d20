package worker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/agents/runner"
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

// Where an app instance listens, and who judges its readiness, depends on
// the mode:
//
//   - process: on a free port of the host, which the worker picks and
//     fills in ({port}); the worker probes the health path on loopback.
//   - docker: on the app's own port inside the container, published on a
//     free port of the host that the worker picks (runner.Job.AppPort); the
//     worker probes the published port.
//   - pod: on the app's own port in its pod; the pod's readiness probe on
//     the health path judges, and the runner's handle reports the pod's IP
//     once it is Ready (runner.AppReadiness).
//   - batch: the job picks a free port on its compute node, probes the
//     health path there and reports readiness itself with its task
//     credential; the worker on the login node reports none, and leaves
//     {port} for the job to fill.

// appPorts are the port an app instance listens on ({port}; 0: left for
// the job to fill) and the host port the worker reaches it on (0: none).
func (w *Worker) appPorts(a *agentapi.Assignment) (listen, host int, err error) {
	switch {
	case w.cfg.Runner.Name() == agentapi.ModeBatch:
		return 0, 0, nil
	case w.cfg.Runner.Name() == agentapi.ModeProcess && !w.cfg.Placed:
		p, err := freePort()
		return p, p, err
	case w.cfg.Runner.Name() == agentapi.ModeDocker:
		p, err := freePort()
		return a.App.Port, p, err
	}
	return a.App.Port, 0, nil
}

// probeHost is the host the worker probes a published port on: loopback,
// unless the instance's address is an IP of its own (a docker port
// published on that address only).
func (w *Worker) probeHost() string {
	if ip := net.ParseIP(w.cfg.AppHost); ip != nil && !ip.IsUnspecified() && w.cfg.Runner.Name() == agentapi.ModeDocker {
		return w.cfg.AppHost
	}
	return "127.0.0.1"
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
	// URL is the health path on the app's port, on loopback; Address is
	// the address reported while it answers.
	URL     string
	Address string
	// Check, when set, replaces the HTTP probe: the environment judges
	// readiness (a pod's Ready condition) and says where the instance
	// answers.
	Check func(ctx context.Context) (address string, ok bool)
	// Interval between probes; StartTimeout bounds how long the app has
	// to answer the first time; UnreadyAfter failed probes in a row after
	// ready make it not ready again.
	Interval     time.Duration
	StartTimeout time.Duration
	UnreadyAfter int
	// Client makes the probes (each bounded by Interval, at least 1 s).
	Client *http.Client
	// Set is told each change of readiness; address then holds where
	// the instance answers.
	Set func(ready bool)
	// Now is the clock StartTimeout is measured by (default time.Now;
	// tests move their own).
	Now func() time.Time

	address string
}

// errNotStarted is run's answer when the app never answered in time.
type errNotStarted struct{ timeout time.Duration }

func (e errNotStarted) Error() string {
	return fmt.Sprintf("the app did not answer on its health path within %s (the start timeout); its last lines may say why", e.timeout)
}

// run probes until ctx ends. It returns errNotStarted when the app did
// not answer within StartTimeout, and nil when ctx ended.
func (p *appProbe) run(ctx context.Context) error {
	now := p.Now
	if now == nil {
		now = time.Now
	}
	start := now()
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
		case !answered && now().Sub(start) >= p.StartTimeout:
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
	if p.Check != nil {
		addr, ok := p.Check(ctx)
		if ok {
			p.address = addr
		}
		return ok
	}
	p.address = p.Address
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
	return healthURLOn("127.0.0.1", port, path)
}

// healthURLOn is the app's health path on host:port.
func healthURLOn(host string, port int, path string) string {
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
}

// startProbe follows a running app instance's readiness until stop is
// called, keeping it for heartbeats: by probing its health path on the
// host port (process and docker modes), or from the runner's handle (a
// pod's Ready condition). An app that never answers is stopped and
// reported failed. It returns nil when nobody here can tell (batch mode:
// the job reports itself).
func (t *task) startProbe(h runner.Handle, hostPort int) (stop func()) {
	w := t.w
	var p *appProbe
	set := func(ready bool) {
		t.mu.Lock()
		t.appReady, t.appAddress = ready, p.address
		t.mu.Unlock()
		if ready {
			t.workerLine("ready: %s answers at %s", p0(t.a.App.HealthPath), p.address)
		} else {
			t.workerLine("not ready: %s stopped answering (%d probes in a row)", p0(t.a.App.HealthPath), w.cfg.AppUnreadyAfter)
		}
		w.beatSoon()
	}
	p = &appProbe{Interval: w.cfg.AppProbeInterval, StartTimeout: w.cfg.AppStartTimeout, UnreadyAfter: w.cfg.AppUnreadyAfter,
		Client: probeClient, Set: set}
	switch r, ok := h.(runner.AppReadiness); {
	case ok:
		p.Check = r.AppReady
	case hostPort > 0:
		p.URL = healthURLOn(w.probeHost(), hostPort, t.a.App.HealthPath)
		p.Address = net.JoinHostPort(w.cfg.AppHost, strconv.Itoa(hostPort))
	default:
		return nil
	}
	t.mu.Lock()
	t.probing = true
	t.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.run(ctx); err != nil {
			t.requestStop(err.Error()+t.lastLines(), agentapi.StateFailed)
		}
	}()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if c, ok := h.(runner.CPUUser); ok {
			t.sampleCPU(ctx, c)
		}
	}()
	return func() {
		cancel()
		<-done
		<-sampled
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

// sampleCPU reports an app instance's CPU use as the metric
// cpu.utilization, every GPUSampleInterval: the CPU time its processes
// used over the interval, in percent of one core (a process busy on two
// cores reads 200). The idle limits count an instance as used while this
// is at or over their CPU threshold, as with its GPUs.
func (t *task) sampleCPU(ctx context.Context, c runner.CPUUser) {
	tick := time.NewTicker(t.w.cfg.GPUSampleInterval)
	defer tick.Stop()
	last, ok := c.CPUTime()
	lastAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		used, ok2 := c.CPUTime()
		now := time.Now()
		if ok && ok2 && now.After(lastAt) {
			pct := float64(used-last) / float64(now.Sub(lastAt)) * 100
			t.metrics.Add(agentapi.MetricPoint{At: now, Name: "cpu.utilization", Value: math.Round(max(pct, 0)*10) / 10})
		}
		last, ok, lastAt = used, ok2, now
	}
}

// appPorts picks an app instance's ports and says so in its log: the
// assignment with the port filled in, and the host port it is published
// on (0 for a task that is no app).
func (t *task) appPorts(a *agentapi.Assignment, env map[string]string) (*agentapi.Assignment, int, error) {
	if a.App == nil {
		return a, 0, nil
	}
	port, hostPort, err := t.w.appPorts(a)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case port == 0:
		t.workerLine("an app instance: the job picks its port on its node, and reports it ready once %s answers", p0(a.App.HealthPath))
	case hostPort != 0 && hostPort != port:
		t.workerLine("an app instance: listening on port %d, published on port %d of this host, ready once %s answers", port, hostPort, p0(a.App.HealthPath))
	default:
		t.workerLine("an app instance: listening on port %d, ready once %s answers", port, p0(a.App.HealthPath))
	}
	if port != 0 {
		a = withPort(a, port)
		for k, v := range env {
			env[k] = strings.ReplaceAll(v, agentapi.PortPlaceholder, strconv.Itoa(port))
		}
	}
	return a, hostPort, nil
}
