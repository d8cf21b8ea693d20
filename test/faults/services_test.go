//go:build faults

package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/klique-ai/klique/internal/eventually"
)

// redisServer is a private redis-server on a free port, without
// persistence, that a scenario may stop, kill and start again.
type redisServer struct {
	t    *testing.T
	port int
	url  string
	dir  string
	p    *proc
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		requireService(t, "redis-server is not on PATH: %v", err)
	}
	r := &redisServer{t: t, port: freePort(t), dir: t.TempDir()}
	r.url = fmt.Sprintf("redis://127.0.0.1:%d/0", r.port)
	r.start()
	return r
}

func (r *redisServer) start() {
	r.t.Helper()
	r.p = startProc(r.t, "redis", os.Environ(), "redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--dbfilename", "dump.rdb")
	c := r.client()
	defer c.Close()
	answers := func() bool { return c.Ping(context.Background()).Err() == nil }
	eventually.Poll(10*time.Second, func() bool { return r.p.exited() || answers() })
	if !answers() {
		r.t.Fatalf("redis-server on port %d does not answer (log %s)", r.port, r.p.log)
	}
}

func (r *redisServer) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
}

// freeze stops the process (SIGSTOP): it keeps its keys and its socket
// but answers nothing, as behind a partition, until thaw.
func (r *redisServer) freeze() { _ = syscall.Kill(r.p.pid(), syscall.SIGSTOP) }
func (r *redisServer) thaw()   { _ = syscall.Kill(r.p.pid(), syscall.SIGCONT) }

// save writes Redis's keys to an RDB file (SAVE) and copies it to path:
// what startFrom later brings back as stale keys.
func (r *redisServer) save(path string) {
	r.t.Helper()
	c := r.client()
	defer c.Close()
	if err := c.Save(context.Background()).Err(); err != nil {
		r.t.Fatalf("redis SAVE: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "dump.rdb"))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// startFrom starts Redis again with the keys of an RDB file written by
// save (loaded before it accepts a connection), or empty when rdb is "".
func (r *redisServer) startFrom(rdb string) {
	r.t.Helper()
	dump := filepath.Join(r.dir, "dump.rdb")
	_ = os.Remove(dump)
	if rdb != "" {
		b, err := os.ReadFile(rdb)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(dump, b, 0o600); err != nil {
			r.t.Fatal(err)
		}
	}
	r.start()
}

// privatePostgres is a PostgreSQL instance of the test's own (initdb into
// a temporary directory, on a free port), so a scenario may restart it.
// As root the server runs as the postgres user.
type privatePostgres struct {
	t       *testing.T
	bin     string
	dir     string
	port    int
	url     string
	asUser  []string
	started bool
}

func startPostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	bin := ""
	if len(bins) > 0 {
		bin = filepath.Dir(bins[len(bins)-1])
	} else if p, err := exec.LookPath("pg_ctl"); err == nil {
		bin = filepath.Dir(p)
	} else {
		requireService(t, "no pg_ctl under /usr/lib/postgresql/*/bin or on PATH")
	}
	dir, err := os.MkdirTemp("", "klique-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pg := &privatePostgres{t: t, bin: bin, dir: dir, port: freePort(t)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			requireService(t, "running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		pg.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	pg.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	pg.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	pg.ctl("start")
	t.Cleanup(func() {
		if pg.started {
			pg.ctl("stop", "-m", "immediate")
		}
	})
	return pg
}

func (pg *privatePostgres) run(tool string, args ...string) {
	pg.t.Helper()
	argv := append(append(append([]string(nil), pg.asUser...), filepath.Join(pg.bin, tool)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = pg.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		pg.t.Fatalf("%s: %v\n%s", tool, err, out)
	}
}

// ctl runs pg_ctl start, stop or restart (with its -m mode) and waits.
func (pg *privatePostgres) ctl(action string, args ...string) {
	pg.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", pg.port, pg.dir)
	argv := append([]string{action, "-D", filepath.Join(pg.dir, "data"), "-w", "-t", "60", "-l", filepath.Join(pg.dir, "log"), "-o", opts}, args...)
	pg.run("pg_ctl", argv...)
	pg.started = action != "stop"
}
