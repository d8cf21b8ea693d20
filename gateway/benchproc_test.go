package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/gctune"
)

// The overhead benchmark runs its mock model server and its load generator
// in processes of their own, as they are in a deployment and in published
// gateway benchmarks: otherwise they would share the gateway's Go runtime
// (its processors, its collector, its sweeping) and what they cost would be
// counted as the gateway's. The benchmark's test binary is started again
// with benchRoleEnv set to the role.
const benchRoleEnv = "KLIQUE_BENCH_ROLE"

// Roles of a benchmark child process.
const (
	roleMock = "mock"
	roleLoad = "load"
)

func TestMain(m *testing.M) {
	role := os.Getenv(benchRoleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	run := map[string]func() error{roleMock: serveMockProcess, roleLoad: runLoadProcess}[role]
	if run == nil {
		fmt.Fprintf(os.Stderr, "%s=%q: want %q or %q\n", benchRoleEnv, role, roleMock, roleLoad)
		os.Exit(2)
	}
	// A child's own collections would show in both ways' figures: it gets
	// the gateway's heap floor too.
	gctune.Start(gctune.DefaultFloor)
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child is a benchmark child process: what it prints is read line by line,
// and closing its input tells it to end.
type child struct {
	role string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
}

// startChild starts the test binary again in a role, with env added.
func startChild(b testing.TB, role string, env ...string) *child {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), benchRoleEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start the %s process: %v", role, err)
	}
	c := &child{role: role, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// line returns the child's next line of output.
func (c *child) line(b testing.TB) string {
	b.Helper()
	if !c.out.Scan() {
		b.Fatalf("the %s process ended early (its errors are above): %v", c.role, c.out.Err())
	}
	return c.out.Text()
}

// startMockProcess starts the mock model server in a child process and
// returns its base URL.
func startMockProcess(b testing.TB) string {
	c := startChild(b, roleMock)
	return c.line(b)
}

// serveMockProcess is the mock role: a fixed chat completion on loopback,
// as fast as Go's HTTP server can, until its input closes. It prints its
// base URL.
func serveMockProcess() error {
	srv, url, err := serveMock()
	if err != nil {
		return err
	}
	fmt.Println(url)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// loadResult is what a load process reports.
type loadResult struct {
	P50, P99 time.Duration
	Calls    int
	PerSec   float64
}

// load describes one run of the load generator.
type load struct {
	url, key, project string
	// Rate is the calls per second of an open loop; Callers the callers of
	// a closed loop (when Rate is 0).
	rate, callers int
	d             time.Duration
}

// runLoad runs one load in a child process. An open loop first runs an
// unmeasured second at the rate. If measure is not nil it is called when
// the measured run starts, and what it returns when that run ends, so that
// the caller can read the gateway's metrics over the measured run alone.
func runLoad(b testing.TB, l load, measure func() (end func())) loadResult {
	b.Helper()
	c := startChild(b, roleLoad,
		"KLIQUE_BENCH_URL="+l.url, "KLIQUE_BENCH_KEY="+l.key, "KLIQUE_BENCH_PROJECT="+l.project,
		"KLIQUE_BENCH_RATE="+strconv.Itoa(l.rate), "KLIQUE_BENCH_CALLERS="+strconv.Itoa(l.callers),
		"KLIQUE_BENCH_DURATION="+l.d.String())
	if got := c.line(b); got != "warm" {
		b.Fatalf("load process: want \"warm\", got %q", got)
	}
	end := func() {}
	if measure != nil {
		end = measure()
	}
	if _, err := io.WriteString(c.in, "go\n"); err != nil {
		b.Fatal(err)
	}
	var r loadResult
	if err := json.Unmarshal([]byte(c.line(b)), &r); err != nil {
		b.Fatalf("load process: %v", err)
	}
	end()
	return r
}

// runLoadProcess is the load role: it warms up, says "warm", waits for a
// line on its input, runs the measured load and prints its result as JSON.
func runLoadProcess() error {
	env := func(k string) string { return os.Getenv("KLIQUE_BENCH_" + k) }
	rate, _ := strconv.Atoi(env("RATE"))
	callers, _ := strconv.Atoi(env("CALLERS"))
	d, err := time.ParseDuration(env("DURATION"))
	if err != nil {
		return err
	}
	// Connections are capped so that a stall queues calls rather than
	// running the process out of file descriptors.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	call := func() error { return send(client, env("URL")+"/v1/chat/completions", env("KEY"), env("PROJECT")) }
	// Warm up: connections, and the caches along the way. An open loop
	// runs a second at its rate first: one call at a time leaves one
	// connection open, and the measured run would otherwise begin by
	// opening the dozens the rate needs (on both legs through a gateway),
	// which a gateway under steady load has done long before.
	for i := 0; i < 200; i++ {
		if err := call(); err != nil {
			return err
		}
	}
	if rate > 0 {
		if _, err := openLoop(call, rate, time.Second); err != nil {
			return err
		}
	}
	fmt.Println("warm")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("wait for the go-ahead: %w", err)
	}
	var r loadResult
	if rate > 0 {
		r, err = openLoop(call, rate, d)
	} else {
		r, err = closedLoop(call, callers, d)
	}
	if err != nil {
		return err
	}
	out, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func send(c *http.Client, url, key, project string) error {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(benchBody))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Klique-Project", project)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// openLoop sends rate calls a second for d, each at its due time, and
// returns the latency percentiles measured from the due times: a stall
// counts against every call it delays.
func openLoop(call func() error, rate int, d time.Duration) (loadResult, error) {
	n := int(d.Seconds() * float64(rate))
	lat := make([]time.Duration, n)
	var failed atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	wait, release, err := newPacer()
	if err != nil {
		return loadResult{}, err
	}
	defer release()
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * interval)
		if err := wait(due); err != nil {
			return loadResult{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := call(); err != nil {
				failed.Add(1)
			}
			lat[i] = time.Since(due)
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return loadResult{}, fmt.Errorf("%d of %d calls failed", f, n)
	}
	slices.Sort(lat)
	return loadResult{P50: lat[n/2], P99: lat[n*99/100], Calls: n, PerSec: float64(n) / time.Since(start).Seconds()}, nil
}

// closedLoop runs callers back to back for d and returns calls per second.
func closedLoop(call func() error, callers int, d time.Duration) (loadResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < callers; i++ {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := call(); err != nil {
					failed.Add(1)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return loadResult{}, fmt.Errorf("%d calls failed", f)
	}
	n := done.Load()
	return loadResult{Calls: int(n), PerSec: float64(n) / time.Since(start).Seconds()}, nil
}

// TestTheOverheadBenchmarksLoadKeepsItsRate runs the benchmark's child
// processes briefly, so that a change that breaks them fails here rather
// than in the next person's benchmark run: the load process keeps an open
// loop's rate against the mock process, and reports a call that fails.
func TestTheOverheadBenchmarksLoadKeepsItsRate(t *testing.T) {
	mock := startMockProcess(t)
	r := runLoad(t, load{url: mock, rate: 1000, d: time.Second}, nil)
	// Not faster than the rate (a pacer that does not wait), and not so
	// slow that the pacer must be waiting far too long; the lower bound
	// leaves room for a machine busy with other tests.
	if r.Calls != 1000 || r.PerSec < 600 || r.PerSec > 1010 {
		t.Errorf("an open loop of 1,000 calls a second for 1 s made %d calls at %.0f a second", r.Calls, r.PerSec)
	}
	if r.P50 <= 0 || r.P99 < r.P50 {
		t.Errorf("latencies p50 %v, p99 %v", r.P50, r.P99)
	}
	// A load whose calls fail ends its process with an error, before it
	// reports anything.
	c := startChild(t, roleLoad, "KLIQUE_BENCH_URL=http://127.0.0.1:1", "KLIQUE_BENCH_RATE=10", "KLIQUE_BENCH_DURATION=1s")
	if c.out.Scan() {
		t.Errorf("a load against nothing printed %q", c.out.Text())
	}
}
