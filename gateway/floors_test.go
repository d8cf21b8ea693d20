package gateway_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/klique-ai/klique/internal/gctune"
	"github.com/klique-ai/klique/internal/redistest"
)

// BenchmarkProxyFloors measures what putting any proxy between the load
// generator and the mock costs on this machine, in the layout of
// BenchmarkGatewayOverhead (the mock and the load generator in processes
// of their own, the proxy in the benchmark's), at the same 5,000 calls a
// second (or KLIQUE_BENCH_OPEN_RATE) and with the same 64 closed-loop
// callers. Each proxy does less than a gateway must, so what it adds is a
// floor under any gateway's figures here:
//
//   - hop: a TCP relay that copies bytes both ways without reading HTTP:
//     the cost of passing through one more process over loopback;
//   - fasthttp: an HTTP proxy on github.com/valyala/fasthttp, a server
//     and client built to allocate nothing per call, doing nothing else;
//   - fasthttp+redis: the same with one Redis round trip (a PING) per
//     call, the least that one Lua script per call can cost;
//   - nethttp+redis: startFloorProxy, the same on net/http, the parts the
//     gateway is built on.
//
// Run it with:
//
//	KLIQUE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test ./gateway -run '^$' -bench ProxyFloors -benchtime 1x
func BenchmarkProxyFloors(b *testing.B) {
	gctune.Start(gctune.DefaultFloor)
	mock := startMockProcess(b)
	rdb, _ := redistest.Require(b)
	direct := load{url: mock}
	floors := []struct {
		name string
		load load
	}{
		{"hop", load{url: startRelay(b, mock)}},
		{"fasthttp", load{url: startFastProxy(b, mock, nil)}},
		{"fasthttp+redis", load{url: startFastProxy(b, mock, rdb)}},
		{"nethttp+redis", load{url: startFloorProxy(b, mock, rdb)}},
	}
	rate, duration := openRate(b), 4*time.Second
	for i := 0; i < b.N; i++ {
		d := runLoad(b, with(direct, rate, 0, duration), nil)
		dt := runLoad(b, with(direct, 0, 64, 3*time.Second), nil).PerSec
		b.ReportMetric(float64(d.P50.Microseconds()), "direct-p50-µs")
		b.ReportMetric(float64(d.P99.Microseconds()), "direct-p99-µs")
		for _, f := range floors {
			o := runLoad(b, with(f.load, rate, 0, duration), nil)
			t := runLoad(b, with(f.load, 0, 64, 3*time.Second), nil).PerSec
			b.ReportMetric(float64((o.P50 - d.P50).Microseconds()), f.name+"-added-p50-µs")
			b.ReportMetric(float64((o.P99 - d.P99).Microseconds()), f.name+"-added-p99-µs")
			b.ReportMetric(100*t/dt, f.name+"-%-of-direct")
		}
		b.ReportMetric(0, "ns/op")
	}
}

// The floors are proxies: each passes a call through to the mock and its
// answer back, and those that stand for the gateway's Redis round trip make
// one (they fail without Redis). Run in the suite so that the benchmark's
// floors cannot rot.
func TestTheProxyFloorsPassCallsThrough(t *testing.T) {
	mock := startMock(t)
	rdb, _ := redistest.Require(t)
	gone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = gone.Close() })
	floors := []struct {
		name       string
		url, noRDB string
	}{
		{"hop", startRelay(t, mock), ""},
		{"fasthttp", startFastProxy(t, mock, nil), ""},
		{"fasthttp+redis", startFastProxy(t, mock, rdb), startFastProxy(t, mock, gone)},
		{"nethttp+redis", startFloorProxy(t, mock, rdb), startFloorProxy(t, mock, gone)},
	}
	c := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	call := func(url string) (int, string) {
		t.Helper()
		resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(benchBody))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	for _, f := range floors {
		t.Run(f.name, func(t *testing.T) {
			for i := 0; i < 3; i++ { // the connection is kept and used again
				if code, body := call(f.url); code != http.StatusOK || body != mockAnswer {
					t.Fatalf("call %d: %d %q, want 200 and the mock's answer", i, code, body)
				}
			}
			if f.noRDB != "" {
				if code, _ := call(f.noRDB); code != http.StatusBadGateway {
					t.Errorf("without Redis: %d, want 502: the floor makes no Redis round trip", code)
				}
			}
		})
	}
}

// startRelay relays TCP connections to the mock, byte for byte, one
// upstream connection per client connection.
func startRelay(b testing.TB, mock string) string {
	addr := strings.TrimPrefix(mock, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	keep := func(c ...net.Conn) {
		mu.Lock()
		conns = append(conns, c...)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				continue
			}
			keep(c, u)
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(u, c); _ = u.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(c, u); _ = c.Close() }()
		}
	}()
	b.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// startFastProxy proxies calls to the mock on fasthttp's server and
// client, with a Redis PING per call if rdb is not nil.
func startFastProxy(b testing.TB, mock string, rdb *redis.Client) string {
	addr := strings.TrimPrefix(mock, "http://")
	target := mock + "/v1/chat/completions"
	client := &fasthttp.HostClient{Addr: addr, MaxConns: 1024}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if rdb != nil {
			if err := rdb.Ping(ctx).Err(); err != nil {
				ctx.Error(err.Error(), fasthttp.StatusBadGateway)
				return
			}
		}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(target)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(ctx.PostBody())
		if err := client.Do(req, resp); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			return
		}
		ctx.SetStatusCode(resp.StatusCode())
		ctx.Response.Header.SetContentTypeBytes(resp.Header.ContentType())
		ctx.SetBody(resp.Body())
	}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	b.Cleanup(func() {
		_ = srv.Shutdown()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			b.Error(err)
		}
		client.CloseIdleConnections()
	})
	return "http://" + ln.Addr().String()
}

// startFloorProxy serves the least that a gateway built on the same parts
// can do for a call, in the benchmark's process as the gateway is: read
// the call, make one round trip to the same Redis (a PING, where the
// gateway runs its reservation script), send the call on to the mock with
// net/http's transport and copy the answer back. No authentication,
// limits, guardrails, routing, metering or collector tuning of its own.
// What it adds over the direct call is what the process layout and the
// parts cost on this machine before any of the gateway's work: the floor
// under the gateway's figures.
func startFloorProxy(b testing.TB, mock string, rdb *redis.Client) string {
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	target := mock + "/v1/chat/completions"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = rdb.Ping(r.Context()).Err()
		}
		var resp *http.Response
		if err == nil {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, target, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err = tr.RoundTrip(req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	b.Cleanup(srv.Close)
	b.Cleanup(tr.CloseIdleConnections)
	return srv.URL
}
