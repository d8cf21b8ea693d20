package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/store/pgtest"
)

// claimBenchWorkers is how many simulated workers long-poll the control
// plane at once.
const claimBenchWorkers = 1000

// claimBenchEstate is one bare-metal pool with a GPU for every worker, and
// one group whose guarantee covers it all.
const claimBenchEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: rack, kind: bare_metal, capacity: 1000, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [rack]}
groups:
  - {name: research}
policies:
  - group: research
    reservation: 1000
    limit: 1000
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: bench}
`

// BenchmarkClaimPath measures the worker claim path of one control plane:
// `klique serve` runs as its own process (so its CPU can be read apart from
// the workers'), 1,000 simulated workers long-poll it over loopback HTTP,
// and b.N tasks are claimed and reported finished. Each worker loops:
// claim (long-poll up to 10 s) → finish → claim. The engine runs every
// 100 ms, so a finished task's GPU is placed again quickly; every figure
// includes the engine passes that place the tasks.
//
// Reported: claims/s, and server-CPU-ms/claim (user+system time of the
// server process over the measured interval, divided by the claims).
//
//	go test ./cmd/klique -run '^$' -bench ClaimPath -benchtime 20000x
func BenchmarkClaimPath(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the server's CPU time from /proc")
	}
	bin := buildKlique(b)
	b.Run("sqlite", func(b *testing.B) { benchClaims(b, bin, "") })
	b.Run("postgres", func(b *testing.B) { benchClaims(b, bin, pgtest.RequirePostgresURL(b)) })
}

func buildKlique(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "klique")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func benchClaims(b *testing.B, bin, databaseURL string) {
	dir := b.TempDir()
	addr := freeAddr(b)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, bin, "serve")
	serve.Dir = dir
	serve.Cancel = func() error { return serve.Process.Signal(syscall.SIGTERM) }
	serve.WaitDelay = 30 * time.Second
	serve.Env = append(os.Environ(), "HOME="+dir, "KLIQUE_LISTEN="+addr, "KLIQUE_PUBLIC_URL="+base,
		"KLIQUE_DATABASE_URL="+databaseURL, "KLIQUE_BOOTSTRAP_TOKEN=", "KLIQUE_ENGINE_INTERVAL=100ms", "KLIQUE_LOG_LEVEL=error")
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
	waitReady(b, base+"/readyz")
	admin := mustRead(b, filepath.Join(dir, "klique-data", "admin.token"))

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * claimBenchWorkers, MaxIdleConnsPerHost: 2 * claimBenchWorkers, IdleConnTimeout: time.Minute}}
	gql(b, client, base, admin, `mutation($d: String!) { applyEstate(document: $d) { changes { action } } }`, map[string]any{"d": claimBenchEstate})
	cred := gql(b, client, base, admin, `mutation { createWorkerCredential(pool: "rack") { secret } }`, nil)
	secret := cred["createWorkerCredential"].(map[string]any)["secret"].(string)

	workers := make([]string, claimBenchWorkers)
	var wg sync.WaitGroup
	var regErr atomic.Value
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out agentapi.RegisterResponse
			if err := agentPost(client, base, secret, agentapi.PathRegister, agentapi.RegisterRequest{Hostname: fmt.Sprintf("host-%04d", i), Version: "bench", Mode: "process"}, &out); err != nil {
				regErr.Store(err)
			}
			workers[i] = out.WorkerID
		}()
	}
	wg.Wait()
	if err := regErr.Load(); err != nil {
		b.Fatalf("register: %v", err)
	}

	// Enqueue b.N tasks, 100 to a request.
	for done := 0; done < b.N; {
		var sb strings.Builder
		sb.WriteString("mutation {")
		n := min(100, b.N-done)
		for j := 0; j < n; j++ {
			fmt.Fprintf(&sb, ` t%d: enqueueTask(input: {name: "bench-%d", project: "bench", computeResource: "1 GPU", command: ["true"]}) { id }`, j, done+j)
		}
		sb.WriteString("}")
		gql(b, client, base, admin, sb.String(), nil)
		done += n
	}

	var claimed, finished atomic.Int64
	var failure atomic.Value
	target := int64(b.N)
	cpu0 := processCPU(b, serve.Process.Pid)
	b.ResetTimer()
	start := time.Now()
	for _, id := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for finished.Load() < target && failure.Load() == nil {
				var out agentapi.ClaimResponse
				if err := agentPost(client, base, secret, agentapi.PathClaim, agentapi.ClaimRequest{WorkerID: id, FreeGPUs: 1, WaitSeconds: 2}, &out); err != nil {
					failure.Store(err)
					return
				}
				if out.Task == nil {
					continue
				}
				claimed.Add(1)
				fin := agentapi.FinishRequest{Attempt: out.Task.Attempt, State: agentapi.StateCompleted}
				if err := agentPost(client, base, secret, agentapi.PathTasks+out.Task.TaskID+"/finish", fin, nil); err != nil {
					failure.Store(err)
					return
				}
				finished.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failure.Load(); err != nil {
		b.Fatalf("worker: %v", err)
	}
	if claimed.Load() != target {
		b.Fatalf("claimed %d tasks, enqueued %d", claimed.Load(), target)
	}
	cpu := processCPU(b, serve.Process.Pid) - cpu0
	b.ReportMetric(float64(target)/elapsed.Seconds(), "claims/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(target), "server-cpu-ms/claim")
	b.ReportMetric(0, "ns/op")
}

// agentPost sends one protocol request; out may be nil. A 204 (no work)
// leaves out as it was.
func agentPost(c *http.Client, base, cred, path string, in, out any) error {
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return nil
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, raw)
	case out != nil:
		return json.Unmarshal(raw, out)
	}
	return nil
}

func gql(b *testing.B, c *http.Client, base, cred, query string, vars map[string]any) map[string]any {
	b.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]any   `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Errors) > 0 {
		b.Fatalf("graphql: %v %v", err, out.Errors)
	}
	return out.Data
}

// processCPU is the user+system CPU time a process has used, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s).
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; fields after it follow
	// its closing parenthesis.
	rest := string(raw[bytes.LastIndexByte(raw, ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
