package server_test

import (
	"strings"
	"testing"
)

// The log line of a gateway call the server answers 503 names the caller
// and the project, though the gateway authenticates its callers itself.
func TestTheGatewaysLogLineNamesTheCaller(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	ts.mustGQL(t, f.admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`, map[string]any{"d": `apiVersion: klique/v1
kind: Estate
gateway:
  providers:
    - {name: openai, baseUrl: "http://127.0.0.1:1/v1", keySecret: OPENAI_API_KEY}
  models:
    - {name: gpt-4o, provider: openai}
  aliases:
    - {name: chat, rules: [{targets: [{model: gpt-4o}]}]}
`})
	if code, body := gatewayCall(t, ts.url, f.alice, "fraud-models"); code != 503 {
		t.Fatalf("a call to a provider with no key: %d %s", code, body)
	}
	ts.logs.mu.Lock()
	logged := ts.logs.b.String()
	ts.logs.mu.Unlock()
	line := grepLines(logged, `msg="http request"`)
	if !strings.Contains(line, "status=503") || !strings.Contains(line, "user=alice") || !strings.Contains(line, "project=fraud-models") {
		t.Fatalf("the 503's log line does not name user alice and project fraud-models:\n%s", logged)
	}
}
