//go:build faults

package faults

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// taskScript is a task that records its run in marker: a start line, a
// tick every 100 ms for ticks ticks, and an end line, each with the task
// id, the attempt, the shell's pid and the time in nanoseconds. Two runs
// of one task overlap when their lines interleave in time.
func taskScript(marker string, ticks int) string {
	return fmt.Sprintf(`m=%s; line() { echo "$1 $KLIQUE_TASK_ID $KLIQUE_TASK_ATTEMPT $$ $(date +%%s%%N)" >> "$m"; }
line start; i=0; while [ $i -lt %d ]; do sleep 0.1; line tick; i=$((i+1)); done; line end`, marker, ticks)
}

// run is one run of one attempt of a task, as its marker lines tell.
type run struct {
	task        string
	attempt     int
	pid         int
	first, last time.Time
	ended       bool
}

// readMarkers reads a marker file into runs, keyed by task, one per
// distinct (attempt, pid); a (task, attempt) with two pids ran twice.
func readMarkers(t *testing.T, path string) map[string][]*run {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string][]*run{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byKey := map[string]*run{}
	out := map[string][]*run{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 5 {
			continue // a line cut by a kill
		}
		attempt, err1 := strconv.Atoi(fs[2])
		pid, err2 := strconv.Atoi(fs[3])
		ns, err3 := strconv.ParseInt(fs[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		at := time.Unix(0, ns)
		key := fs[1] + "/" + fs[2] + "/" + fs[3]
		r := byKey[key]
		if r == nil {
			r = &run{task: fs[1], attempt: attempt, pid: pid, first: at, last: at}
			byKey[key] = r
			out[r.task] = append(out[r.task], r)
		}
		if at.Before(r.first) {
			r.first = at
		}
		if at.After(r.last) {
			r.last = at
		}
		if fs[0] == "end" {
			r.ended = true
		}
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i].first.Before(rs[j].first) })
	}
	return out
}

// alive says whether a process still exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// killRuns kills what is left of the runs' processes (orphans of a killed
// worker), so that a failed test leaves nothing behind.
func killRuns(runs map[string][]*run) {
	for _, rs := range runs {
		for _, r := range rs {
			_ = syscall.Kill(-r.pid, syscall.SIGKILL)
			_ = syscall.Kill(r.pid, syscall.SIGKILL)
		}
	}
}

// taskRow is a task as the store has it.
type taskRow struct {
	status   string
	attempt  int
	retries  int
	finished int64 // unix microseconds, 0 while not finished
}

// facts is what the database says after a scenario.
type facts struct {
	tasks map[string]taskRow
	// records counts, per task, the audit entries that allow another run:
	// a preemption or a requeue after a lost worker.
	records map[string]int
	// open counts ledger intervals still open; overlapping counts pairs of
	// one task's intervals that overlap.
	open, overlapping int
}

// openDB opens the store of a stopped (or running) control plane for
// reading: PostgreSQL by URL, or the SQLite file of a data directory.
func openDB(t *testing.T, s *server) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	if s.opts.databaseURL != "" {
		db, err = sql.Open("pgx", s.opts.databaseURL)
	} else {
		db, err = sql.Open("sqlite", "file:"+filepath.Join(s.dataDir, "klique.db")+"?_pragma=busy_timeout(10000)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func readFacts(t *testing.T, db *sql.DB) *facts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &facts{tasks: map[string]taskRow{}, records: map[string]int{}}
	rows, err := db.QueryContext(ctx, `SELECT id, status, attempt, retries, COALESCE(finished_at, 0) FROM tasks`)
	if err != nil {
		t.Fatalf("read tasks: %v", err)
	}
	for rows.Next() {
		var id string
		var r taskRow
		if err := rows.Scan(&id, &r.status, &r.attempt, &r.retries, &r.finished); err != nil {
			t.Fatal(err)
		}
		f.tasks[id] = r
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT object_id, COUNT(*) FROM audit_log WHERE action IN ('task.requeued', 'task.preempted') GROUP BY object_id`)
	if err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		f.records[id] = n
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT task_id, started_at, COALESCE(ended_at, -1) FROM placements ORDER BY task_id, started_at`)
	if err != nil {
		t.Fatalf("read the ledger: %v", err)
	}
	var prevTask string
	var prevEnd int64
	for rows.Next() {
		var task string
		var start, end int64
		if err := rows.Scan(&task, &start, &end); err != nil {
			t.Fatal(err)
		}
		if end < 0 {
			f.open++
		}
		if task == prevTask && (prevEnd < 0 || start < prevEnd) {
			f.overlapping++
		}
		prevTask, prevEnd = task, end
	}
	rows.Close()
	return f
}

// verdict is what a scenario found.
type verdict struct {
	tasks, acked, lost, doubled, overlapping, unfinished int
	problems                                             []string
}

func (v *verdict) problem(format string, args ...any) {
	if len(v.problems) < 20 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
}

// judge compares what was acknowledged and what ran with the store: every
// acknowledged task exists; no (task, attempt) ran twice; a task ran more
// than once only as often as preemptions and lost-worker requeues allow;
// no two runs of one task overlapped in time.
func judge(acked []string, runs map[string][]*run, f *facts) *verdict {
	v := &verdict{tasks: len(f.tasks), acked: len(acked)}
	for _, id := range acked {
		r, ok := f.tasks[id]
		if !ok {
			v.lost++
			v.problem("acknowledged task %s is not in the store", id)
			continue
		}
		switch r.status {
		case "completed", "failed", "aborted":
		default:
			v.unfinished++
			v.problem("task %s is still %s (attempt %d)", id, r.status, r.attempt)
		}
	}
	for id, rs := range runs {
		seen := map[int]int{}
		for _, r := range rs {
			seen[r.attempt]++
			if seen[r.attempt] == 2 {
				v.doubled++
				v.problem("task %s: attempt %d ran twice (pids differ)", id, r.attempt)
			}
		}
		if extra := len(seen) - 1 - f.records[id]; extra > 0 {
			v.doubled += extra
			v.problem("task %s ran as %d attempts with %d preemption or worker-lost records", id, len(seen), f.records[id])
		}
		for i := 1; i < len(rs); i++ {
			for j := 0; j < i; j++ {
				if rs[i].first.Before(rs[j].last) {
					v.overlapping++
					v.problem("task %s: attempt %d (pid %d) started %v before attempt %d (pid %d) stopped", id,
						rs[i].attempt, rs[i].pid, rs[j].last.Sub(rs[i].first).Round(time.Millisecond), rs[j].attempt, rs[j].pid)
				}
			}
		}
	}
	return v
}
