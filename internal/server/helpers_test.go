package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/server"
)

// adminKey is the platform admin's API key: the bootstrap token of every
// test server.
const adminKey = "klique-test-bootstrap-key-0123456789abcdefghijklmnop"

// metricsToken is every test server's KLIQUE_METRICS_TOKEN.
const metricsToken = "klique-test-metrics-token-0123456789"

// testServer is a running control plane and what the tests need to reach it.
type testServer struct {
	app *server.App
	url string
	cfg *config.Config
	// http is a client with a timeout, so that a hung server fails the test
	// instead of stalling the run.
	http *http.Client
	// stopped is set by tests that shut the server down (or close its
	// store) themselves; the cleanup then only makes sure it is down.
	stopped bool
	// logs holds what the server logged at warning level and above.
	logs *logBuffer
}

// logBuffer collects a server's log lines; the server writes from many
// goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// errors returns the ERROR lines logged since the last call, and forgets
// them.
func (l *logBuffer) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	l.b.Reset()
	return out
}

// serverOption changes the configuration of a test server before it starts.
type serverOption func(*config.Config)

// withDatabaseURL keeps the server's state in PostgreSQL.
func withDatabaseURL(u string) serverOption {
	return func(c *config.Config) { c.DatabaseURL = u }
}

// startServer starts a real control plane on a loopback port, with the
// platform admin's key set to adminKey, and shuts it down when t ends.
func startServer(t testing.TB, opts ...serverOption) *testServer {
	t.Helper()
	cfg := &config.Config{
		Listen:          "127.0.0.1:0",
		DataDir:         t.TempDir(),
		BootstrapToken:  adminKey,
		MetricsToken:    metricsToken,
		PublicURL:       "http://127.0.0.1",
		TokenTTL:        time.Hour,
		MaxBodyBytes:    1 << 20,
		LogFormat:       "text",
		LogLevel:        "error",
		ShutdownTimeout: 10 * time.Second,
	}
	for _, o := range opts {
		o(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &logBuffer{}
	var w io.Writer = logs
	if testing.Verbose() {
		w = io.MultiWriter(logs, os.Stderr)
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app, err := server.Start(ctx, cfg, log)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	ts := &testServer{app: app, url: app.URL(), cfg: cfg, http: &http.Client{Timeout: 30 * time.Second}, logs: logs}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil && !ts.stopped {
			t.Errorf("shut down server: %v", err)
		}
	})
	return ts
}

// gqlError is one entry of a GraphQL errors list.
type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// gqlResult is a GraphQL response as it came over the wire.
type gqlResult struct {
	Status int
	Header http.Header
	// Raw is the response body exactly as sent, for leak checks.
	Raw    string
	Data   map[string]any
	Errors []gqlError
}

// code is the extensions.code of the first error, or "" without errors.
func (r *gqlResult) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// codes lists the extensions.code of every error.
func (r *gqlResult) codes() []string {
	var out []string
	for _, e := range r.Errors {
		c, _ := e.Extensions["code"].(string)
		out = append(out, c)
	}
	return out
}

// message is the message of the first error.
func (r *gqlResult) message() string {
	if len(r.Errors) == 0 {
		return ""
	}
	return r.Errors[0].Message
}

// gqlRequest is one GraphQL call: who calls, what, and extra headers.
type gqlRequest struct {
	Credential string
	Query      string
	Vars       map[string]any
	Headers    map[string]string
}

// body is the JSON request body of r.
func (r gqlRequest) body(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"query": r.Query, "variables": r.Vars})
	if err != nil {
		t.Fatalf("encode request: %v", err)
	}
	return b
}

// gql sends one GraphQL request over HTTP and decodes the answer. It fails
// the test only when the answer is not GraphQL at all.
func (s *testServer) gql(t testing.TB, r gqlRequest) *gqlResult {
	t.Helper()
	return s.gqlBody(t, r.Credential, r.body(t), r.Headers)
}

// gqlBody posts a raw body to /graphql.
func (s *testServer) gqlBody(t testing.TB, credential string, body []byte, headers map[string]string) *gqlResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return s.doGQL(t, req)
}

func (s *testServer) doGQL(t testing.TB, req *http.Request) *gqlResult {
	t.Helper()
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	res := &gqlResult{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	var decoded struct {
		Data   map[string]any `json:"data"`
		Errors []gqlError     `json:"errors"`
	}
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatalf("%s %s answered %d with something other than JSON: %v\n%s", req.Method, req.URL.Path, resp.StatusCode, err, raw)
	}
	res.Data, res.Errors = decoded.Data, decoded.Errors
	return res
}

// mustGQL runs a request that must succeed and returns its data.
func (s *testServer) mustGQL(t testing.TB, credential, query string, vars map[string]any) map[string]any {
	t.Helper()
	res := s.gql(t, gqlRequest{Credential: credential, Query: query, Vars: vars})
	if len(res.Errors) > 0 || res.Status != http.StatusOK {
		t.Fatalf("GraphQL request failed with HTTP %d: %s\nquery: %s", res.Status, res.Raw, query)
	}
	return res.Data
}

// get sends a GET request with an optional credential.
func (s *testServer) get(t *testing.T, path, credential string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	return s.send(t, req)
}

// send performs req and returns the response with its body read.
func (s *testServer) send(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp, string(b)
}

// exchangeToken posts to /api/v1/auth/token with an Authorization header
// (sent as is) and returns the response and its body.
func (s *testServer) exchangeToken(t *testing.T, authorization string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/api/v1/auth/token", nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return s.send(t, req)
}

// path walks decoded JSON by object keys and array indexes ("pools",
// "edges", 0, "node", "name").
func path(v any, steps ...any) any {
	for _, s := range steps {
		switch k := s.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// str is path as a string ("" when missing).
func str(v any, steps ...any) string {
	s, _ := path(v, steps...).(string)
	return s
}

// nodes returns the nodes of a connection at the given path.
func nodes(v any, steps ...any) []map[string]any {
	edges, _ := path(v, append(steps, "edges")...).([]any)
	out := make([]map[string]any, 0, len(edges))
	for _, e := range edges {
		if n, ok := path(e, "node").(map[string]any); ok {
			out = append(out, n)
		}
	}
	return out
}

// names returns the value of key in each node of a connection.
func nodeValues(v any, key string, steps ...any) []string {
	var out []string
	for _, n := range nodes(v, steps...) {
		s, _ := n[key].(string)
		out = append(out, s)
	}
	return out
}

// readExample reads a file of the repository's examples folder.
func readExample(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatalf("read example: %v", err)
	}
	return string(b)
}

// noStackTrace fails t if a response body looks like it holds a Go stack
// trace or source location.
func noStackTrace(t *testing.T, body string) {
	t.Helper()
	for _, marker := range []string{"goroutine ", "runtime/debug", ".go:", "panic(", "runtime.gopanic"} {
		if strings.Contains(body, marker) {
			t.Errorf("response holds %q, which looks like a stack trace:\n%s", marker, body)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// noErrorLogs fails t if the server logged an ERROR since the last check:
// mistakes of callers are not server errors.
func noErrorLogs(t *testing.T, ts *testServer) {
	t.Helper()
	if lines := ts.logs.errors(); len(lines) > 0 {
		t.Errorf("the server logged errors:\n%s", strings.Join(lines, "\n"))
	}
}

// smallEstate is a minimal allocation model: one compute resource that the
// admin may send tasks to.
const smallEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - name: l4
    memoryGb: 24
pools:
  - name: lab
    kind: bare_metal
    capacity: 4
    gpuClass: l4
profiles:
  - name: one
    size: 1
    pools: [lab]
groups:
  - name: team
policies:
  - group: team
    reservation: 0
    limit: 4
    computeResources:
      - {name: 1 GPU, profile: one}
projects:
  - name: proj
`

func applyEstate(t *testing.T, ts *testServer, doc string) {
	t.Helper()
	ts.mustGQL(t, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": doc})
}

// newKey creates an API key for user as the admin and returns its secret
// and id.
func newKey(t *testing.T, ts *testServer, user string) (secret, id string) {
	t.Helper()
	d := ts.mustGQL(t, adminKey, `mutation($u: ID) { createAPIKey(input: {user: $u}) { secret apiKey { id } } }`, map[string]any{"u": user})
	return str(d, "createAPIKey", "secret"), str(d, "createAPIKey", "apiKey", "id")
}

// projectNames lists the tenant's projects as the admin sees them.
func projectNames(t *testing.T, ts *testServer) []string {
	t.Helper()
	return nodeValues(ts.mustGQL(t, adminKey, `{ projects(first: 500) { edges { node { name } } } }`, nil), "name", "projects")
}

const meQuery = `{ me { user { name } tenant { name } } }`
