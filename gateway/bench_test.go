package gateway_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/klique-ai/klique/gateway"
	"github.com/klique-ai/klique/internal/gctune"
	"github.com/klique-ai/klique/internal/model"
)

// mockAnswer is a chat completion as a model server returns it.
const mockAnswer = `{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"meta/llama","choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over the lazy dog."},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":11,"total_tokens":32}}`

// benchBody is the call every request makes.
const benchBody = `{"model":"chat","max_tokens":64,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one sentence about a fox."}]}`

// startMock serves a fixed chat completion on loopback, as fast as Go's
// HTTP server can.
func startMock(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(mockAnswer)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// BenchmarkGatewayOverhead measures, in one run, calls made straight to a
// mock model server and the same calls made through the gateway (a real
// platform service on SQLite, Redis rate limits and a token budget on,
// guardrails on), all on loopback on this machine's cores:
//
//   - latency at a fixed 5,000 requests per second (open loop: each
//     request is timed from when it was due, so a stall counts against
//     every request it delays), p50 and p99 each way, and what the gateway
//     adds;
//
//   - throughput with 64 callers as fast as they go, each way, and the
//     gateway's share of the direct figure.
//
//     KLIQUE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test ./gateway -run '^$' -bench GatewayOverhead -benchtime 1x
func BenchmarkGatewayOverhead(b *testing.B) {
	// As `klique serve` does (KLIQUE_GC_HEAP_FLOOR, default 64 MiB): with a
	// live heap of a few MiB the collector would otherwise run about 28
	// times a second at this rate. Set GOGC to measure without it.
	gctune.Start(gctune.DefaultFloor)
	mock := startMock(b)
	reg := prometheus.NewRegistry()
	metrics, err := gateway.NewMetrics(reg)
	if err != nil {
		b.Fatal(err)
	}
	e := newBenchEnv(b, mock, withMetrics(metrics))
	// Connections are capped so that a stall queues calls rather than
	// running the process out of file descriptors.
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	viaGateway := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	directCall := func() error { return send(direct, mock+"/v1/chat/completions", "", "") }
	gatewayCall := func() error { return send(viaGateway, e.srv.URL+"/v1/chat/completions", e.keys["vic"], "detect") }
	// Warm up connections and caches both ways.
	for i := 0; i < 2000; i++ {
		if err := directCall(); err != nil {
			b.Fatal(err)
		}
		if err := gatewayCall(); err != nil {
			b.Fatal(err)
		}
	}
	const rate, duration = 5000, 4 * time.Second
	for i := 0; i < b.N; i++ {
		// Each way, a second at the rate first, not measured: the warm-up
		// above is one call at a time and leaves one connection open, so
		// the measured second would otherwise begin by opening the dozens
		// of connections the rate needs (on both legs through the
		// gateway), which a gateway under steady load has done long
		// before.
		openLoop(b, directCall, rate, time.Second)
		d := openLoop(b, directCall, rate, duration)
		openLoop(b, gatewayCall, rate, time.Second)
		before := overheadBuckets(b, reg)
		g := openLoop(b, gatewayCall, rate, duration)
		own50, own99 := overheadQuantiles(before, overheadBuckets(b, reg))
		dt := closedLoop(b, directCall, 64, 3*time.Second)
		gt := closedLoop(b, gatewayCall, 64, 3*time.Second)
		b.ReportMetric(float64(d.p50.Microseconds()), "direct-p50-µs")
		b.ReportMetric(float64(d.p99.Microseconds()), "direct-p99-µs")
		b.ReportMetric(float64(g.p50.Microseconds()), "gateway-p50-µs")
		b.ReportMetric(float64(g.p99.Microseconds()), "gateway-p99-µs")
		b.ReportMetric(float64((g.p50 - d.p50).Microseconds()), "added-p50-µs")
		b.ReportMetric(float64((g.p99 - d.p99).Microseconds()), "added-p99-µs")
		// The gateway's own time per call (klique_gateway_overhead_seconds:
		// outside its exchange with the model server), as the bound of the
		// histogram bucket the quantile falls in.
		b.ReportMetric(own50*1e6, "own-p50-≤µs")
		b.ReportMetric(own99*1e6, "own-p99-≤µs")
		b.ReportMetric(dt, "direct-rps")
		b.ReportMetric(gt, "gateway-rps")
		b.ReportMetric(100*gt/dt, "gateway-%-of-direct")
		b.ReportMetric(0, "ns/op")
	}
}

// overheadBuckets reads the cumulative counts of the gateway's overhead
// histogram by upper bound.
func overheadBuckets(b *testing.B, reg *prometheus.Registry) map[float64]uint64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[float64]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "klique_gateway_overhead_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, bk := range m.GetHistogram().GetBucket() {
				out[bk.GetUpperBound()] = bk.GetCumulativeCount()
			}
			out[math.Inf(1)] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// overheadQuantiles returns the upper bounds of the buckets the median and
// the 99th percentile of the calls between two readings fall in.
func overheadQuantiles(before, after map[float64]uint64) (p50, p99 float64) {
	bounds := slices.Sorted(maps.Keys(after))
	total := after[math.Inf(1)] - before[math.Inf(1)]
	p50, p99 = math.NaN(), math.NaN()
	for _, ub := range bounds {
		n := after[ub] - before[ub]
		if math.IsNaN(p50) && 2*n >= total {
			p50 = ub
		}
		if math.IsNaN(p99) && 100*n >= 99*total {
			p99 = ub
		}
	}
	return p50, p99
}

// newBenchEnv is the gateway of the tests, with a route to the mock, a
// budget and rate limits in Redis, and a guardrail.
func newBenchEnv(b *testing.B, mock string, opts ...envOption) *env {
	return newEnvTB(b, func(g *model.Gateway, _ string) {
		g.Routes = []*model.Route{{Name: "mock", Endpoints: []string{mock + "/v1"}, Timeout: 10 * time.Second}}
		g.Models = []*model.LLMModel{{Name: "llama", Route: "mock", Upstream: "meta/llama", InputPriceMicros: 200_000, OutputPriceMicros: 200_000, Currency: "USD"}}
		g.Aliases = []*model.Alias{{Name: "chat", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "llama", Weight: 1}}}}}}
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 1 << 50, PerUserTokens: 1 << 49}}
		g.RateLimits = []*model.RateLimit{
			{Scope: model.RateLimitUser, RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50},
			{Scope: model.RateLimitAlias, Name: "chat", RequestsPerMinute: 1 << 40},
		}
		g.Guardrails = model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`}}
	}, append([]envOption{withRedis()}, opts...)...) // the gateway's own upstream transport
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

type latencies struct{ p50, p99 time.Duration }

// openLoop sends rate requests a second for d, each at its due time, and
// returns the latency percentiles measured from the due times.
func openLoop(b *testing.B, call func() error, rate int, d time.Duration) latencies {
	n := int(d.Seconds() * float64(rate))
	lat := make([]time.Duration, n)
	var failed atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
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
		b.Fatalf("%d of %d calls failed", f, n)
	}
	slices.Sort(lat)
	return latencies{p50: lat[n/2], p99: lat[n*99/100]}
}

// closedLoop runs callers back to back for d and returns calls per second.
func closedLoop(b *testing.B, call func() error, callers int, d time.Duration) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := call(); err != nil {
					failed.Add(1)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d calls failed", f)
	}
	return float64(done.Load()) / time.Since(start).Seconds()
}

// BenchmarkGatewayCall is one call through the gateway's handler, in
// process (no client connection), to the mock over loopback, with the
// in-process limiter: the gateway's own cost per call, and its
// allocations.
//
//	go test ./gateway -run '^$' -bench GatewayCall -benchmem
func BenchmarkGatewayCall(b *testing.B) {
	mock := startMock(b)
	e := newEnvTB(b, func(g *model.Gateway, _ string) {
		g.Routes = []*model.Route{{Name: "mock", Endpoints: []string{mock + "/v1"}, Timeout: 10 * time.Second}}
		g.Models = []*model.LLMModel{{Name: "llama", Route: "mock", Upstream: "meta/llama", InputPriceMicros: 200_000, OutputPriceMicros: 200_000, Currency: "USD"}}
		g.Aliases = []*model.Alias{{Name: "chat", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "llama", Weight: 1}}}}}}
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 1 << 50, PerUserTokens: 1 << 49}}
		g.RateLimits = []*model.RateLimit{
			{Scope: model.RateLimitUser, RequestsPerMinute: 1 << 40, TokensPerMinute: 1 << 50},
			{Scope: model.RateLimitAlias, Name: "chat", RequestsPerMinute: 1 << 40},
		}
		g.Guardrails = model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`}}
	})
	key := e.keys["vic"]
	call := func() {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(benchBody))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Klique-Project", "detect")
		rec := httptest.NewRecorder()
		e.gw.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	for i := 0; i < 100; i++ {
		call()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call()
	}
}
