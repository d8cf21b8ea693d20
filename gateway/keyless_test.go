package gateway_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

// A provider whose key is not in the vault is a reason to fall back: the
// rule's self-hosted fallback answers, the provider is never called, and
// the log says so once for the provider, not once per call. An alias with
// no other target answers 503 naming the command that sets the key.
func TestAProviderWithNoKeyFallsBackToTheNextTarget(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Aliases = append(g.Aliases, &model.Alias{Name: "frontier-only", Rules: []model.AliasRule{
			{Targets: []model.Target{{Model: "frontier", Weight: 1}}}}})
	}, withoutProviderKey())

	for i := 0; i < 3; i++ {
		r := e.post("alice", "fraud", "chat/completions", chat("chat", ""))
		if r.status != 200 || r.json("model").Str != "backup-model" {
			t.Fatalf("call %d: %d %s; want the fallback's answer", i, r.status, r.body)
		}
	}
	for _, c := range e.up.calls() {
		if c.Model == "gpt-x" {
			t.Fatalf("the keyless provider was called: %+v", c)
		}
	}
	if n := strings.Count(e.logs.String(), "provider openai has no key in the vault"); n != 1 {
		t.Fatalf("the missing key was logged %d times, want once:\n%s", n, e.logs.String())
	}

	r := e.post("alice", "fraud", "chat/completions", chat("frontier-only", ""))
	if r.status != 503 || r.json("error.code").Str != "service_unavailable" ||
		!strings.Contains(r.json("error.message").Str, "klique secret set OPENAI_API_KEY --tenant") {
		t.Fatalf("an alias with only a keyless provider: %d %s", r.status, r.body)
	}
	if n := strings.Count(e.logs.String(), "provider openai has no key in the vault"); n != 1 {
		t.Fatalf("the missing key was logged %d times, want once", n)
	}
}
