package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

func TestProbes(t *testing.T) {
	t.Parallel()
	ts := startServer(t)

	t.Run("healthz answers 200 ok", func(t *testing.T) {
		resp, body := ts.get(t, "/healthz", "")
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("GET /healthz = %d %q, want 200 ok", resp.StatusCode, body)
		}
	})
	t.Run("readyz answers 200 while the store answers", func(t *testing.T) {
		resp, body := ts.get(t, "/readyz", "")
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "ready" {
			t.Errorf("GET /readyz = %d %q, want 200 ready", resp.StatusCode, body)
		}
	})
	t.Run("metrics count requests by route and status", func(t *testing.T) {
		ts.get(t, "/healthz", "")
		resp, body := ts.get(t, "/metrics", metricsToken)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics = %d", resp.StatusCode)
		}
		for _, want := range []string{
			"# TYPE klique_http_requests_total counter",
			`klique_http_requests_total{code="200",route="healthz"}`,
			`klique_http_requests_total{code="200",route="readyz"}`,
			"klique_http_request_duration_seconds_bucket",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
	t.Run("every answer carries a request id, and a sane one sent is kept", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/healthz", nil)
		req.Header.Set("X-Request-Id", "trace-123")
		resp, _ := ts.send(t, req)
		if got := resp.Header.Get("X-Request-Id"); got != "trace-123" {
			t.Errorf("X-Request-Id = %q, want trace-123", got)
		}
		req, _ = http.NewRequest(http.MethodGet, ts.url+"/healthz", nil)
		req.Header.Set("X-Request-Id", "bad id\twith spaces")
		resp, _ = ts.send(t, req)
		if got := resp.Header.Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
			t.Errorf("X-Request-Id = %q, want a fresh id instead of the malformed one", got)
		}
	})
	t.Run("an unknown path is a JSON 404 that points to the API", func(t *testing.T) {
		resp, body := ts.get(t, "/nope", "")
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"NOT_FOUND"`) || !strings.Contains(body, "/graphql") {
			t.Errorf("GET /nope = %d %s", resp.StatusCode, body)
		}
	})
	t.Run("graphiql serves a page", func(t *testing.T) {
		resp, body := ts.get(t, "/graphiql", "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(strings.ToLower(body), "<html") {
			t.Errorf("GET /graphiql = %d, want an HTML page", resp.StatusCode)
		}
	})
}

func TestReadyzWithClosedStore(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.stopped = true
	if err := ts.app.Store.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
	resp, body := ts.get(t, "/readyz", "")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz with a closed store = %d %s, want 503", resp.StatusCode, body)
	}
	if !strings.Contains(body, `"UNAVAILABLE"`) {
		t.Errorf("GET /readyz body = %s, want code UNAVAILABLE", body)
	}
	noStackTrace(t, body)
	if resp, _ := ts.get(t, "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz with a closed store = %d, want 200: the process is alive", resp.StatusCode)
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	big := func() []byte {
		b, _ := json.Marshal(map[string]any{
			"query":     `mutation($d: String) { createProject(input: {name: "huge", description: $d}) { project { id } } }`,
			"variables": map[string]any{"d": strings.Repeat("x", int(ts.cfg.MaxBodyBytes)+1024)},
		})
		return b
	}
	check := func(t *testing.T, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status = %d, want 413: %.300s", resp.StatusCode, body)
		}
		if !strings.Contains(body, "PAYLOAD_TOO_LARGE") || !strings.Contains(body, fmt.Sprint(ts.cfg.MaxBodyBytes)) {
			t.Errorf("body = %.300s, want code PAYLOAD_TOO_LARGE and the limit in bytes", body)
		}
		if len(body) > 2000 {
			t.Errorf("the refusal is %d bytes long; it must not echo the request", len(body))
		}
		if got := projectNames(t, ts); len(got) != 0 {
			t.Errorf("projects after a refused request: %v", got)
		}
	}

	t.Run("a body with a Content-Length over the limit is refused with 413", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/graphql", bytes.NewReader(big()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, body := ts.send(t, req)
		check(t, resp, body)
	})
	t.Run("a chunked body over the limit is refused with 413", func(t *testing.T) {
		// A reader of unknown length makes the client send the body chunked,
		// without a Content-Length the server could check up front.
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/graphql", io.MultiReader(bytes.NewReader(big())))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if req.ContentLength != 0 {
			t.Fatalf("the request has a Content-Length; the case needs a chunked body")
		}
		resp, body := ts.send(t, req)
		check(t, resp, body)
	})
	t.Run("a body under the limit goes through", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation($d: String) { createProject(input: {name: "fits", description: $d}) { project { name } } }`,
			Vars: map[string]any{"d": strings.Repeat("y", 200)}})
		if len(res.Errors) > 0 {
			t.Errorf("a small request failed: %s", res.Raw)
		}
	})
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.stopped = true
	started, release := make(chan struct{}), make(chan struct{})
	ts.app.Handler.Mux().HandleFunc("GET /test/slow", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = w.Write([]byte("finished"))
	})

	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := ts.http.Get(ts.url + "/test/slow")
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- answer{status: resp.StatusCode, body: string(b), err: err}
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached its handler")
	}

	var wg sync.WaitGroup
	var shutdownErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownErr = ts.app.Shutdown(ctx)
	}()

	// New connections are refused while the old request is still running.
	eventually.Within(t, 5*time.Second, "the server to refuse new requests after Shutdown was called", func() bool {
		resp, err := (&http.Client{Timeout: time.Second}).Get(ts.url + "/healthz")
		if err != nil {
			return true
		}
		resp.Body.Close()
		return false
	})

	close(release)
	a := <-done
	if a.err != nil || a.status != http.StatusOK || a.body != "finished" {
		t.Errorf("the request in flight got %d %q %v, want 200 finished", a.status, a.body, a.err)
	}
	wg.Wait()
	if shutdownErr != nil {
		t.Errorf("Shutdown: %v", shutdownErr)
	}
}
