package tunnel_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/eventually"
)

// benchApp is an app instance for the benchmarks: /big answers 100 MB,
// /small a few bytes.
func benchApp(b *testing.B) string {
	b.Helper()
	big := bytes.Repeat([]byte("x"), 100<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(big)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	b.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// clients returns an HTTP client that dials the app directly and one that
// reaches it through the tunnel, as the router does.
func clients(b *testing.B) (direct, tunnelled *http.Client) {
	b.Helper()
	p := startPlane(b)
	addr := benchApp(b)
	p.worker(b, only("t1", 1, addr))
	eventually.True(b, "the tunnel", func() bool { return p.reg.Holds("w1") })
	target := appnet.Target{TaskID: "t1", WorkerID: "w1", Attempt: 1, Address: addr}
	var dialer net.Dialer
	direct = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) }}}
	tunnelled = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return p.reg.Open(ctx, target) }}}
	b.Cleanup(func() { direct.CloseIdleConnections(); tunnelled.CloseIdleConnections() })
	return direct, tunnelled
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func get(b *testing.B, c *http.Client, url string) int64 {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return n
}

// BenchmarkTunnelDownload100MB downloads 100 MB from an app instance,
// directly and through the tunnel (the target: at least half the direct
// throughput). The MB/s column is each one's throughput. The alternate
// run takes one download each way per iteration and reports the tunnel's
// share of direct from the same seconds, which a loaded machine's swings
// would otherwise blur between the two runs before it.
func BenchmarkTunnelDownload100MB(b *testing.B) {
	direct, tunnelled := clients(b)
	download := func(b *testing.B, c *http.Client) time.Duration {
		start := time.Now()
		if n := get(b, c, "http://app/big"); n != 100<<20 {
			b.Fatalf("downloaded %d bytes", n)
		}
		return time.Since(start)
	}
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"direct", direct}, {"tunnel", tunnelled}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(100 << 20)
			for b.Loop() {
				download(b, c.client)
			}
		})
	}
	b.Run("alternate", func(b *testing.B) {
		var d, tu, dCPU, tCPU time.Duration
		for b.Loop() {
			c0 := cpuTime()
			d += download(b, direct)
			c1 := cpuTime()
			tu += download(b, tunnelled)
			dCPU, tCPU = dCPU+c1-c0, tCPU+cpuTime()-c1
		}
		mbps := func(t time.Duration) float64 { return float64(b.N) * 100 * (1 << 20) / 1e6 / t.Seconds() }
		b.ReportMetric(mbps(d), "direct-MB/s")
		b.ReportMetric(mbps(tu), "tunnel-MB/s")
		b.ReportMetric(100*d.Seconds()/tu.Seconds(), "tunnel-%-of-direct")
		// CPU per download, the whole process's (client, both ends of the
		// tunnel and the app share it): what a loaded machine's share of
		// the cores is spent on.
		b.ReportMetric(float64(dCPU.Milliseconds())/float64(b.N), "direct-cpu-ms/op")
		b.ReportMetric(float64(tCPU.Milliseconds())/float64(b.N), "tunnel-cpu-ms/op")
	})
}

// BenchmarkTunnelRoundTrip sends small requests to an app instance on a
// kept-alive connection, alternately directly and through the tunnel, and
// reports the latency the tunnel adds at p50 and p99.
func BenchmarkTunnelRoundTrip(b *testing.B) {
	direct, tunnelled := clients(b)
	var d, tu []time.Duration
	for b.Loop() {
		start := time.Now()
		get(b, direct, "http://app/small")
		mid := time.Now()
		get(b, tunnelled, "http://app/small")
		d, tu = append(d, mid.Sub(start)), append(tu, time.Since(mid))
	}
	slices.Sort(d)
	slices.Sort(tu)
	pct := func(s []time.Duration, p float64) float64 {
		return float64(s[int(float64(len(s)-1)*p)].Microseconds())
	}
	b.ReportMetric(pct(d, 0.5), "direct-p50-µs")
	b.ReportMetric(pct(tu, 0.5), "tunnel-p50-µs")
	b.ReportMetric(pct(tu, 0.5)-pct(d, 0.5), "added-p50-µs")
	b.ReportMetric(pct(tu, 0.99)-pct(d, 0.99), "added-p99-µs")
}
