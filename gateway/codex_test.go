package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// runCodex runs `codex exec prompt` headless with a home of its own whose
// config.toml sends it to the gateway at baseURL (a model_providers entry
// with wire_api = "responses" and the key in KLIQUE_API_KEY), as the
// README tells users to. Web search is off: it is a built-in tool, which a
// chat completions upstream cannot run. The sandbox is read-only and
// nothing asks for approval; retries are off, so that a refusal shows at
// once.
func runCodex(t *testing.T, bin, baseURL, key, prompt string) (out string, err error) {
	t.Helper()
	home := t.TempDir()
	config := fmt.Sprintf(`model = "gpt-5-codex"
model_provider = "klique"
web_search = "disabled"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.klique]
name = "Klique"
base_url = %q
wire_api = "responses"
env_key = "KLIQUE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
`, baseURL)
	must(t, os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--skip-git-repo-check", "--sandbox", "read-only", prompt)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "KLIQUE_API_KEY=" + key, "NO_COLOR=1", "TERM=dumb"}
	cmd.Stdin = bytes.NewReader(nil)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	return buf.String(), err
}

// TestCodexCLIRunsThroughTheResponsesDoor runs Codex CLI itself against a
// gateway on loopback whose alias for gpt-5-codex goes to a chat
// completions server (a scripted mock standing in for vLLM): the prompt
// completes with the model's answer, the call is on the ledger under the
// key's user and project, and a spent budget stops the agent with the
// gateway's message in its output.
func TestCodexCLIRunsThroughTheResponsesDoor(t *testing.T) {
	bin := agentBinary(t, "codex", "agents-codex.sh")
	w := newResponsesWorld(t)
	e := newEnv(t, w.configure(func(g *model.Gateway) {
		g.Budgets = []*model.TokenBudget{{Project: "shared", Period: model.PeriodMonth, Tokens: 1}}
	}))
	// The model runs a command through Codex's exec_command tool, then
	// answers.
	w.chat.queue("meta/llama", respScript{call: &respCall{id: "call_1", name: "exec_command", args: `{"cmd":"echo KLIQUE_TOOL_OK"}`}})
	w.chat.set("meta/llama", respScript{text: "PONG from the model behind the gateway"})
	_, key, err := e.svc.CreateAPIKey(e.admin, platform.APIKeyInput{Name: "codex", User: "alice", Project: "fraud"})
	must(t, err)

	out, err := runCodex(t, bin, e.srv.URL+"/v1", key, "Say pong.")
	if err != nil || !strings.Contains(out, "PONG from the model behind the gateway") || !strings.Contains(out, "echo KLIQUE_TOOL_OK") {
		t.Fatalf("codex: %v\n%s", err, out)
	}
	calls := e.ledger(2)
	for _, c := range calls {
		if c.Endpoint != "responses" || c.UserName != "alice" || c.ProjectName != "fraud" || c.Alias != "coder" || c.Model != "llama" ||
			c.Outcome != model.CallOK || !c.Stream || c.InputTokens == 0 || c.OutputTokens == 0 {
			t.Fatalf("codex's call on the ledger: %s", dump(c))
		}
	}
	// What went upstream is Codex's conversation as chat: its
	// instructions and developer notes as system messages, the prompt,
	// its function tools; then the command's call and what it printed.
	seen := w.chat.requests()
	first, second := gjson.ParseBytes(seen[0].Body), gjson.ParseBytes(seen[1].Body)
	if first.Get("messages.0.role").Str != "system" || !first.Get(`messages.#(content%"*Say pong.*")`).Exists() ||
		!first.Get(`tools.#(function.name=="exec_command")`).Exists() {
		t.Fatalf("upstream got %s", seen[0].Body)
	}
	if !second.Get(`messages.#(tool_calls.0.id=="call_1")`).Exists() || !second.Get(`messages.#(tool_call_id=="call_1")`).Exists() ||
		!strings.Contains(second.Get(`messages.#(tool_call_id=="call_1").content`).Str, "KLIQUE_TOOL_OK") {
		t.Fatalf("the tool's turn upstream: %s", seen[1].Body)
	}

	// A key for a project whose budget is spent: Codex stops, showing why.
	_, spent, err := e.svc.CreateAPIKey(e.admin, platform.APIKeyInput{Name: "codex-shared", User: "alice", Project: "shared"})
	must(t, err)
	out, err = runCodex(t, bin, e.srv.URL+"/v1", spent, "Say pong.")
	if err == nil || !strings.Contains(out, "402") || !strings.Contains(out, "project shared") || strings.Contains(out, "PONG") {
		t.Fatalf("codex over budget: %v\n%s", err, out)
	}
	if n := len(w.chat.requests()); n != len(seen) {
		t.Fatalf("a call over budget went upstream (%d calls, was %d)", n, len(seen))
	}
}
