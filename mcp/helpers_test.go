package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/mcp"
)

// metadataURL is what a 401 of the test server points to.
const metadataURL = "https://klique.test/.well-known/oauth-protected-resource/mcp"

// testBundle is an MCP server over a platform service with the example
// estate (platformtest), on a loopback HTTP server, and the keys of its
// users:
//
//	admin  platform admin
//	alice  member of ml-research
//	lena   lead of ml-research
//	vic    member of vision
//	val    viewer in ml-research
type testBundle struct {
	*platformtest.Bundle
	srv    *mcp.Server
	url    string
	keys   map[string]string
	models *fakeModels
}

// forEachStore runs fn against SQLite and, when KLIQUE_TEST_DATABASE_URL
// is set, against PostgreSQL.
func forEachStore(t *testing.T, fn func(t *testing.T, b *testBundle)) {
	t.Helper()
	platformtest.ForEachStore(t, func(t *testing.T, b *platformtest.Bundle) { fn(t, setup(t, b)) }, bundleOptions...)
}

// sqliteBundle is a bundle over SQLite, for tests that are not about the
// store.
func sqliteBundle(t *testing.T) *testBundle {
	t.Helper()
	return setup(t, platformtest.SQLite(t, bundleOptions...))
}

// bundleOptions give the service an event bus, and fail a test whose
// server logged an error: mistakes of callers are not server errors.
var bundleOptions = []platformtest.Option{platformtest.WithEvents(), platformtest.NoErrorLogs()}

func setup(t *testing.T, pb *platformtest.Bundle) *testBundle {
	t.Helper()
	b := &testBundle{Bundle: pb, keys: map[string]string{"admin": pb.AdminSecret}, models: &fakeModels{}}
	b.ApplyExample(t)
	for _, u := range []struct {
		name, group string
		role        model.Role
	}{
		{"alice", "ml-research", model.RoleMember},
		{"lena", "lead:ml-research", model.RoleMember},
		{"vic", "vision", model.RoleMember},
		{"val", "ml-research", model.RoleViewer},
	} {
		b.CreateUser(t, u.name, u.role, u.group)
		b.keys[u.name] = b.CreateKey(t, u.name, "")
	}
	b.srv = mcp.New(mcp.Options{Platforms: mcp.ServicePlatforms(b.Svc), Auth: b.Auth, Models: b.models, ResourceMetadataURL: metadataURL, Log: b.Logger})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the control plane's middleware gives every request.
		ctx := identity.WithRequestID(platform.WithRequestCache(r.Context()), "test-request")
		b.srv.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(hs.Close)
	b.url = hs.URL + "/mcp"
	return b
}

// client connects an MCP client as a user, over the protocol the client
// prefers (the newest), or pinned to version.
func (b *testBundle) client(t *testing.T, user string, version ...string) *client.Client {
	t.Helper()
	key, ok := b.keys[user]
	if !ok {
		t.Fatalf("no user %s", user)
	}
	return connect(t, b.url, key, version...)
}

func connect(t *testing.T, url, key string, version ...string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}),
		transport.WithHTTPTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if len(version) > 0 {
		opts = append(opts, client.WithProtocolVersion(version[0]))
	}
	c := client.NewClient(tr, opts...)
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
	return c
}

// toolNames lists the tools a client is offered.
func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// call calls a tool; a protocol error fails the test.
func call(t *testing.T, c *client.Client, tool string, args map[string]any) *mcpgo.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// text is the text content of a result.
func text(res *mcpgo.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ok calls a tool that must succeed and decodes its structured result.
func ok[T any](t *testing.T, c *client.Client, tool string, args map[string]any) T {
	t.Helper()
	res := call(t, c, tool, args)
	var out T
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", tool, args, text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: decode %s: %v", tool, raw, err)
	}
	// The text content is the same result, for clients without
	// structured content.
	var fromText T
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("%s: the text content is not the result as JSON: %v\n%s", tool, err, text(res))
	}
	return out
}

// refused calls a tool that must fail with a tool error and returns its
// message.
func refused(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	res := call(t, c, tool, args)
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded, want a tool error: %s", tool, args, text(res))
	}
	msg := text(res)
	for _, leak := range []string{"goroutine ", ".go:", "panic", "sql", "SQL"} {
		if strings.Contains(msg, leak) {
			t.Errorf("%s: the error holds %q: %s", tool, leak, msg)
		}
	}
	return msg
}

// pass runs one engine pass.
func (b *testBundle) pass(t *testing.T) {
	t.Helper()
	eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
	if _, err := eng.PassAll(context.Background()); err != nil {
		t.Fatalf("engine pass: %v", err)
	}
}

// worker is a worker daemon of pool onprem-k8s, driven by hand.
type worker struct {
	ctx context.Context
	id  string
	svc *platform.Service
}

func (b *testBundle) worker(t *testing.T) *worker {
	t.Helper()
	_, secret, err := b.Svc.CreateWorkerCredential(b.Admin, "onprem-k8s", "rack-1")
	if err != nil {
		t.Fatal(err)
	}
	wi, err := b.Svc.AuthenticateWorker(context.Background(), secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := identity.WithWorker(context.Background(), wi)
	reg, err := b.Svc.RegisterWorker(ctx, agentapi.RegisterRequest{Hostname: "gpu-host-1", GPUs: []agentapi.GPU{{Index: 0}, {Index: 1}},
		Version: "test", Mode: agentapi.ModeProcess})
	if err != nil {
		t.Fatal(err)
	}
	return &worker{ctx: ctx, id: reg.WorkerID, svc: b.Svc}
}

// run claims the next placed task, prints lines, reports metrics and ends
// it as state.
func (w *worker) run(t *testing.T, lines []string, metrics map[string]float64, state string) string {
	t.Helper()
	a, err := w.svc.ClaimTask(w.ctx, agentapi.ClaimRequest{WorkerID: w.id, FreeGPUs: 2})
	if err != nil || a == nil {
		t.Fatalf("claim: %+v, %v", a, err)
	}
	now := time.Now().UTC()
	var ll []agentapi.LogLine
	for _, l := range lines {
		ll = append(ll, agentapi.LogLine{At: now, Stream: agentapi.StreamStdout, Line: l})
	}
	if _, err := w.svc.AppendLogs(w.ctx, a.TaskID, agentapi.LogsRequest{Attempt: a.Attempt, Lines: ll}); err != nil {
		t.Fatal(err)
	}
	var ps []agentapi.MetricPoint
	for step := int64(1); step <= 2; step++ {
		for name, v := range metrics {
			ps = append(ps, agentapi.MetricPoint{At: now, Name: name, Value: v * float64(step), Step: step})
		}
	}
	if err := w.svc.AppendMetrics(w.ctx, a.TaskID, agentapi.MetricsRequest{Attempt: a.Attempt, Points: ps}); err != nil {
		t.Fatal(err)
	}
	if state != "" {
		if err := w.svc.FinishTask(w.ctx, a.TaskID, agentapi.FinishRequest{Attempt: a.Attempt, State: state,
			Outputs: []string{"s3://ml-research-artifacts/fraud-models/" + a.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	return a.TaskID
}

// fakeModels stands in for the gateway: it answers chat completions and
// records what it was sent.
type fakeModels struct {
	mu     sync.Mutex
	status int
	answer string
	calls  []modelCall
}

type modelCall struct {
	credential, project string
	body                map[string]any
}

func (f *fakeModels) ChatCompletion(_ context.Context, credential, project string, body []byte) (int, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	f.calls = append(f.calls, modelCall{credential: credential, project: project, body: m})
	if f.status != 0 && f.status != http.StatusOK {
		return f.status, []byte(f.answer), nil
	}
	return http.StatusOK, []byte(`{"id":"c1","object":"chat.completion","model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`), nil
}

func (f *fakeModels) refuse(status int, body string) {
	f.mu.Lock()
	f.status, f.answer = status, body
	f.mu.Unlock()
}

func (f *fakeModels) last() modelCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return modelCall{}
	}
	return f.calls[len(f.calls)-1]
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
