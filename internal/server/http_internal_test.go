package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A request whose client went away is recorded as 499 (client closed
// request), in the log line and the metrics, not as the 500 its cancelled
// work would have answered; a real failure stays a 500.
func TestClientCancellationIsRecordedAs499(t *testing.T) {
	var logs bytes.Buffer
	h := &Handler{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), metrics: newMetrics(), mux: http.NewServeMux()}
	h.route("GET /cancelled", "cancelled", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What a handler does when its store call fails because the
		// client went away.
		writePlatformError(w, r, fmt.Errorf("list tasks: %w", r.Context().Err()))
	}))
	h.route("GET /silent", "silent", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A handler that gives up without writing, or whose answer a
		// generic error path turned into a 500.
		http.Error(w, "internal error", http.StatusInternalServerError)
	}))
	h.route("GET /failed", "failed", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writePlatformError(w, r, fmt.Errorf("list tasks: %w", context.DeadlineExceeded))
	}))

	for _, c := range []struct {
		route  string
		cancel bool
		want   string
	}{
		{"cancelled", true, "499"},
		{"silent", true, "499"},
		{"failed", false, "500"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		if c.cancel {
			cancel()
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/"+c.route, nil))
		cancel()
		if n := httpCount(t, h.metrics, c.route, c.want); n != 1 {
			t.Errorf("%s: klique_http_requests_total{code=%q} = %v, want 1", c.route, c.want, n)
		}
		line := ""
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "path=/"+c.route+" ") {
				line = l
			}
		}
		if !strings.Contains(line, "status="+c.want) {
			t.Errorf("%s: log line %q, want status=%s", c.route, line, c.want)
		}
		if c.want == "499" && strings.Contains(line, "level=WARN") {
			t.Errorf("%s: a client's cancellation is logged as a warning: %s", c.route, line)
		}
	}
}

// httpCount reads klique_http_requests_total{route, code} from m.
func httpCount(t *testing.T, m *metrics, route, code string) float64 {
	t.Helper()
	mfs, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "klique_http_requests_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}
