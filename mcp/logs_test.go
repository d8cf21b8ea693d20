package mcp_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/mcp"
)

// allLogs records every log record, debug included, as "LEVEL message".
type allLogs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *allLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *allLogs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return nil
}
func (l *allLogs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *allLogs) WithGroup(string) slog.Handler      { return l }

func (l *allLogs) all() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.records...)
}

// An MCP SDK client asks for the notification stream (GET) after every
// initialize. The server has none to offer and says so with 405, which the
// SDK takes in its stride: that is routine, and must not put an INFO line
// in the server's log for every connection.
func TestAnSDKConnectionLogsNoRefusedStreamAtInfo(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	logs := &allLogs{}
	srv := mcp.New(mcp.Options{Platforms: mcp.ServicePlatforms(b.Svc), Auth: b.Auth, Models: b.models, ResourceMetadataURL: metadataURL, Log: slog.New(logs)})
	gets := make(chan int, 16)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := identity.WithRequestID(platform.WithRequestCache(r.Context()), "test-request")
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		srv.ServeHTTP(rec, r.WithContext(ctx))
		if r.Method == http.MethodGet {
			gets <- rec.status
		}
	}))
	t.Cleanup(hs.Close)

	// The SDK's streamable HTTP transport, listening for notifications as
	// the MCP SDKs of other languages always do.
	// The option is deprecated for the newest protocol version, which
	// dropped the GET stream; SDKs on earlier versions still open it.
	//lint:ignore SA1019 the test is about the GET the SDKs still send
	tr, err := transport.NewStreamableHTTP(hs.URL+"/mcp", transport.WithContinuousListening(),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + b.keys["alice"]}),
		transport.WithHTTPTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
		ClientInfo: mcpgo.Implementation{Name: "klique-test", Version: "1"}}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if names := toolNames(t, c); len(names) == 0 {
		t.Fatal("the connection lists no tools")
	}
	select {
	case status := <-gets:
		if status != http.StatusMethodNotAllowed {
			t.Fatalf("the SDK's GET got %d, want 405 (no stream)", status)
		}
	case <-ctx.Done():
		t.Fatal("the SDK client never asked for the notification stream: the test proves nothing")
	}
	for _, r := range logs.all() {
		msg := strings.ToLower(r.Message)
		if r.Level >= slog.LevelInfo && (strings.Contains(msg, "get") || strings.Contains(msg, "stream")) {
			t.Errorf("a connection logged at %s: %q", r.Level, r.Message)
		}
	}
}

// statusRecorder notes the status a handler answered with. It passes
// Flush on, which the streamable HTTP transport needs.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
