package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

func fast(c *Client) *Client {
	c.Backoff = Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}
	c.Timeout = 2 * time.Second
	return c
}

// firstWrite closes c at its first write.
type firstWrite struct {
	once sync.Once
	c    chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	var e agentapi.Error
	e.Error.Code, e.Error.Message = code, msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}

func TestClient(t *testing.T) {
	t.Parallel()

	t.Run("the credential is sent as a bearer token and answers are decoded", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer kqw_abc" || r.URL.Path != agentapi.PathRegister || r.Method != http.MethodPost {
				refuse(w, 401, "UNAUTHENTICATED", "no")
				return
			}
			var req agentapi.RegisterRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			_ = json.NewEncoder(w).Encode(agentapi.RegisterResponse{WorkerID: "w-" + req.Hostname, Pool: "bare-metal", HeartbeatSeconds: 10})
		}))
		defer srv.Close()
		resp, err := fast(New(srv.URL+"/", "kqw_abc")).Register(context.Background(), &agentapi.RegisterRequest{Hostname: "h1"})
		if err != nil || resp.WorkerID != "w-h1" || resp.Pool != "bare-metal" {
			t.Fatalf("%+v, %v", resp, err)
		}
	})

	t.Run("an empty long poll (204) is no task", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req agentapi.ClaimRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.WaitSeconds == 7 {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			_ = json.NewEncoder(w).Encode(agentapi.ClaimResponse{Task: &agentapi.Assignment{TaskID: "t1", Attempt: 3}})
		}))
		defer srv.Close()
		c := fast(New(srv.URL, "k"))
		a, err := c.Claim(context.Background(), &agentapi.ClaimRequest{WaitSeconds: 7})
		if a != nil || err != nil {
			t.Fatalf("%+v, %v", a, err)
		}
		a, err = c.Claim(context.Background(), &agentapi.ClaimRequest{WaitSeconds: 1})
		if err != nil || a.TaskID != "t1" || a.Attempt != 3 {
			t.Fatalf("%+v, %v", a, err)
		}
	})

	t.Run("5xx is retried with backoff until it succeeds", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= 2 {
				refuse(w, 503, "UNAVAILABLE", "restarting")
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer srv.Close()
		if err := fast(New(srv.URL, "k")).Finish(context.Background(), "t1", &agentapi.FinishRequest{Attempt: 1, State: "completed"}); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != 3 {
			t.Fatalf("%d calls, want 3", calls.Load())
		}
	})

	t.Run("409 is a stale attempt and is never retried", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			refuse(w, 409, "STALE_ATTEMPT", "attempt 1 is not current")
		}))
		defer srv.Close()
		_, err := fast(New(srv.URL, "k")).Logs(context.Background(), "t1", &agentapi.LogsRequest{Attempt: 1})
		var e *Error
		if !errors.Is(err, ErrStaleAttempt) || !errors.As(err, &e) || e.Code != "STALE_ATTEMPT" || IsTransient(err) {
			t.Fatalf("err = %v", err)
		}
		if calls.Load() != 1 {
			t.Fatalf("%d calls, want 1", calls.Load())
		}
	})

	t.Run("401 is a refused credential", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			refuse(w, 401, "UNAUTHENTICATED", "revoked")
		}))
		defer srv.Close()
		_, err := fast(New(srv.URL, "k")).Heartbeat(context.Background(), &agentapi.HeartbeatRequest{})
		if !errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrStaleAttempt) || IsTransient(err) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("a refused connection is retried until the server is up", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		// The server comes up once the client has been refused and said
		// it retries.
		retried := &firstWrite{c: make(chan struct{})}
		go func() {
			<-retried.c
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(agentapi.SecretsResponse{Secrets: map[string]string{"K": "v"}})
			})}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })
		}()
		c := fast(New("http://"+addr, "k"))
		c.Retries = 50
		c.Log = slog.New(slog.NewTextHandler(retried, &slog.HandlerOptions{Level: slog.LevelDebug}))
		got, err := c.Secrets(context.Background(), "t1", 2)
		if err != nil || got["K"] != "v" {
			t.Fatalf("%v, %v", got, err)
		}
	})

	t.Run("a connection refused past the retries is transient", func(t *testing.T) {
		t.Parallel()
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		c := fast(New("http://"+addr, "k"))
		c.Retries = 1
		err := c.Metrics(context.Background(), "t1", &agentapi.MetricsRequest{Attempt: 1})
		if !IsTransient(err) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("an attempt that hangs times out and is retried", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // the server notices a gone client once the body is read
			if calls.Add(1) == 1 {
				<-r.Context().Done()
				return
			}
			_ = json.NewEncoder(w).Encode(agentapi.HeartbeatResponse{LeaseSeconds: 30})
		}))
		defer srv.Close()
		c := fast(New(srv.URL, "k"))
		c.Timeout = 100 * time.Millisecond
		resp, err := c.Heartbeat(context.Background(), &agentapi.HeartbeatRequest{})
		if err != nil || resp.LeaseSeconds != 30 || calls.Load() != 2 {
			t.Fatalf("%+v, %v, %d calls", resp, err, calls.Load())
		}
	})

	t.Run("a cancelled call is not retried", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}))
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := fast(New(srv.URL, "k")).Claim(ctx, &agentapi.ClaimRequest{WaitSeconds: 25})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for i := 0; i < 20; i++ {
			if d := b.Delay(n); d < want/2 || d > want {
				t.Fatalf("Delay(%d) = %s, want between %s and %s", n, d, want/2, want)
			}
		}
	}
}
