//go:build faults

package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/klique-ai/klique/internal/eventually"
)

// pgDatabase makes a database of its own on the test PostgreSQL
// (KLIQUE_TEST_DATABASE_URL) and drops it when the test ends.
func pgDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv("KLIQUE_TEST_DATABASE_URL")
	if base == "" {
		requireService(t, "KLIQUE_TEST_DATABASE_URL is not set: the PostgreSQL scenarios need a server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		requireService(t, "PostgreSQL at KLIQUE_TEST_DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "klique_faults_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// producer enqueues tasks over GraphQL, spread over urls, and keeps the
// ids of those acknowledged (answered with an id).
type producer struct {
	mu       sync.Mutex
	acked    []string
	failures int
	stopc    chan struct{}
	done     chan struct{}
}

func startProducer(urls []string, cred, marker string, ticks int, every time.Duration) *producer {
	p := &producer{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stopc:
				return
			case <-time.After(every):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			id, err := enqueue(ctx, urls[i%len(urls)], cred, fmt.Sprintf("faults-%d", i), taskScript(marker, ticks))
			cancel()
			p.mu.Lock()
			if err != nil {
				p.failures++
			} else {
				p.acked = append(p.acked, id)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// waitAcked waits until n more enqueues than now have been acknowledged,
// failing the test after timeout.
func (p *producer) waitAcked(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	count := func() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.acked) }
	want := count() + n
	if !eventually.Poll(timeout, func() bool { return count() >= want }) {
		t.Fatalf("%d of %d more enqueues acknowledged within %s", count()-want+n, n, timeout)
	}
}

// waitStarted waits until n tasks have started (written their markers).
func waitStarted(t *testing.T, marker string, n int, timeout time.Duration) {
	t.Helper()
	if !eventually.Poll(timeout, func() bool { return len(readMarkers(t, marker)) >= n }) {
		t.Fatalf("the tasks did not all start: %d of %d", len(readMarkers(t, marker)), n)
	}
}

func (p *producer) stop() ([]string, int) {
	close(p.stopc)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.acked...), p.failures
}

// waitDrained waits until no task of the tenant is queued, placed or
// running.
func waitDrained(t *testing.T, url, cred string, timeout time.Duration) {
	t.Helper()
	var d map[string]any
	var err error
	if eventually.Poll(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err = gql(ctx, url, cred, `{ tasks(filter: {status: [QUEUED, PLACED, RUNNING]}, first: 5) { edges { node { id status } } } }`, nil)
		edges, _ := get(d, "tasks", "edges").([]any)
		return err == nil && len(edges) == 0
	}) {
		return
	}
	if err == nil {
		t.Errorf("tasks still not finished %v after the faults: %v", timeout, d)
	} else {
		t.Errorf("the control plane does not answer %v after the faults: %v", timeout, err)
	}
}

// TestKillControlPlane kills `klique serve` with SIGKILL at random moments
// while a producer enqueues and a worker runs the tasks, on SQLite and on
// PostgreSQL: every acknowledged enqueue must exist, no attempt may run
// twice without a preemption or worker-lost record, and no ledger interval
// may be left open or overlap another of its task.
func TestKillControlPlane(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) { killControlPlane(t, store, 10) })
	}
}

func killControlPlane(t *testing.T, store string, kills int) {
	var dbURL string
	if store == "postgres" {
		dbURL = pgDatabase(t)
	}
	s := startServer(t, serveOpts{databaseURL: dbURL, lease: 10 * time.Second})
	tn := setupTenant(t, s)
	marker := filepath.Join(t.TempDir(), "runs")
	t.Cleanup(func() { killRuns(readMarkers(t, marker)) })
	w := startWorker(t, s.url, tn, "w1", "0-7")
	prod := startProducer([]string{s.url}, tn.alice, marker, 8, 200*time.Millisecond)
	began := time.Now()
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(300+mrand.IntN(1500)) * time.Millisecond)
		s.restart()
	}
	acked, failures := prod.stop()
	faulted := time.Since(began)
	waitDrained(t, s.url, tn.alice, 90*time.Second)
	w.p.stop(20 * time.Second)
	s.p.stop(20 * time.Second)

	f := readFacts(t, openDB(t, s))
	v := judge(acked, readMarkers(t, marker), f)
	report(t, "scenario=kill-control-plane store=%s kills=%d duration=%s tasks=%d acked=%d refused_during_faults=%d lost=%d doubled=%d overlapping_runs=%d unfinished=%d open_intervals=%d overlapping_intervals=%d",
		store, kills, faulted.Round(time.Second), v.tasks, v.acked, failures, v.lost, v.doubled, v.overlapping, v.unfinished, f.open, f.overlapping)
	for _, p := range v.problems {
		t.Error(p)
	}
	if len(acked) < kills {
		t.Errorf("only %d enqueues were acknowledged during %d kills: the scenario proves little", len(acked), kills)
	}
	if f.open != 0 || f.overlapping != 0 {
		t.Errorf("the ledger has %d open and %d overlapping intervals after every task ended", f.open, f.overlapping)
	}
}

// TestControlPlaneDownLongerThanALease stops the control plane (SIGKILL)
// for twice the worker lease while four healthy tasks run, then starts it
// again: the worker is alive and reports in, so every task must keep its
// first attempt and complete (none reaped, none run again).
func TestControlPlaneDownLongerThanALease(t *testing.T) {
	const lease = 5 * time.Second
	s := startServer(t, serveOpts{lease: lease})
	tn := setupTenant(t, s)
	marker := filepath.Join(t.TempDir(), "runs")
	t.Cleanup(func() { killRuns(readMarkers(t, marker)) })
	startWorker(t, s.url, tn, "w1", "0-3")
	var ids []string
	for i := 0; i < 4; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id, err := enqueue(ctx, s.url, tn.alice, fmt.Sprintf("long-%d", i), taskScript(marker, 250))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waitStarted(t, marker, len(ids), 30*time.Second)
	s.kill9()
	down := 2 * lease
	time.Sleep(down)
	s.start()
	waitDrained(t, s.url, tn.alice, 60*time.Second)
	s.p.stop(20 * time.Second)

	f := readFacts(t, openDB(t, s))
	runs := readMarkers(t, marker)
	v := judge(ids, runs, f)
	survived, rerun := 0, 0
	for _, id := range ids {
		r := f.tasks[id]
		if r.status == "completed" && r.attempt == 1 && len(runs[id]) == 1 && runs[id][0].ended {
			survived++
		} else {
			rerun++
			t.Errorf("task %s: %s, attempt %d, %d retries, %d runs; want its first attempt to run on and complete", id, r.status, r.attempt, r.retries, len(runs[id]))
		}
	}
	report(t, "scenario=lease-outage store=sqlite lease=%s down=%s tasks=%d survived=%d rerun_or_failed=%d lost=%d doubled=%d",
		lease, down, len(ids), survived, rerun, v.lost, v.doubled)
	for _, p := range v.problems {
		t.Error(p)
	}
}
