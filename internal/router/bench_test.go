package router

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
)

// fixedResolver lets every credential open one instance: the benchmark
// measures the proxy, the way a cached answer of the platform is used.
type fixedResolver struct{ in *Instance }

func (f fixedResolver) Instance(context.Context, string, string) (*Instance, error) { return f.in, nil }
func (f fixedResolver) Route(context.Context, string, string) ([]*Instance, error) {
	return []*Instance{f.in}, nil
}
func (f fixedResolver) CookieCredential(_ context.Context, c string) (string, time.Time, error) {
	return c, time.Time{}, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRouterDirect: a small JSON answer (a chat completion's size)
// from an instance on loopback, called directly and through the router
// (which reaches it directly), alternately, paced at 1,000 calls a second
// each. It reports the latency the router adds at p50 and p99, and the
// CPU per call it adds (client, router and app share this process, so
// the difference of the two paths is the router's).
func BenchmarkRouterDirect(b *testing.B) {
	payload := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("token ", 40) + `"}}]}`)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(payload)
	}))
	defer app.Close()
	addr := strings.TrimPrefix(app.URL, "http://")
	// The instance answers on loopback, which the address rule allows
	// only to a local pool's instances (Any), as here.
	rt := New(Config{
		Resolver: fixedResolver{&Instance{ID: "t1", Name: "vllm-1", State: "ready", Target: appnet.Target{TaskID: "t1", Attempt: 1, Address: addr, Allow: appnet.Allow{Any: true}}}},
		Reacher:  &appnet.Auto{}, Activity: appnet.NewActivity(nil), Log: slog.New(slog.DiscardHandler),
	})
	front := httptest.NewServer(rt)
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	get := func(u string) time.Duration {
		req, _ := http.NewRequest("POST", u, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer kq_bench")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n != int64(len(payload)) {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
		return time.Since(start)
	}
	direct, routed := app.URL+"/v1/chat/completions", front.URL+"/apps/t1/v1/chat/completions"
	for range 200 { // warm the pools
		get(direct)
		get(routed)
	}
	dl, rl := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	var dCPU, rCPU time.Duration
	b.ResetTimer()
	next := time.Now()
	for range b.N {
		c0 := cpuTime()
		dl = append(dl, get(direct))
		c1 := cpuTime()
		rl = append(rl, get(routed))
		c2 := cpuTime()
		dCPU, rCPU = dCPU+c1-c0, rCPU+c2-c1
		next = next.Add(time.Millisecond)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	b.StopTimer()
	slices.Sort(dl)
	slices.Sort(rl)
	q := func(s []time.Duration, p float64) time.Duration { return s[min(len(s)-1, int(float64(len(s))*p))] }
	b.ReportMetric(float64(q(dl, 0.5).Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(q(rl, 0.5).Microseconds()), "router-p50-µs")
	b.ReportMetric(float64((q(rl, 0.5) - q(dl, 0.5)).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((q(rl, 0.99) - q(dl, 0.99)).Microseconds()), "added-p99-µs")
	b.ReportMetric(float64(dCPU.Microseconds())/float64(b.N), "direct-cpu-µs/call")
	b.ReportMetric(float64((rCPU-dCPU).Microseconds())/float64(b.N), "added-cpu-µs/call")
}
