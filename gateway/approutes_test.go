package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// A route whose endpoints are app instances has none while no instance is
// ready: a call to an alias on it gets a 503 on every door, naming the
// route, saying it has no running endpoint and how to launch one, and its
// ledger row names the route; an alias whose rule falls back to another
// target takes the fallback instead.
func TestARouteWithNoReadyInstanceAnswers503OnEveryDoor(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Routes = append(g.Routes, &model.Route{Name: "llama-70b", App: "vllm", Timeout: 2 * time.Second})
		g.Models = append(g.Models, &model.LLMModel{Name: "served", Route: "llama-70b", Upstream: "meta/served", MaxOutputTokens: 100, Currency: "USD"})
		g.Aliases = append(g.Aliases,
			&model.Alias{Name: "onprem", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "served", Weight: 1}}}}},
			&model.Alias{Name: "onprem-fb", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "served", Weight: 1}}, Fallbacks: []string{"backup"}}}})
	})
	doors := []struct{ path, body, msg string }{
		{"chat/completions", chat("onprem", ""), "error.message"},
		{"chat/completions", chat("onprem", `,"stream":true`), "error.message"},
		{"messages", `{"model":"onprem","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "error.message"},
		{"responses", `{"model":"onprem","input":"hi"}`, "error.message"},
	}
	for _, d := range doors {
		r := e.post("alice", "fraud", d.path, d.body)
		msg := r.json(d.msg).Str
		if r.status != 503 || !strings.Contains(msg, "route llama-70b has no running endpoint") ||
			!strings.Contains(msg, "'klique app launch vllm --route llama-70b") {
			t.Fatalf("%s %s: %d %s, want a 503 naming the route and how to launch an instance", d.path, d.body, r.status, r.body)
		}
	}
	for _, c := range e.ledger(len(doors)) {
		if c.Status != 503 || c.Target != "llama-70b" || c.Outcome != model.CallUpstreamError {
			t.Fatalf("a refused call on the ledger: %s", dump(c))
		}
	}
	if len(e.up.calls()) != 0 {
		t.Fatalf("calls went upstream: %+v", e.up.calls())
	}
	r := e.post("alice", "fraud", "chat/completions", chat("onprem-fb", ""))
	if r.status != 200 || r.json("model").Str != "backup-model" {
		t.Fatalf("with a fallback: %d %s", r.status, r.body)
	}
}
