package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/store/pgtest"
)

// Load benchmark shape: 50 members list the first page of a project's tasks
// back to back while 4 writers enqueue, for loadDuration.
// KLIQUE_LOAD_READERS and KLIQUE_LOAD_WRITERS change the numbers (0
// readers: the writers alone).
const loadDuration = 10 * time.Second

var (
	loadReaders = loadCount("KLIQUE_LOAD_READERS", 50)
	loadWriters = loadCount("KLIQUE_LOAD_WRITERS", 4)
)

func loadCount(env string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n >= 0 {
		return n
	}
	return def
}

// loadApp names the server's PostgreSQL connections, so that their
// backends' CPU can be told apart from other clients', other runs' too.
var loadApp = fmt.Sprintf("klique-load-bench-%d", os.Getpid())

// loadEstate is one pool that can hold every task the writers enqueue, one
// group, and the project the readers list.
const loadEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: rack, kind: bare_metal, capacity: 100000, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [rack]}
groups:
  - {name: research}
  - {name: others}
policies:
  - group: research
    reservation: 100000
    limit: 100000
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: bench}
`

// BenchmarkLoadTaskLists measures task lists under write load through the
// whole server: `klique serve` runs as its own process on SQLite and on
// PostgreSQL, with 1,000 and with 1,000,000 ended tasks already stored in the
// project (seeded by one INSERT ... SELECT). 50 readers, each a member of
// the project's group with an API key of their own user, list the first 50
// tasks of the project over GraphQL back to back, while 4 writers enqueue
// tasks over GraphQL, for 10 s.
//
// Reported: list p50 and p99 (ms), lists/s, enqueues/s, and the CPU per
// request (lists and enqueues) of the server process and of the
// PostgreSQL backends serving it (pg_stat_activity by application_name;
// PostgreSQL's own background processes are left out). On SQLite the
// database runs inside the server.
//
//	go test ./cmd/klique -run '^$' -bench LoadTaskLists -benchtime 1x -timeout 30m
//
// Pick one store or size with the usual filter, e.g. -bench 'LoadTaskLists/postgres/1000$'.
func BenchmarkLoadTaskLists(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads CPU times from /proc")
	}
	bin := buildKlique(b)
	for _, st := range []string{"sqlite", "postgres"} {
		b.Run(st, func(b *testing.B) {
			for _, n := range []int{1000, 1000000} {
				b.Run(strconv.Itoa(n), func(b *testing.B) {
					url := ""
					if st == "postgres" {
						url = pgtest.RequirePostgresURL(b) + "&application_name=" + loadApp
					}
					benchLoad(b, bin, url, n)
				})
			}
		})
	}
}

// loadServer is a running `klique serve` and what the benchmark needs of it.
type loadServer struct {
	base, admin, dbPath, url string
	debug                    string // the profiler's address, when KLIQUE_LOAD_PROFILE asks for it
	pid                      int
	client                   *http.Client
}

func startLoadServer(b *testing.B, bin, databaseURL string) *loadServer {
	dir := b.TempDir()
	addr := freeAddr(b)
	s := &loadServer{base: "http://" + addr, url: databaseURL, dbPath: filepath.Join(dir, "klique-data", "klique.db")}
	if os.Getenv("KLIQUE_LOAD_PROFILE") != "" {
		s.debug = freeAddr(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, bin, "serve")
	serve.Dir = dir
	serve.Cancel = func() error { return serve.Process.Signal(syscall.SIGTERM) }
	serve.WaitDelay = 30 * time.Second
	serve.Env = append(os.Environ(), "HOME="+dir, "KLIQUE_LISTEN="+addr, "KLIQUE_PUBLIC_URL="+s.base,
		"KLIQUE_DATABASE_URL="+databaseURL, "KLIQUE_BOOTSTRAP_TOKEN=", "KLIQUE_LOG_LEVEL=error", "KLIQUE_DEBUG_LISTEN="+s.debug)
	log := &syncBuffer{}
	serve.Stdout, serve.Stderr = log, log
	if err := serve.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		_ = serve.Wait()
		if b.Failed() {
			b.Logf("server log:\n%s", log.String())
		}
	})
	s.pid = serve.Process.Pid
	waitReady(b, s.base+"/readyz")
	s.admin = mustRead(b, filepath.Join(dir, "klique-data", "admin.token"))
	s.client = &http.Client{Transport: &http.Transport{MaxIdleConns: 200, MaxIdleConnsPerHost: 200, IdleConnTimeout: time.Minute}}
	return s
}

func benchLoad(b *testing.B, bin, databaseURL string, tasks int) {
	s := startLoadServer(b, bin, databaseURL)
	gql(b, s.client, s.base, s.admin, `mutation($d: String!) { applyEstate(document: $d) { changes { action } } }`, map[string]any{"d": loadEstate})
	readers := make([]string, max(loadReaders, loadWriters))
	for i := range readers {
		u := gql(b, s.client, s.base, s.admin, `mutation($n: String!) { createUser(input: {name: $n, groups: [{group: "research"}]}) { id } }`,
			map[string]any{"n": fmt.Sprintf("reader-%02d", i)})
		id := u["createUser"].(map[string]any)["id"].(string)
		k := gql(b, s.client, s.base, s.admin, `mutation($u: ID!) { createAPIKey(input: {user: $u}) { secret } }`, map[string]any{"u": id})
		readers[i] = k["createAPIKey"].(map[string]any)["secret"].(string)
	}
	seedStart := time.Now()
	seedLoadTasks(b, s, tasks)
	seeded := time.Since(seedStart)

	list := `query { tasks(filter: {project: "bench"}, first: 50) { edges { node { id name status } } } }`
	var lists, enqueues atomic.Int64
	var failure atomic.Value
	latencies := make([][]time.Duration, loadReaders)
	writes := make([][]time.Duration, loadWriters)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cpu0, db0 := processCPU(b, s.pid), databaseCPU(b, s)
	b.ResetTimer()
	start := time.Now()
	profiled := profileServer(b, s, tasks)
	for i := range loadReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if err := gqlPost(s.client, s.base, readers[i], list, nil); err != nil {
					failure.Store(err)
					return
				}
				latencies[i] = append(latencies[i], time.Since(t0))
				lists.Add(1)
			}
		}()
	}
	for w := range loadWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				err := gqlPost(s.client, s.base, readers[w], `mutation($n: String!) { enqueueTask(input: {name: $n, project: "bench",
					computeResource: "1 GPU", command: ["true"]}) { id } }`, map[string]any{"n": fmt.Sprintf("w%d-%d", w, j)})
				if err != nil {
					failure.Store(err)
					return
				}
				writes[w] = append(writes[w], time.Since(t0))
				enqueues.Add(1)
			}
		}()
	}
	time.Sleep(loadDuration)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	<-profiled
	if err := failure.Load(); err != nil {
		b.Fatalf("client: %v", err)
	}
	cpu, dbCPU := processCPU(b, s.pid)-cpu0, time.Duration(0)
	for pid, t := range databaseCPU(b, s) {
		dbCPU += t - db0[pid] // a backend that started during the run counts from zero
	}
	ms := func(all []time.Duration, q float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(q*float64(len(all)-1))].Microseconds()) / 1000
	}
	all, allWrites := slices.Concat(latencies...), slices.Concat(writes...)
	slices.Sort(all)
	slices.Sort(allWrites)
	if len(all)+len(allWrites) == 0 {
		b.Fatal("no request finished")
	}
	requests := float64(lists.Load() + enqueues.Load())
	b.ReportMetric(ms(all, 0.50), "list-p50-ms")
	b.ReportMetric(ms(all, 0.99), "list-p99-ms")
	b.ReportMetric(ms(allWrites, 0.50), "enqueue-p50-ms")
	b.ReportMetric(ms(allWrites, 0.99), "enqueue-p99-ms")
	b.ReportMetric(float64(lists.Load())/elapsed.Seconds(), "lists/s")
	b.ReportMetric(float64(enqueues.Load())/elapsed.Seconds(), "enqueues/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/requests, "server-cpu-ms/req")
	b.ReportMetric(float64(dbCPU.Microseconds())/1000/requests, "db-cpu-ms/req")
	b.ReportMetric(seeded.Seconds(), "seed-s")
	b.ReportMetric(0, "ns/op")
}

// profileServer takes a CPU profile of the server over most of the run when
// KLIQUE_LOAD_PROFILE names a file prefix (the server then serves the Go
// profiler on a loopback port), writing <prefix>-<store>-<tasks>.pprof for
// go tool pprof. The channel closes when the profile is written.
func profileServer(b *testing.B, s *loadServer, tasks int) <-chan struct{} {
	done := make(chan struct{})
	prefix := os.Getenv("KLIQUE_LOAD_PROFILE")
	if prefix == "" || s.debug == "" {
		close(done)
		return done
	}
	store := "sqlite"
	if s.url != "" {
		store = "postgres"
	}
	go func() {
		defer close(done)
		secs := int((loadDuration - 2*time.Second) / time.Second)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.debug, secs))
		if err != nil {
			b.Logf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if err := os.WriteFile(fmt.Sprintf("%s-%s-%d.pprof", prefix, store, tasks), raw, 0o600); err != nil {
			b.Logf("profile: %v", err)
		}
	}()
	return done
}

// seedLoadTasks stores n ended tasks in the bench project with one INSERT
// ... SELECT, bypassing the API: a third the readers' own, a third their
// group's, a third another group's, and moves the queue counter past them.
func seedLoadTasks(b *testing.B, s *loadServer, n int) {
	ctx := context.Background()
	// A large page cache keeps the task indexes' B-trees in memory while a
	// million rows go in; with SQLite's default 2 MB the seed thrashes.
	driver, dsn := "sqlite", s.dbPath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=cache_size(-1000000)"
	if s.url != "" {
		driver, dsn = "pgx", s.url
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var tenant, project, owner, other, cr, policy, profile, group string
	row := db.QueryRowContext(ctx, `SELECT p.tenant_id, p.id, u.id, a.id, c.id, c.policy_id, c.profile_id, g.id
		FROM projects p, users u, users a, compute_resources c, groups g
		WHERE p.name = 'bench' AND u.name = 'reader-00' AND a.name <> 'reader-00' AND c.name = '1 GPU' AND g.name = 'research'
		ORDER BY a.name LIMIT 1`)
	if err := row.Scan(&tenant, &project, &owner, &other, &cr, &policy, &profile, &group); err != nil {
		b.Fatalf("seed: read the estate: %v", err)
	}
	var base int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(queue_seq), 0) FROM tasks`).Scan(&base); err != nil {
		b.Fatal(err)
	}
	q := func(s string) string { return "'" + s + "'" }
	values := `'seed' || i, ` + q(tenant) + `, ` + q(project) + `, CASE i % 3 WHEN 0 THEN ` + q(owner) + ` ELSE ` + q(other) + ` END, ` +
		q(cr) + `, ` + q(policy) + `, ` + q(profile) + `, CASE i % 3 WHEN 2 THEN 'elsewhere' ELSE ` + q(group) + ` END,
		'seeded', '{}', 1, 1000, 'completed', '', ` + strconv.FormatInt(base, 10) + ` + i, 'rack', '', 1700000000000000 + i, 1700000000000000 + i`
	cols := `tasks (id, tenant_id, project_id, owner_id, compute_resource_id, policy_id, profile_id, group_id,
		name, spec, size_nodes, size_per_node_milli, status, reason, queue_seq, pool_id, cloned_from_id, created_at, updated_at)`
	insert := `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ` + strconv.Itoa(n) + `)
		INSERT INTO ` + cols + ` SELECT ` + values + ` FROM s`
	advance := `UPDATE seqs SET value = ` + strconv.FormatInt(base+int64(n), 10) + ` WHERE name = 'task_queue_seq' AND value < ` +
		strconv.FormatInt(base+int64(n), 10)
	analyze := `ANALYZE`
	indexes := `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL`
	if s.url != "" {
		insert = `INSERT INTO ` + cols + ` SELECT ` + values + ` FROM generate_series(1, ` + strconv.Itoa(n) + `) AS s(i)`
		advance = `SELECT setval('task_queue_seq', GREATEST(` + strconv.FormatInt(base+int64(n), 10) + `, (SELECT last_value FROM task_queue_seq)))`
		analyze = `VACUUM ANALYZE tasks`
		indexes = `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'tasks'
			AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = 'tasks'::regclass)`
	}
	// Building an index once over a million rows is far faster than a
	// million inserts into each of a dozen indexes: the seed drops the
	// secondary indexes and creates them again from their definitions.
	rows, err := db.QueryContext(ctx, indexes)
	if err != nil {
		b.Fatal(err)
	}
	var drops, creates []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			b.Fatal(err)
		}
		drops, creates = append(drops, `DROP INDEX `+name), append(creates, def)
	}
	if err := rows.Close(); err != nil {
		b.Fatal(err)
	}
	for _, stmt := range slices.Concat(drops, []string{insert}, creates, []string{advance, analyze}) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			b.Fatalf("seed %d tasks: %v\n%s", n, err, stmt)
		}
	}
}

// databaseCPU is the CPU time of each PostgreSQL backend serving the
// benchmark's server (by application name), or none on SQLite, whose work
// is the server's own.
func databaseCPU(b *testing.B, s *loadServer) map[int]time.Duration {
	total := map[int]time.Duration{}
	if s.url == "" {
		return total
	}
	db, err := sql.Open("pgx", s.url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, loadApp)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			total[pid] = processCPU(b, pid)
		}
	}
	return total
}

// gqlPost sends one GraphQL request and fails on transport, HTTP or
// GraphQL errors.
func gqlPost(c *http.Client, base, cred, query string, vars map[string]any) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Errors []map[string]any `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("graphql: HTTP %d: %w", resp.StatusCode, err)
	}
	if len(out.Errors) > 0 || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("graphql: HTTP %d: %v", resp.StatusCode, out.Errors)
	}
	return nil
}
