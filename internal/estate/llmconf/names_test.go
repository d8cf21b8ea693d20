package llmconf_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
)

// namesDoc adds a second alias, code, and gives both aliases the vendor
// model names coding agents ask for.
const namesDoc = estatetest.Header + `
gateway:
  aliases:
    - name: chat
      names: [claude-sonnet-4-5, claude-opus-4-1]
      rules: [{targets: [{model: llama-3.1-70b}]}]
    - name: code
      names: [gpt-5-codex, openai/gpt-5]
      rules: [{targets: [{model: gpt-4o}]}]
`

func withNames(t *testing.T) *estate.Estate {
	t.Helper()
	e := estatetest.Apply(t, withGateway(t), namesDoc)
	if err := e.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return e
}

func TestAliasNames(t *testing.T) {
	t.Parallel()

	t.Run("an alias's names survive export, parse and apply with no changes", func(t *testing.T) {
		t.Parallel()
		e := withNames(t)
		if a := llmconf.Alias(&e.Gateway, "chat"); !slices.Equal(a.Names, []string{"claude-sonnet-4-5", "claude-opus-4-1"}) {
			t.Fatalf("chat's names %q", a.Names)
		}
		out, err := e.Export().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "names:") || !strings.Contains(string(out), "- gpt-5-codex") {
			t.Fatalf("export lacks the names:\n%s", out)
		}
		if cs := estate.Diff(e, estatetest.Apply(t, e, string(out))); len(cs) > 0 {
			t.Fatalf("export, parse and apply changed:%s\n%s", estatetest.ChangeList(cs), out)
		}
		if cs := estate.Diff(withGateway(t), e); len(cs) != 2 || cs[0].String() != "update llm alias chat (description, names, rules, guardrails)" || cs[1].String() != "create llm alias code" {
			t.Fatalf("changes:%s", estatetest.ChangeList(cs))
		}
	})

	t.Run("an alias described without names loses them, as any field left out", func(t *testing.T) {
		t.Parallel()
		e := estatetest.Apply(t, withNames(t), estatetest.Header+`
gateway:
  aliases:
    - {name: code, rules: [{targets: [{model: gpt-4o}]}]}
`)
		if a := llmconf.Alias(&e.Gateway, "code"); a.Names != nil {
			t.Fatalf("code's names %q", a.Names)
		}
	})

	t.Run("every name resolves to its alias in one index", func(t *testing.T) {
		t.Parallel()
		e := withNames(t)
		idx := llmconf.AliasIndex(&e.Gateway)
		for name, want := range map[string]string{"chat": "chat", "claude-opus-4-1": "chat", "code": "code", "openai/gpt-5": "code"} {
			if a := idx[name]; a == nil || a.Name != want {
				t.Errorf("%s resolves to %+v, want alias %s", name, a, want)
			}
		}
		if len(idx) != 6 {
			t.Errorf("index of %d names, want 6", len(idx))
		}
	})

	tests := []struct {
		name   string
		mutate func(g *model.Gateway)
		want   []string
	}{
		{"a name used by two aliases", func(g *model.Gateway) { llmconf.Alias(g, "code").Names[1] = "claude-opus-4-1" },
			[]string{`alias "code"`, `name "claude-opus-4-1" is already a name of alias "chat": give each name to one alias`}},
		{"a name that is another alias's name", func(g *model.Gateway) { llmconf.Alias(g, "code").Names[0] = "chat" },
			[]string{`alias "code"`, `name "chat" is the name of alias "chat"`, "remove it here or rename that alias"}},
		{"an alias named as another alias's extra name", func(g *model.Gateway) {
			llmconf.PutAlias(g, &model.Alias{Name: "gpt-5-codex", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "gpt-4o", Weight: 1}}}}})
		}, []string{`alias "code"`, `name "gpt-5-codex" is the name of alias "gpt-5-codex"`}},
		{"the alias's own name among its names", func(g *model.Gateway) { llmconf.Alias(g, "chat").Names[0] = "chat" },
			[]string{`alias "chat"`, `name "chat" is the alias's own name`}},
		{"a name listed twice", func(g *model.Gateway) { a := llmconf.Alias(g, "chat"); a.Names[1] = a.Names[0] },
			[]string{`alias "chat"`, `lists name "claude-sonnet-4-5" twice`}},
		{"an empty name", func(g *model.Gateway) { llmconf.Alias(g, "chat").Names[1] = "" },
			[]string{`alias "chat"`, "name 2 is empty", "such as claude-sonnet-4-5"}},
		{"a name with a space", func(g *model.Gateway) { llmconf.Alias(g, "chat").Names[0] = "Claude Sonnet" },
			[]string{`alias "chat"`, `name 1 "Claude Sonnet" must be 1 to 100 letters, digits and . _ - : / @ +`}},
		{"a name starting with a dash", func(g *model.Gateway) { llmconf.Alias(g, "chat").Names[0] = "-claude" },
			[]string{`"-claude" must be`, "starting with a letter or a digit"}},
		{"a name of 101 characters", func(g *model.Gateway) { llmconf.Alias(g, "chat").Names[0] = strings.Repeat("a", 101) },
			[]string{"must be 1 to 100"}},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			t.Parallel()
			e := withNames(t)
			tc.mutate(&e.Gateway)
			ps := estatetest.Problems(t, e.Validate())
			if _, ok := estatetest.FindProblem(ps, tc.want...); !ok {
				t.Fatalf("no problem with %q in:%s", tc.want, estatetest.ProblemList(ps))
			}
		})
	}

	t.Run("vendor names of every shape are fine", func(t *testing.T) {
		t.Parallel()
		e := withNames(t)
		llmconf.Alias(&e.Gateway, "code").Names = []string{"gpt-5-codex", "meta-llama/Llama-3.1-8B-Instruct", "qwen2.5:7b", "claude-3-5-sonnet@20241022", "o4-mini", "gemini-2.5-pro+x", "x_y"}
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
