//go:build faults

package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestKillWorkerMidTask kills `klique worker` with SIGKILL while it runs
// two tasks, and starts it again with the same name, work directory and
// state directory: what its previous incarnation started must be stopped
// (or adopted and finished as the same attempt), never left running as an
// orphan, and no two attempts of one task may run at the same time.
func TestKillWorkerMidTask(t *testing.T) {
	const lease = 5 * time.Second
	s := startServer(t, serveOpts{lease: lease})
	tn := setupTenant(t, s)
	marker := filepath.Join(t.TempDir(), "runs")
	t.Cleanup(func() { killRuns(readMarkers(t, marker)) })
	w := startWorker(t, s.url, tn, "w1", "0,1")
	var ids []string
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// About 8 s: longer than the lease, so an orphan outlives it.
		id, err := enqueue(ctx, s.url, tn.alice, fmt.Sprintf("victim-%d", i), taskScript(marker, 60))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waitStarted(t, marker, len(ids), 30*time.Second)
	time.Sleep(time.Second)
	before := readMarkers(t, marker)
	w.p.kill()
	killed := time.Now()
	time.Sleep(time.Second)
	w.start()
	restarted := time.Now()
	waitDrained(t, s.url, tn.alice, 60*time.Second)
	w.p.stop(20 * time.Second)
	s.p.stop(20 * time.Second)

	f := readFacts(t, openDB(t, s))
	runs := readMarkers(t, marker)
	v := judge(ids, runs, f)
	orphans := 0
	for id, rs := range before {
		for _, old := range rs {
			var now *run
			for _, r := range runs[id] {
				if r.pid == old.pid && r.attempt == old.attempt {
					now = r
				}
			}
			adopted := now != nil && f.tasks[id].attempt == old.attempt && f.tasks[id].status == "completed" && now.ended
			if alive(old.pid) {
				orphans++
				t.Errorf("task %s: attempt %d's process %d of the killed worker is still alive after every task ended", id, old.attempt, old.pid)
				continue
			}
			// Not adopted: it must have been stopped soon after the
			// worker came back (before the restarted worker claims).
			if !adopted && now != nil && now.last.After(restarted.Add(lease)) {
				orphans++
				t.Errorf("task %s: attempt %d (pid %d) of the killed worker ran on %v after the restart, as an orphan (the task ended %s at attempt %d)",
					id, old.attempt, old.pid, now.last.Sub(restarted).Round(time.Millisecond), f.tasks[id].status, f.tasks[id].attempt)
			}
		}
	}
	report(t, "scenario=kill-worker store=sqlite lease=%s state_dir=%t tasks=%d orphans=%d doubled=%d overlapping_runs=%d lost=%d killed_at=%s",
		lease, workerSupportsStateDir(), len(ids), orphans, v.doubled, v.overlapping, v.lost, killed.Format("15:04:05.000"))
	for _, p := range v.problems {
		t.Error(p)
	}
}
