//go:build faults

package faults

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

// TestPostgresRestartUnderLoad restarts the control plane's PostgreSQL
// (pg_ctl restart, once -m fast and once -m immediate) while a producer
// enqueues and a worker runs the tasks: the server must reconnect by
// itself (later requests succeed) and lose no acknowledged write.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := startPostgres(t)
	s := startServer(t, serveOpts{databaseURL: pg.url, lease: 10 * time.Second})
	tn := setupTenant(t, s)
	marker := filepath.Join(t.TempDir(), "runs")
	t.Cleanup(func() { killRuns(readMarkers(t, marker)) })
	w := startWorker(t, s.url, tn, "w1", "0-3")
	prod := startProducer([]string{s.url}, tn.alice, marker, 3, 100*time.Millisecond)
	prod.waitAcked(t, 20, 30*time.Second) // under load before the first restart
	reconnect := map[string]time.Duration{}
	for _, mode := range []string{"fast", "immediate"} {
		pg.ctl("restart", "-m", mode)
		restarted := time.Now()
		var err error
		if !eventually.Poll(30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = gql(ctx, s.url, tn.alice, `{ tasks(first: 1) { edges { node { id } } } }`, nil)
			return err == nil
		}) {
			t.Fatalf("the server still fails 30 s after PostgreSQL came back from a restart -m %s: %v", mode, err)
		}
		reconnect[mode] = time.Since(restarted)
		prod.waitAcked(t, 15, 30*time.Second) // the load goes on after the restart
	}
	acked, failures := prod.stop()
	waitDrained(t, s.url, tn.alice, 60*time.Second)
	w.p.stop(20 * time.Second)
	s.p.stop(20 * time.Second)

	f := readFacts(t, openDB(t, s))
	v := judge(acked, readMarkers(t, marker), f)
	report(t, "scenario=postgres-restart store=postgres restarts=2 reconnect_fast=%s reconnect_immediate=%s tasks=%d acked=%d refused_during_faults=%d lost=%d doubled=%d overlapping_runs=%d unfinished=%d open_intervals=%d",
		reconnect["fast"].Round(10*time.Millisecond), reconnect["immediate"].Round(10*time.Millisecond), v.tasks, v.acked, failures, v.lost, v.doubled, v.overlapping, v.unfinished, f.open)
	for _, p := range v.problems {
		t.Error(p)
	}
	if f.open != 0 || f.overlapping != 0 {
		t.Errorf("the ledger has %d open and %d overlapping intervals after every task ended", f.open, f.overlapping)
	}
}
