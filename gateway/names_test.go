package gateway_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// withAgentNames is standard with vendor model names on two aliases, a
// rate limit and a guardrail on chat, so that a call by an extra name can
// be seen governed as a call by the alias's own name.
func withAgentNames(g *model.Gateway, up string) {
	standard(g, up)
	for _, a := range g.Aliases {
		switch a.Name {
		case "chat":
			a.Names = []string{"claude-sonnet-4-5", "gpt-5-codex"}
			a.Guardrails = model.Guardrails{Deny: []string{`(?i)forbidden-word`}}
		case "ml-only":
			a.Names = []string{"claude-opus-4-1"}
		}
	}
	g.RateLimits = []*model.RateLimit{{Scope: model.RateLimitAlias, Name: "chat", RequestsPerMinute: 3}}
}

func TestACallByAnExtraNameIsACallToItsAlias(t *testing.T) {
	e := newEnv(t, withAgentNames)
	ctx := context.Background()
	ask := func(c *openai.Client, name, text string) (openai.ChatCompletionResponse, error) {
		return c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: name, MaxCompletionTokens: 20,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}}})
	}
	alice, vic := e.client("alice", "fraud"), e.client("vic", "detect")

	// The alias's rules decide by the caller's groups, whatever name the
	// call asks for: alice (ml) reaches the frontier model, vic the llama.
	if r, err := ask(alice, "claude-sonnet-4-5", "hello"); err != nil || r.Choices[0].Message.Content != "hello from gpt-x" {
		t.Fatalf("alice by claude-sonnet-4-5: %+v %v", r, err)
	}
	if r, err := ask(vic, "gpt-5-codex", "hello"); err != nil || r.Choices[0].Message.Content != "hello from meta/llama" {
		t.Fatalf("vic by gpt-5-codex: %+v %v", r, err)
	}
	if r, err := ask(vic, "chat", "hello"); err != nil || r.Choices[0].Message.Content != "hello from meta/llama" {
		t.Fatalf("vic by chat: %+v %v", r, err)
	}
	if seen := e.up.calls(); len(seen) != 3 || seen[0].Model != "gpt-x" || seen[1].Model != "meta/llama" {
		t.Fatalf("upstream saw %+v: the upstream gets the model's own id", seen)
	}

	var apiErr *openai.APIError
	// The alias's guardrails hold for its extra names.
	if _, err := ask(alice, "claude-sonnet-4-5", "say forbidden-word"); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Code != "guardrail_blocked" {
		t.Fatalf("a denied input by an extra name: %v", err)
	}
	// Its entitlements: vic is not in ml, whichever name he asks for.
	if _, err := ask(vic, "claude-opus-4-1", "hello"); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 403 || apiErr.Code != "model_not_allowed" {
		t.Fatalf("vic by claude-opus-4-1 (ml-only): %v", err)
	}
	// Its rate limit: the calls by every name share chat's 3 a minute (a
	// call blocked at the input reserves nothing), so the fourth is refused.
	if _, err := ask(alice, "gpt-5-codex", "hello"); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("the fourth call to chat by any name: %v", err)
	}
	// An unknown name is still unknown.
	if _, err := ask(vic, "claude-haiku-4-5", "hello"); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Fatalf("a name no alias answers to: %v", err)
	}

	// The ledger records the alias, never the name asked for.
	calls := e.ledger(5)
	for _, c := range calls {
		if c.Alias != "chat" {
			t.Fatalf("a call to chat is on the ledger under %q: %s", c.Alias, dump(calls))
		}
	}
	if calls[0].UserName != "alice" || calls[0].Model != "frontier" || calls[1].UserName != "vic" || calls[1].Model != "llama" ||
		calls[3].Outcome != model.CallBlocked || calls[4].Outcome != model.CallRateLimited {
		t.Fatalf("ledger %s", dump(calls))
	}
}

func TestModelsListsWhatTheCallerMayUseWithExtraNames(t *testing.T) {
	e := newEnv(t, withAgentNames)
	ids := func(user, project string) []string {
		t.Helper()
		models, err := e.client(user, project).ListModels(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range models.Models {
			out = append(out, m.ID)
		}
		return out
	}
	// vic (vision) may not use ml-only: neither it nor its extra name is
	// listed to him.
	if got, want := ids("vic", "detect"), []string{"chat", "claude-sonnet-4-5", "gpt-5-codex", "embed"}; !slices.Equal(got, want) {
		t.Errorf("vic's models %q, want %q", got, want)
	}
	if got, want := ids("alice", "fraud"), []string{"chat", "claude-sonnet-4-5", "gpt-5-codex", "embed", "ml-only", "claude-opus-4-1"}; !slices.Equal(got, want) {
		t.Errorf("alice's models %q, want %q", got, want)
	}
}

// An estate file (klique apply) gives an alias its names, and a file or a
// put that would make a name mean two aliases is refused whole.
func TestAliasNamesAreSetByTheEstateAndRefusalsChangeNothing(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		for _, m := range g.Models {
			m.MaxOutputTokens = 1000 // standard's embedder leaves it out, which the estate's rules refuse
		}
	})
	const header = "apiVersion: klique/v1\nkind: Estate\ngateway:\n  aliases:\n"
	if _, err := e.svc.ApplyEstate(e.admin, []byte(header+`
    - {name: chat, names: [claude-sonnet-4-5], rules: [{targets: [{model: llama}]}]}
`), false); err != nil {
		t.Fatal(err)
	}
	ask := func(name string) error {
		_, err := e.client("vic", "detect").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: name,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hello"}}})
		return err
	}
	if err := ask("claude-sonnet-4-5"); err != nil {
		t.Fatalf("a call by the name the file gave: %v", err)
	}

	before, err := e.svc.ExportEstate(e.admin)
	must(t, err)
	if !strings.Contains(string(before), "names:") || !strings.Contains(string(before), "claude-sonnet-4-5") {
		t.Fatalf("the export lacks the names:\n%s", before)
	}
	_, err = e.svc.ApplyEstate(e.admin, []byte(header+`
    - {name: ml-only, names: [gpt-5-codex], rules: [{targets: [{model: llama}]}]}
    - {name: embed, names: [claude-sonnet-4-5, "bad name"], rules: [{targets: [{model: embedder}]}]}
`), false)
	if err == nil || !strings.Contains(err.Error(), `name "claude-sonnet-4-5" is already a name of alias "chat"`) || !strings.Contains(err.Error(), `"bad name" must be`) {
		t.Fatalf("a file giving chat's name to embed: %v", err)
	}
	_, err = e.svc.PutLLMAlias(e.admin, platform.LLMAliasInput{Name: "embed", Names: []string{"chat"},
		Rules: []*platform.LLMAliasRuleInput{{Targets: []*platform.LLMTargetInput{{Model: "embedder"}}}}})
	if platform.ErrorCode(err) != platform.CodeInvalid || !strings.Contains(err.Error(), `name "chat" is the name of alias "chat"`) {
		t.Fatalf("a put giving embed the name chat: %v", err)
	}
	after, err := e.svc.ExportEstate(e.admin)
	must(t, err)
	if string(after) != string(before) {
		t.Fatalf("a refused change changed the estate:\n%s\n---\n%s", before, after)
	}
	var apiErr *openai.APIError
	if err := ask("gpt-5-codex"); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 {
		t.Fatalf("a name of a refused file answers: %v", err)
	}
	if res, err := e.svc.ApplyEstate(e.admin, after, false); err != nil || len(res.Changes) != 0 {
		t.Fatalf("re-applying the export: %+v %v", res, err)
	}
}
