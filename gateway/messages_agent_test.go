package gateway_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// runClaude runs Claude Code headless against the gateway with key, asking
// for model, in a home of its own, with every call it makes beyond the
// model's turned off, and returns its JSON result.
func runClaude(t *testing.T, bin, baseURL, key, model, prompt string) (gjson.Result, string) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", prompt, "--output-format", "json", "--max-turns", "3")
	cmd.Dir = home
	cmd.Env = []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb",
		"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_AUTH_TOKEN=" + key, "ANTHROPIC_MODEL=" + model,
		"ANTHROPIC_SMALL_FAST_MODEL=" + model, "ANTHROPIC_DEFAULT_HAIKU_MODEL=" + model,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1", "CLAUDE_CODE_MAX_RETRIES=0",
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("Claude Code did not finish in 2 minutes: %s", out)
	}
	text := string(out)
	// The result is the last JSON line (a warning may come first).
	lines := strings.Split(strings.TrimSpace(text), "\n")
	res := gjson.Parse(lines[len(lines)-1])
	if !res.IsObject() {
		t.Fatalf("Claude Code printed no JSON result (%v): %s", err, text)
	}
	return res, text
}

// Claude Code itself, headless, through the Messages door: once to a
// chat completions model (translated) and once to an Anthropic upstream
// (passed through). Its turn completes with the mock model's answer, the
// call is on the ledger under the key's user and project, and a spent
// budget stops it with the gateway's message in its output.
func TestClaudeCodeThroughTheGateway(t *testing.T) {
	bin := agentBinary(t, "claude", "agents-claude.sh")
	m := newMessagesEnv(t, func(g *model.Gateway) {
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 1}}
	})
	m.chat.script = scripted("KLIQUE-AGENT-OK from the chat model", "", "")
	m.anth.script = scripted("KLIQUE-AGENT-OK from the anthropic model", "", "")
	_, key, err := m.svc.CreateAPIKey(m.admin, platform.APIKeyInput{Name: "agent", User: "alice", Project: "fraud"})
	must(t, err)
	rows := 0
	for _, tc := range []struct{ model, want, upstream string }{
		{"claude-sonnet-4-5", "KLIQUE-AGENT-OK from the chat model", "qwen"},
		// The alias by its own name: Claude Code rewrites some vendor
		// names it knows (claude-opus-4-1) to newer ones.
		{"native", "KLIQUE-AGENT-OK from the anthropic model", "sonnet"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			res, out := runClaude(t, bin, m.srv.URL, key, tc.model, "Say hello.")
			if res.Get("is_error").Bool() || !strings.Contains(res.Get("result").Str, tc.want) {
				t.Fatalf("Claude Code's result: %s", out)
			}
			calls := m.ledger(rows + 1)
			var mine int
			for _, c := range calls[rows:] {
				if c.Endpoint != "messages" || c.UserName != "alice" || c.ProjectName != "fraud" || c.Model != tc.upstream ||
					c.InputTokens == 0 || c.OutputTokens == 0 || c.Outcome != model.CallOK {
					t.Fatalf("Claude Code's call on the ledger: %s", dump(c))
				}
				mine++
			}
			rows += mine
		})
	}
	t.Run("a spent budget", func(t *testing.T) {
		_, vkey, err := m.svc.CreateAPIKey(m.admin, platform.APIKeyInput{Name: "agent", User: "vic", Project: "detect"})
		must(t, err)
		res, out := runClaude(t, bin, m.srv.URL, vkey, "claude-sonnet-4-5", "Say hello.")
		if !res.Get("is_error").Bool() || !strings.Contains(out, "token budget of project detect") {
			t.Fatalf("Claude Code over budget: %s", out)
		}
	})
}
