package tunnel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/tunnel"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/eventually"
	cptunnel "github.com/klique-ai/klique/internal/tunnel"
)

// plane is the control plane's end alone: a registry behind an HTTP
// server that binds every tunnel to worker w1 (the platform's checks are
// tested with the real server, in internal/server and agents).
type plane struct {
	reg *cptunnel.Registry
	srv *httptest.Server
}

func startPlane(t testing.TB) *plane { return newPlane(t, httptest.NewServer) }

// startTLSPlane is a plane behind https, as a deployed control plane is.
func startTLSPlane(t testing.TB) *plane { return newPlane(t, httptest.NewTLSServer) }

func newPlane(t testing.TB, server func(http.Handler) *httptest.Server) *plane {
	t.Helper()
	p := &plane{reg: cptunnel.New(cptunnel.Options{})}
	p.srv = server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer kqw_test" {
			http.Error(w, `{"error":{"code":"UNAUTHENTICATED","message":"unknown worker credential"}}`, http.StatusUnauthorized)
			return
		}
		_ = p.reg.Serve(w, r, cptunnel.Binding{WorkerID: r.URL.Query().Get("workerId")}, nil)
	}))
	t.Cleanup(func() { p.reg.Close(); p.srv.Close() })
	return p
}

// worker runs the worker's end for w1 with lookup until the test ends or
// stop is called.
func (p *plane) worker(t testing.TB, lookup tunnel.Lookup) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c := client.New(p.srv.URL, "kqw_test")
	if p.srv.TLS != nil {
		c.HTTP = p.srv.Client() // trusts the test server's certificate
	}
	go func() {
		defer close(done)
		_ = tunnel.Serve(ctx, tunnel.Options{Client: c, WorkerID: func() string { return "w1" },
			Lookup: lookup, Backoff: client.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// echo listens on loopback and sends back what it reads; at the end of
// its input it half-closes, as a WebSocket peer ending its side does.
func echo(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return l.Addr().String()
}

// only is a worker's lookup with one app instance.
func only(taskID string, attempt int, addr string) tunnel.Lookup {
	return func(id string, at int) (string, error) {
		if id != taskID || at != attempt {
			return "", fmt.Errorf("worker w1 runs no app instance %s at attempt %d", id, at)
		}
		return addr, nil
	}
}

// TestBytesCrossTheTunnelBothWaysWithHalfClose: a stream to an echo
// instance carries bytes both ways (several writes, then more after
// reading), and closing the sending side still lets the last answer
// through before EOF, as a WebSocket or a request body's end needs.
func TestBytesCrossTheTunnelBothWaysWithHalfClose(t *testing.T) {
	t.Parallel()
	bothWaysWithHalfClose(t, startPlane(t))
}

// TestBytesCrossATunnelOverTLS: the same over https, where the worker's
// own frames go out through the TLS connection the dial upgraded.
func TestBytesCrossATunnelOverTLS(t *testing.T) {
	t.Parallel()
	bothWaysWithHalfClose(t, startTLSPlane(t))
}

func bothWaysWithHalfClose(t *testing.T, p *plane) {
	p.worker(t, only("t1", 1, echo(t)))
	eventually.True(t, "the tunnel", func() bool { return p.reg.Holds("w1") })

	c, err := p.reg.Open(context.Background(), appnet.Target{TaskID: "t1", WorkerID: "w1", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, more than a window
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- b
	}()
	if _, err := c.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if want := append([]byte("hello "), big...); !bytes.Equal(b, want) {
			t.Fatalf("echoed %d bytes, want %d (the first are %q)", len(b), len(want), b[:min(len(b), 16)])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no EOF after the half-close: the end of the sending side did not cross the tunnel")
	}
}

// TestAStreamForAnotherInstanceIsRefusedWithItsMessage: the worker
// answers only for the instances its lookup knows; the refusal reaches
// the control plane with the worker's message, and nothing is dialled.
func TestAStreamForAnotherInstanceIsRefusedWithItsMessage(t *testing.T) {
	t.Parallel()
	p := startPlane(t)
	p.worker(t, only("t1", 1, echo(t)))
	eventually.True(t, "the tunnel", func() bool { return p.reg.Holds("w1") })
	for _, target := range []appnet.Target{{TaskID: "t2", WorkerID: "w1", Attempt: 1}, {TaskID: "t1", WorkerID: "w1", Attempt: 2}} {
		_, err := p.reg.Open(context.Background(), target)
		var refused *cptunnel.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Message, fmt.Sprintf("runs no app instance %s at attempt %d", target.TaskID, target.Attempt)) {
			t.Fatalf("open %+v: err = %v, want the worker's refusal", target, err)
		}
	}
	if _, err := p.reg.Open(context.Background(), appnet.Target{TaskID: "t1", WorkerID: "w9", Attempt: 1}); !errors.Is(err, cptunnel.ErrNoTunnel) {
		t.Fatalf("a worker with no tunnel: err = %v, want ErrNoTunnel", err)
	}
}

// TestANewTunnelReplacesTheOldAndAStoppedOneIsForgotten: a worker that
// connects again (restarted) replaces its old tunnel, streams go through
// the new one, and once it stops the control plane no longer holds it.
func TestANewTunnelReplacesTheOldAndAStoppedOneIsForgotten(t *testing.T) {
	t.Parallel()
	p := startPlane(t)
	first := p.worker(t, only("t1", 1, echo(t)))
	eventually.True(t, "the first tunnel", func() bool { return p.reg.Holds("w1") })
	// The restarted worker runs attempt 2. (Until the first stops, the
	// two replace each other's tunnel as each dials again.)
	second := p.worker(t, only("t1", 2, echo(t)))
	reaches := func(attempt int) bool {
		c, err := p.reg.Open(context.Background(), appnet.Target{TaskID: "t1", WorkerID: "w1", Attempt: attempt})
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}
	eventually.True(t, "the second tunnel to replace the first", func() bool { return reaches(2) })
	first()
	eventually.True(t, "the second tunnel to stay", func() bool { return reaches(2) })
	if reaches(1) {
		t.Fatal("a stream went through the stopped worker's tunnel")
	}
	second()
	eventually.True(t, "the stopped worker's tunnel to be forgotten", func() bool { return !p.reg.Holds("w1") })
}

// TestARefusedCredentialIsRetriedWithItsReason: the worker's end keeps
// dialling a control plane that refuses it, and never holds a tunnel.
func TestARefusedCredentialIsRetriedWithItsReason(t *testing.T) {
	t.Parallel()
	p := startPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var dials int
	var mu sync.Mutex
	p.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		dials++
		mu.Unlock()
		http.Error(w, `{"error":{"code":"UNAUTHENTICATED","message":"worker credential revoked"}}`, http.StatusUnauthorized)
	})
	_ = tunnel.Serve(ctx, tunnel.Options{Client: client.New(p.srv.URL, "kqw_revoked"), WorkerID: func() string { return "w1" },
		Lookup: only("t1", 1, "127.0.0.1:1"), Backoff: client.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}})
	mu.Lock()
	defer mu.Unlock()
	if dials < 3 {
		t.Fatalf("%d dials in 300 ms, want the worker to keep trying", dials)
	}
	if p.reg.Holds("w1") {
		t.Fatal("a refused worker holds a tunnel")
	}
}

func TestServeNeedsAClientALookupAndAWorker(t *testing.T) {
	ctx := context.Background()
	if err := tunnel.Serve(ctx, tunnel.Options{Lookup: only("t", 1, "x")}); err == nil {
		t.Fatal("no client: no error")
	}
	if err := tunnel.Serve(ctx, tunnel.Options{Client: client.New("http://x", "kqw_x"), Lookup: only("t", 1, "x")}); err == nil ||
		!strings.Contains(err.Error(), "worker's id") {
		t.Fatalf("a worker credential without a worker id: %v", err)
	}
}
