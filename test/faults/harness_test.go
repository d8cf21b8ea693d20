//go:build faults

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

// adminKey is the bootstrap admin key of every control plane the suite
// starts (KLIQUE_BOOTSTRAP_TOKEN), so replicas and restarts share it.
const adminKey = "klique-faults-bootstrap-key-0123456789abcdefghijklmnop"

// vaultKey is the vault key of every control plane (base64 of 32 bytes):
// replicas sharing a database need the same one.
const vaultKey = "ZmF1bHRzLXN1aXRlLXZhdWx0LWtleS0zMi1ieXRlcyE="

// klique is the binary under test, built once by TestMain.
var klique string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "klique-faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	klique = filepath.Join(dir, "klique")
	build := exec.Command("go", "build", "-o", klique, "github.com/klique-ai/klique/cmd/klique")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// report prints a scenario's figures on one line, to the test log and to
// standard output, where CI keeps them.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := "faults: " + fmt.Sprintf(format, args...)
	t.Log(line)
	fmt.Println(line)
}

// requireService fails under CI=true and skips otherwise when something the
// scenario needs is missing.
func requireService(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and "+format, args...)
	}
	t.Skipf(format, args...)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a child process whose output goes to a file of the test's log
// directory. It runs in a process group of its own; the test's cleanup
// kills the group.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

var logSeq struct {
	sync.Mutex
	n map[string]int
}

// startProc starts a process; it is killed (with its group) when the test
// ends, and its output is shown if the test failed.
func startProc(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	logSeq.Lock()
	if logSeq.n == nil {
		logSeq.n = map[string]int{}
	}
	logSeq.n[t.Name()+name]++
	n := logSeq.n[t.Name()+name]
	logSeq.Unlock()
	logDir := filepath.Join(os.TempDir(), "klique-faults-logs", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, log: filepath.Join(logDir, fmt.Sprintf("%s-%d.log", name, n)), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("%s (%s), last output:\n%s", name, p.log, b)
		}
	})
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill sends SIGKILL to the process alone (its children, such as a
// worker's tasks, live on, as after a crash) and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits, killing the group after timeout.
func (p *proc) stop(timeout time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// baseEnv is the environment of every klique process: none of the caller's
// klique settings leak in.
func baseEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KLIQUE_") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
}

// serveOpts configures one control-plane replica.
type serveOpts struct {
	name string
	// databaseURL is a postgres:// URL; empty: SQLite in the data directory.
	databaseURL string
	redisURL    string
	// lease is KLIQUE_WORKER_LEASE (default 10s).
	lease time.Duration
	env   []string
}

// server is a `klique serve` process that can be killed and started again
// on the same address, data directory and database.
type server struct {
	t       *testing.T
	opts    serveOpts
	addr    string
	url     string
	dataDir string
	p       *proc
}

func startServer(t *testing.T, o serveOpts) *server {
	t.Helper()
	if o.name == "" {
		o.name = "serve"
	}
	if o.lease == 0 {
		o.lease = 10 * time.Second
	}
	s := &server{t: t, opts: o, dataDir: t.TempDir()}
	s.addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s.url = "http://" + s.addr
	s.start()
	return s
}

func (s *server) start() {
	s.t.Helper()
	env := append(baseEnv(s.dataDir),
		"KLIQUE_LISTEN="+s.addr, "KLIQUE_DATA_DIR="+s.dataDir, "KLIQUE_PUBLIC_URL="+s.url,
		"KLIQUE_DATABASE_URL="+s.opts.databaseURL, "KLIQUE_REDIS_URL="+s.opts.redisURL,
		"KLIQUE_BOOTSTRAP_TOKEN="+adminKey, "KLIQUE_VAULT_KEY="+vaultKey,
		"KLIQUE_WORKER_LEASE="+s.opts.lease.String(), "KLIQUE_ENGINE_INTERVAL=100ms",
		"KLIQUE_LOG_LEVEL=info", "KLIQUE_SHUTDOWN_TIMEOUT=5s")
	env = append(env, s.opts.env...)
	s.p = startProc(s.t, s.opts.name, env, klique, "serve")
	if err := waitReady(s.url, 60*time.Second, s.p); err != nil {
		s.t.Fatalf("%s: %v (log %s)", s.opts.name, err, s.p.log)
	}
}

// kill9 kills the control plane at once, as a crash would.
func (s *server) kill9() { s.p.kill() }

// restart kills the control plane and starts it again.
func (s *server) restart() {
	s.t.Helper()
	s.p.kill()
	s.start()
}

// waitReady polls /readyz until it answers 200.
func waitReady(url string, timeout time.Duration, p *proc) error {
	c := &http.Client{Timeout: 2 * time.Second}
	ready := false
	eventually.Poll(timeout, func() bool {
		if p != nil && p.exited() {
			return true
		}
		resp, err := c.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
		return ready
	})
	switch {
	case ready:
		return nil
	case p != nil && p.exited():
		return fmt.Errorf("exited before it was ready: %v", p.err)
	}
	return fmt.Errorf("not ready at %s after %v", url, timeout)
}

var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// gql runs a GraphQL request; an error is a transport failure, a status
// other than 200 or a GraphQL error.
func gql(ctx context.Context, url, cred, query string, vars map[string]any) (map[string]any, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Errors) > 0 || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GraphQL %d: %.300s", resp.StatusCode, raw)
	}
	return out.Data, nil
}

func mustGQL(t testing.TB, url, cred, query string, vars map[string]any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := gql(ctx, url, cred, query, vars)
	if err != nil {
		t.Fatalf("%v\nquery: %s", err, query)
	}
	return d
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

// estate is what every scenario runs on: one bare-metal pool, one group
// with a "1 GPU" compute resource, and two projects (the second without a
// gateway budget).
const estate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: a100-80gb, memoryGb: 80, pricePerGpuHour: 1.60, currency: USD}
pools:
  - {name: bare-metal, kind: bare_metal, capacity: 64, gpuClass: a100-80gb}
profiles:
  - {name: one-gpu, size: 1, timeWeight: 1, pools: [bare-metal]}
groups:
  - {name: ml-research}
policies:
  - group: ml-research
    reservation: 64
    limit: 64
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: fraud-models, group: ml-research}
  - {name: warmup, group: ml-research}
`

// tenant is what setupTenant made: a member's API key and a worker
// credential of the pool, in files as the CLI takes them.
type tenant struct {
	alice       string
	workerToken string // path of the worker credential file
	crID        string // the "1 GPU" compute resource
}

// setupTenant applies the estate with `klique apply` and makes a member,
// her key and a worker credential through GraphQL.
func setupTenant(t *testing.T, s *server) *tenant {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "estate.yaml")
	if err := os.WriteFile(file, []byte(estate), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := exec.Command(klique, "apply", "-f", file)
	apply.Env = append(baseEnv(dir), "KLIQUE_SERVER="+s.url, "KLIQUE_API_KEY="+adminKey)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("klique apply: %v\n%s", err, out)
	}
	mustGQL(t, s.url, adminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	tn := &tenant{}
	tn.alice = str(mustGQL(t, s.url, adminKey, `mutation { createAPIKey(input: {name: "alice key", user: "alice"}) { secret } }`, nil), "createAPIKey", "secret")
	secret := str(mustGQL(t, s.url, adminKey, `mutation { createWorkerCredential(pool: "bare-metal", name: "faults") { secret } }`, nil),
		"createWorkerCredential", "secret")
	tn.workerToken = filepath.Join(dir, "worker.token")
	if err := os.WriteFile(tn.workerToken, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	crs, _ := get(mustGQL(t, s.url, adminKey, `{ computeResources { edges { node { id name } } } }`, nil), "computeResources", "edges").([]any)
	for _, e := range crs {
		if str(e, "node", "name") == "1 GPU" {
			tn.crID = str(e, "node", "id")
		}
	}
	if tn.crID == "" {
		t.Fatalf("no compute resource \"1 GPU\" after applying the estate: %v", crs)
	}
	return tn
}

// enqueue sends a shell script as a task of alice's on "1 GPU"; the error
// is any failure, and only a nil error is an acknowledgement.
func enqueue(ctx context.Context, url, cred, name, script string) (string, error) {
	d, err := gql(ctx, url, cred, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": name, "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"sh", "-c", script},
	}})
	if err != nil {
		return "", err
	}
	id := str(d, "enqueueTask", "id")
	if id == "" {
		return "", errors.New("enqueueTask answered without an id")
	}
	return id, nil
}

// workerSupportsStateDir says whether `klique worker --help` lists
// --state-dir (the record of what a worker started, kept across restarts).
var workerSupportsStateDir = sync.OnceValue(func() bool {
	out, _ := exec.Command(klique, "worker", "--help").CombinedOutput()
	return bytes.Contains(out, []byte("--state-dir"))
})

// worker is a `klique worker` process of the bare-metal pool.
type worker struct {
	t    *testing.T
	name string
	args []string
	env  []string
	p    *proc
}

// startWorker runs `klique worker` in process mode with its own work and
// state directories, declaring gpus.
func startWorker(t *testing.T, url string, tn *tenant, name, gpus string) *worker {
	t.Helper()
	dir := t.TempDir()
	args := []string{klique, "worker", "--pool", "bare-metal", "--server", url, "--token-file", tn.workerToken,
		"--gpus", gpus, "--name", name, "--work-dir", filepath.Join(dir, "work"), "--grace", "2s",
		"--nvidia-smi", filepath.Join(dir, "absent-nvidia-smi"), "--log-level", "debug"}
	if workerSupportsStateDir() {
		args = append(args, "--state-dir", filepath.Join(dir, "state"))
	}
	w := &worker{t: t, name: name, args: args, env: baseEnv(dir)}
	w.start()
	return w
}

func (w *worker) start() { w.p = startProc(w.t, "worker-"+w.name, w.env, w.args...) }
