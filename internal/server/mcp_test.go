package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/klique-ai/klique/internal/eventually"
)

// mcpClient connects mcp-go's client to the control plane's /mcp over real
// HTTP with a user's key.
func mcpClient(t *testing.T, ts *testServer, key string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(ts.url+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}),
		transport.WithHTTPTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start the MCP client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
		ClientInfo: mcpgo.Implementation{Name: "klique-server-test", Version: "1"}}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// mcpCall calls a tool and returns whether it was a tool error and its
// text; a protocol error fails the test.
func mcpCall(t *testing.T, c *client.Client, tool string, args map[string]any) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	var parts []string
	for _, ct := range res.Content {
		if tc, ok := ct.(mcpgo.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return res.IsError, strings.Join(parts, "\n")
}

// TestMCPTenantIsolation connects the other tenants' admin and member to
// /mcp and tries every tool on tenant default's task, groups, projects and
// aliases: each answer is empty or a refusal, and none holds an id or a
// name of tenant default's.
func TestMCPTenantIsolation(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	model := fakeModel(t)
	ts.mustGQL(t, f.admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`, map[string]any{"d": gatewayEstate(model.URL)})
	taskID := f.id(t, "task")

	// Alice sees her own task through MCP, so the cases below are refused
	// for who asks, not because the tools see nothing.
	alice := mcpClient(t, ts, f.alice)
	if isErr, out := mcpCall(t, alice, "get_task", map[string]any{"id": taskID}); isErr || !strings.Contains(out, "train-fraud") {
		t.Fatalf("alice's get_task of her own task: error %v, %s", isErr, out)
	}

	for _, who := range []struct {
		name string
		key  string
	}{{"the other tenant's admin", f.olga}, {"the other tenant's member", f.oscar}, {"the third tenant's admin", f.tess}} {
		t.Run(who.name, func(t *testing.T) {
			c := mcpClient(t, ts, who.key)
			cases := []struct {
				tool    string
				args    map[string]any
				refused bool
			}{
				{"list_compute_resources", nil, false},
				{"list_compute_resources", map[string]any{"group": "ml-research"}, true},
				{"list_tasks", nil, false},
				{"list_tasks", map[string]any{"project": "fraud-models"}, true},
				{"get_task", map[string]any{"id": taskID}, true},
				{"get_task_logs", map[string]any{"id": taskID, "tail": 10}, true},
				{"get_task_metrics", map[string]any{"id": taskID}, true},
				{"abort_task", map[string]any{"id": taskID}, true},
				{"clone_task", map[string]any{"id": taskID, "parameterOverrides": map[string]any{"lr": "0.2"}}, true},
				{"compare_tasks", map[string]any{"ids": []any{taskID, taskID + "x"}}, true},
				{"get_usage", nil, false},
				{"get_usage", map[string]any{"project": "fraud-models"}, true},
				{"get_usage", map[string]any{"group": "ml-research"}, true},
				{"list_model_aliases", nil, false},
				{"list_model_aliases", map[string]any{"project": "fraud-models"}, true},
				{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hi"}, true},
				{"enqueue_task", map[string]any{"name": "intruder", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"true"}}, true},
			}
			for _, tc := range cases {
				isErr, out := mcpCall(t, c, tc.tool, tc.args)
				if tc.refused && !isErr && !strings.Contains(out, "not found") {
					t.Errorf("%s(%v) was not refused: %s", tc.tool, tc.args, out)
				}
				for _, secret := range append(f.tenantSecrets, "train-fraud", "fraud-models", "ml-research", "gpu-host-7", "onprem-k8s") {
					if strings.Contains(out, secret) && !argsHold(tc.args, secret) {
						t.Errorf("%s(%v) answers with %q of tenant default: %s", tc.tool, tc.args, secret, out)
					}
				}
			}
		})
	}

	// Nothing moved: alice's task is still placed, not aborted or cloned.
	d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { status } tasks { edges { node { id } } } }`, map[string]any{"id": taskID})
	if s := str(d, "task", "status"); s != "PLACED" {
		t.Errorf("alice's task is %s after the other tenants' calls, want PLACED", s)
	}
	if n := len(nodes(d, "tasks")); n != 1 {
		t.Errorf("alice sees %d tasks after the other tenants' calls, want 1", n)
	}
}

// argsHold reports whether the caller itself sent s, which an answer may
// then repeat (a refusal naming what was asked for).
func argsHold(args map[string]any, s string) bool {
	raw, _ := json.Marshal(args)
	return strings.Contains(string(raw), s)
}

// TestMCPCallModelIsMeteredAndStopsAtTheBudget calls a model alias through
// the MCP tool against the control plane's real gateway: the call lands on
// the ledger under alice, and once the project's token budget is used the
// tool refuses in words that name the budget.
func TestMCPCallModelIsMeteredAndStopsAtTheBudget(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	model := fakeModel(t)
	// The gateway holds back the most a call may use (its input and
	// maxTokens) before it runs: 25 tokens let one call of 9 + 5 through,
	// and after it used 10, not a second one.
	estate := strings.Replace(gatewayEstate(model.URL), "tokens: 1000000", "tokens: 25", 1)
	ts.mustGQL(t, f.admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`, map[string]any{"d": estate})

	alice := mcpClient(t, ts, f.alice)
	isErr, out := mcpCall(t, alice, "call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hello", "maxTokens": 5})
	if isErr || !strings.Contains(out, `"content":"hi"`) || !strings.Contains(out, `"inputTokens":9`) {
		t.Fatalf("the first call: error %v, %s", isErr, out)
	}
	// The ledger is written in batches: wait for the call to be on it.
	var usage string
	if !eventually.Poll(10*time.Second, func() bool {
		_, usage = mcpCall(t, alice, "get_usage", map[string]any{"project": "fraud-models", "mine": true})
		return strings.Contains(usage, `"calls":1,"inputTokens":9,"outputTokens":1`)
	}) {
		t.Fatalf("the MCP model call is not on alice's ledger: %s", usage)
	}
	isErr, out = mcpCall(t, alice, "call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hello", "maxTokens": 5})
	if !isErr || !strings.Contains(out, "token budget") || !strings.Contains(out, "fraud-models") || !strings.Contains(out, "resets") {
		t.Fatalf("a call past the project's token budget: error %v, %q; want a refusal naming the budget and its reset", isErr, out)
	}

	// A compute resource not open to the caller's group is refused in
	// words that name it and the group.
	victor := mcpClient(t, ts, f.victor)
	isErr, out = mcpCall(t, victor, "enqueue_task", map[string]any{"name": "x", "project": "vision-detect", "computeResource": "multi-node training", "command": []any{"true"}})
	if !isErr || !strings.Contains(out, "'multi-node training' is not open to group vision") {
		t.Fatalf("enqueue on a compute resource not open to victor's group: error %v, %q", isErr, out)
	}
}

// TestMCPNeedsACredential checks the 401 of /mcp and the protected-resource
// metadata it points to, on the real server's routes.
func TestMCPNeedsACredential(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	resp, body := ts.send(t, mustRequest(t, http.MethodPost, ts.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	want := `Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("/mcp without a credential: %d, WWW-Authenticate %q; want 401 and %q (%s)", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want, body)
	}
	noStackTrace(t, body)
	resp, body = ts.get(t, "/.well-known/oauth-protected-resource/mcp", "")
	var md struct {
		Resource               string   `json:"resource"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
	}
	if err := json.Unmarshal([]byte(body), &md); resp.StatusCode != http.StatusOK || err != nil || md.Resource != "http://127.0.0.1/mcp" {
		t.Fatalf("protected-resource metadata: %d %s", resp.StatusCode, body)
	}
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}
