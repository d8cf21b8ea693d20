package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/testclock"
)

// recorder keeps the readiness changes a probe reports.
type recorder struct {
	mu  sync.Mutex
	got []bool
}

func (r *recorder) set(ready bool) { r.mu.Lock(); r.got = append(r.got, ready); r.mu.Unlock() }

func (r *recorder) changes() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.got...)
}

func (r *recorder) waitFor(t *testing.T, n int) []bool {
	t.Helper()
	if !eventually.Poll(eventually.Timeout, func() bool { return len(r.changes()) >= n }) {
		t.Fatalf("want %d readiness changes, got %v", n, r.changes())
	}
	return r.changes()
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAppProbeReadyThenNotReady: a probe against a real HTTP server turns
// ready at the first 2xx (not before: the server answers 503 while it
// starts), counts a 3xx as an answer, and turns not ready only after
// UnreadyAfter failures in a row.
func TestAppProbeReadyThenNotReady(t *testing.T) {
	var status atomic.Int64
	status.Store(http.StatusServiceUnavailable)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		if s := int(status.Load()); s == http.StatusFound {
			http.Redirect(w, r, "/elsewhere", s)
		} else {
			w.WriteHeader(s)
		}
	}))
	defer srv.Close()
	rec := &recorder{}
	p := &appProbe{URL: srv.URL + "/health", Interval: 20 * time.Millisecond, StartTimeout: time.Minute, UnreadyAfter: 3,
		Client: probeClient, Set: rec.set}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()

	eventually.True(t, "three probes", func() bool { return hits.Load() >= 3 })
	if c := rec.changes(); len(c) != 0 {
		t.Fatalf("ready while the server answers 503: %v", c)
	}
	status.Store(http.StatusFound) // a redirect is an answer
	if c := rec.waitFor(t, 1); !c[0] {
		t.Fatalf("changes %v, want ready", c)
	}
	status.Store(http.StatusOK)
	answered := hits.Load()
	eventually.True(t, "two probes answered 200", func() bool { return hits.Load() >= answered+2 })
	status.Store(http.StatusInternalServerError)
	before := hits.Load()
	if c := rec.waitFor(t, 2); c[1] {
		t.Fatalf("changes %v, want not ready", c)
	}
	if n := hits.Load() - before; n < 3 {
		t.Fatalf("not ready after %d failed probes, want at least 3 in a row", n)
	}
	status.Store(http.StatusOK)
	if c := rec.waitFor(t, 3); !c[2] {
		t.Fatalf("changes %v, want ready again", c)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a cancelled probe returns %v", err)
	}
}

// TestAppProbeStartTimeout: an app that never answers (nothing listens on
// its port) is given up on after the start timeout, with an error that
// says so; one that was ready is never failed for timing out.
func TestAppProbeStartTimeout(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	p := &appProbe{URL: healthURL(port, "healthz"), Interval: 20 * time.Millisecond, StartTimeout: 200 * time.Millisecond,
		UnreadyAfter: 2, Client: probeClient, Set: rec.set}
	start := time.Now()
	err = p.run(context.Background())
	var ns errNotStarted
	if !errors.As(err, &ns) || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("got %v after %s, want the start timeout after 200ms", err, time.Since(start))
	}
	if len(rec.changes()) != 0 {
		t.Fatalf("never answered but reported %v", rec.changes())
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	p.URL = srv.URL
	// The probe's clock, and a count of its probes: the test moves the
	// clock past the start timeout and waits for probes made after it.
	clk := testclock.New(time.Now())
	p.Now = clk.Now
	var probes atomic.Int64
	p.Client = &http.Client{CheckRedirect: probeClient.CheckRedirect, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		probes.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	rec.waitFor(t, 1)
	srv.Close()
	rec.waitFor(t, 2)
	clk.Add(time.Minute) // past the start timeout, not answering
	past := probes.Load()
	eventually.True(t, "two probes past the start timeout", func() bool { return probes.Load() >= past+2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a probe that was ready failed with %v", err)
	}
}

// TestWithPortFillsThePlaceholder: {port} is filled in the command and the
// variables, and the assignment the worker was given is left as it was.
func TestWithPortFillsThePlaceholder(t *testing.T) {
	a := &agentapi.Assignment{Command: []string{"serve", "--port", "{port}", "--url=http://h:{port}/"},
		Env: map[string]string{"KLIQUE_APP_PORT": "{port}", "OTHER": "${HOME}"}, App: &agentapi.AppAssignment{Port: 8000}}
	got := withPort(a, 41234)
	if got.Command[2] != "41234" || got.Command[3] != "--url=http://h:41234/" || got.Env["KLIQUE_APP_PORT"] != "41234" || got.Env["OTHER"] != "${HOME}" {
		t.Fatalf("filled: %v %v", got.Command, got.Env)
	}
	if a.Command[2] != "{port}" || a.Env["KLIQUE_APP_PORT"] != "{port}" {
		t.Fatalf("the original changed: %v %v", a.Command, a.Env)
	}
}
