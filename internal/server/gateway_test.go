package server_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/config"
)

// fakeModel answers chat completions as a vLLM server does.
func fakeModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// gatewayEstate adds a route to the fixture's model server and an alias to
// the example estate's groups and projects.
func gatewayEstate(modelURL string) string {
	return fmt.Sprintf(`apiVersion: klique/v1
kind: Estate
gateway:
  routes:
    - {name: local, endpoints: ["%s/v1"], timeout: 5s}
  models:
    - {name: llama, route: local, inputPrice: 0.20, outputPrice: 0.20}
  aliases:
    - name: chat
      rules:
        - {groups: [ml-research], targets: [{model: llama}]}
  budgets:
    - {project: fraud-models, period: month, tokens: 1000000}
`, modelURL)
}

func gatewayCall(t *testing.T, url, key, project string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Klique-Project", project)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestTheGatewayIsServedByTheControlPlane configures the gateway through
// the estate file over GraphQL, calls it at /v1 and on its own listener,
// and checks that revoking the caller's key stops the next call at once,
// though the gateway caches credential checks.
func TestTheGatewayIsServedByTheControlPlane(t *testing.T) {
	t.Parallel()
	model := fakeModel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gwAddr := ln.Addr().String()
	ln.Close()
	ts := startServer(t, func(c *config.Config) { c.GatewayListen = gwAddr })
	f := newFixture(t, ts)
	ts.mustGQL(t, f.admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`, map[string]any{"d": gatewayEstate(model.URL)})

	if code, body := gatewayCall(t, ts.url, f.alice, "fraud-models"); code != 200 || !strings.Contains(body, `"content":"hi"`) {
		t.Fatalf("/v1 on the control plane: %d %s", code, body)
	}
	if code, body := gatewayCall(t, "http://"+gwAddr, f.alice, "fraud-models"); code != 200 {
		t.Fatalf("/v1 on KLIQUE_GATEWAY_LISTEN: %d %s", code, body)
	}
	// Both calls' time in the gateway outside the model server is in
	// /metrics.
	_, metrics := ts.get(t, "/metrics", metricsToken)
	if !strings.Contains(metrics, "\nklique_gateway_overhead_seconds_count 2\n") {
		t.Errorf("/metrics after two gateway calls lacks klique_gateway_overhead_seconds_count 2:\n%s", grepLines(metrics, "klique_gateway_overhead"))
	}
	// Victor's group has no rule of the alias.
	if code, body := gatewayCall(t, ts.url, f.victor, "vision-detect"); code != 403 || !strings.Contains(body, "model_not_allowed") {
		t.Fatalf("victor: %d %s", code, body)
	}
	// The credential check is cached, but a revocation through this
	// replica takes effect on the next call.
	keys := ts.mustGQL(t, f.alice, `{ apiKeys { edges { node { id } } } }`, nil)
	edges, _ := path(keys, "apiKeys", "edges").([]any)
	if len(edges) == 0 {
		t.Fatalf("alice's keys: %v", keys)
	}
	for _, k := range edges {
		ts.mustGQL(t, f.alice, `mutation($id: ID!) { revokeAPIKey(id: $id) { revokedAt } }`, map[string]any{"id": str(k, "node", "id")})
	}
	if code, body := gatewayCall(t, ts.url, f.alice, "fraud-models"); code != 401 || !strings.Contains(body, "invalid_api_key") {
		t.Fatalf("after revoking: %d %s", code, body)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
