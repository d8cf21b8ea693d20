package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/server"
)

// BenchmarkQueueFanOut measures how long a queue event takes to reach every
// subscriber of a compute resource's queue over real WebSocket connections
// on loopback: each iteration publishes one queue.changed event (what the
// engine publishes after a pass that changed the queue) and waits until all
// subscribers have read it. It reports the p50 and p99 delivery time over
// all deliveries, and the memory an idle subscriber costs (server and test
// clients share the process, so this includes the client's side).
//
//	ulimit -n 20000
//	KLIQUE_BENCH_SUBSCRIBERS=10000 go test ./internal/server/ -run '^$' -bench QueueFanOut -benchtime 20x
//
// KLIQUE_BENCH_SUBSCRIBERS (default 10000) sets the subscribers and
// KLIQUE_BENCH_SUBS_PER_CONN (default 1) how many share one connection.
func BenchmarkQueueFanOut(b *testing.B) {
	subscribers := envInt(b, "KLIQUE_BENCH_SUBSCRIBERS", 10000)
	perConn := envInt(b, "KLIQUE_BENCH_SUBS_PER_CONN", 1)
	conns := (subscribers + perConn - 1) / perConn

	cfg := &config.Config{Listen: "127.0.0.1:0", DataDir: b.TempDir(), BootstrapToken: adminKey, PublicURL: "http://127.0.0.1",
		TokenTTL: time.Hour, MaxBodyBytes: 1 << 20, LogFormat: "text", LogLevel: "error", ShutdownTimeout: 10 * time.Second,
		SubscriptionsPerConnection: perConn, SubscriptionConnectionsPerUser: conns + 10}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app, err := server.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = app.Shutdown(sctx)
	}()
	estate, err := os.ReadFile(filepath.Join("..", "..", "examples", "estate.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	benchGQL(b, app.URL(), `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": string(estate)})
	d := benchGQL(b, app.URL(), `{ me { tenant { id } } computeResources { edges { node { id name group { name } } } } }`, nil)
	tenant := str(d, "me", "tenant", "id")
	var cr string
	for _, n := range nodes(d, "computeResources") {
		if str(n, "name") == "1 GPU" && str(n, "group", "name") == "vision" {
			cr = str(n, "id")
		}
	}
	if tenant == "" || cr == "" {
		b.Fatalf("no tenant or compute resource in %v", d)
	}

	// Deliveries of the current wave: latencies are written by the
	// connections' readers, and the wave ends when all have arrived.
	var (
		wave      atomic.Int64 // publish time of the current wave, UnixNano
		arrived   atomic.Int64
		latMu     sync.Mutex
		latencies []time.Duration
		waveDone  = make(chan struct{}, 1)
	)
	marker := []byte(`"kind":"queue.changed"`)
	reader := func(c *rawWS) {
		for {
			data, err := c.next()
			if err != nil {
				return
			}
			if !bytes.Contains(data, marker) {
				continue
			}
			lat := time.Since(time.Unix(0, wave.Load()))
			latMu.Lock()
			latencies = append(latencies, lat)
			latMu.Unlock()
			if arrived.Add(1) == int64(subscribers) {
				waveDone <- struct{}{}
			}
		}
	}

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutinesBefore := runtime.NumGoroutine()

	clients := make([]*rawWS, conns)
	var wg sync.WaitGroup
	var failed atomic.Value
	sem := make(chan struct{}, 64)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := dialRawWS(app.URL()+"/graphql", protoTransportWS, time.Minute)
			if err == nil {
				err = c.writeJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + adminKey}})
			}
			var ack wsMsg
			if err == nil {
				var data []byte
				if data, err = c.next(); err == nil {
					err = json.Unmarshal(data, &ack)
				}
				if err == nil && ack.Type != "connection_ack" {
					err = fmt.Errorf("got %s, want connection_ack", ack.Type)
				}
			}
			for s := 0; err == nil && s < perConn && i*perConn+s < subscribers; s++ {
				err = c.writeJSON(map[string]any{"id": strconv.Itoa(s), "type": "subscribe", "payload": map[string]any{
					"query": `subscription($cr: ID!) { queueChanged(computeResource: $cr) { kind at } }`, "variables": map[string]any{"cr": cr}}})
			}
			if err != nil {
				failed.Store(fmt.Errorf("connection %d: %w", i, err))
				return
			}
			clients[i] = c
			go reader(c)
		}(i)
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range clients {
			_ = c.close()
		}
	}()
	// Wait until every subscription is in place (its snapshot sent).
	if !eventually.Poll(2*time.Minute, func() bool { return app.Service.SubscriberCount(tenant, cr) >= subscribers }) {
		b.Fatalf("%d of %d subscriptions in place", app.Service.SubscriberCount(tenant, cr), subscribers)
	}
	time.Sleep(time.Second) // let the snapshots drain
	var idle runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&idle)
	perSub := float64((idle.HeapInuse+idle.StackInuse)-(before.HeapInuse+before.StackInuse)) / float64(subscribers)
	goroutinesPerSub := float64(runtime.NumGoroutine()-goroutinesBefore) / float64(subscribers)
	if f := os.Getenv("KLIQUE_BENCH_GOROUTINES"); f != "" {
		out, _ := os.Create(f)
		_ = pprof.Lookup("goroutine").WriteTo(out, 1)
		_ = out.Close()
	}
	if f := os.Getenv("KLIQUE_BENCH_HEAP"); f != "" {
		out, _ := os.Create(f)
		_ = pprof.Lookup("heap").WriteTo(out, 0)
		_ = out.Close()
	}

	cpuBefore := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		arrived.Store(0)
		now := time.Now()
		wave.Store(now.UnixNano())
		app.Events.Publish(events.Event{TenantID: tenant, Kind: "queue.changed", ObjectKind: "compute_resource", ObjectID: cr, At: now})
		select {
		case <-waveDone:
		case <-time.After(time.Minute):
			b.Fatalf("wave %d: %d of %d subscribers got the event within a minute", i, arrived.Load(), subscribers)
		}
	}
	b.StopTimer()
	cpuPerWave := (processCPU(b) - cpuBefore) / time.Duration(b.N)
	latMu.Lock()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p50, p99, maxLat := latencies[len(latencies)/2], latencies[len(latencies)*99/100], latencies[len(latencies)-1]
	latMu.Unlock()
	b.ReportMetric(float64(latencies[0].Microseconds())/1000, "min-ms")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(maxLat.Microseconds())/1000, "max-ms")
	b.ReportMetric(perSub, "bytes/idle-sub")
	// CPU time of the whole process (server and clients) per wave: what a
	// delivery costs, less sensitive than latency to other work on the
	// machine.
	b.ReportMetric(float64(cpuPerWave.Microseconds())/1000, "cpu-ms/wave")
	b.ReportMetric(goroutinesPerSub, "goroutines/sub")
	b.ReportMetric(float64(subscribers), "subscribers")
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: give a positive whole number", name, v)
	}
	return n
}

// benchGQL runs one GraphQL request as the admin and returns its data.
func benchGQL(b *testing.B, url, query string, vars map[string]any) map[string]any {
	b.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []gqlError     `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Errors) > 0 {
		b.Fatalf("%s: %v %v", query, err, out.Errors)
	}
	return out.Data
}
