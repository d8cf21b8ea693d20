package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
)

// messagesEnv is a gateway whose alias "native" (also answering to
// claude-opus-4-1) goes to an Anthropic upstream, which passes calls
// through, and whose alias "coder" (also answering to claude-sonnet-4-5)
// goes to a chat completions model server, which has them translated.
type messagesEnv struct {
	*env
	chat *chatMock
	anth *anthropicMock
}

func newMessagesEnv(t *testing.T, extra func(g *model.Gateway), opts ...envOption) *messagesEnv {
	t.Helper()
	m := &messagesEnv{chat: newChatMock(t), anth: newAnthropicMock(t)}
	m.env = newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Providers = append(g.Providers, &model.Provider{Name: "anthropic", BaseURL: m.anth.URL + "/v1", KeySecret: "OPENAI_API_KEY",
			API: model.APIAnthropic, Timeout: 5 * time.Second})
		g.Routes = append(g.Routes, &model.Route{Name: "vllm", Endpoints: []string{m.chat.URL + "/v1"}, Timeout: 5 * time.Second})
		g.Models = append(g.Models,
			&model.LLMModel{Name: "sonnet", Provider: "anthropic", Upstream: "claude-sonnet-4-5-20250929", InputPriceMicros: 3_000_000, OutputPriceMicros: 15_000_000, Currency: "USD", MaxOutputTokens: 64_000},
			&model.LLMModel{Name: "qwen", Route: "vllm", Upstream: "qwen3-coder", InputPriceMicros: 100_000, OutputPriceMicros: 100_000, Currency: "USD", MaxOutputTokens: 32_000})
		g.Aliases = append(g.Aliases,
			&model.Alias{Name: "native", Names: []string{"claude-opus-4-1"}, Rules: []model.AliasRule{{Targets: []model.Target{{Model: "sonnet", Weight: 1}}}}},
			&model.Alias{Name: "coder", Names: []string{"claude-sonnet-4-5", "claude-haiku-4-5"}, Rules: []model.AliasRule{{Targets: []model.Target{{Model: "qwen", Weight: 1}}}}})
		if extra != nil {
			extra(g)
		}
	}, opts...)
	return m
}

// anthropicClient is the official Anthropic SDK pointed at the gateway:
// only the base URL and the key change; the project rides in a header, as
// an SDK's default headers carry it. Retries are off, so that a refusal
// is seen as it is.
func (e *env) anthropicClient(user, project string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(e.srv.URL+"/"), option.WithAPIKey(e.keys[user]),
		option.WithHeader("X-Klique-Project", project), option.WithMaxRetries(0))
}

// both runs fn against the pass-through alias and the translated one.
func (m *messagesEnv) both(t *testing.T, fn func(t *testing.T, model string, native bool)) {
	t.Run("pass-through", func(t *testing.T) { fn(t, "claude-opus-4-1", true) })
	t.Run("translated", func(t *testing.T) { fn(t, "claude-sonnet-4-5", false) })
}

func userText(s string) anthropic.MessageParam {
	return anthropic.NewUserMessage(anthropic.NewTextBlock(s))
}

var lsTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "ls", Description: anthropic.String("list a directory"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"dir": map[string]any{"type": "string"}}, Required: []string{"dir"}}}}

func TestMessagesDoorWithTheAnthropicSDK(t *testing.T) {
	m := newMessagesEnv(t, nil)
	ctx := context.Background()
	c := m.anthropicClient("alice", "fraud")
	m.anth.script = scripted("hello from the model", "ls", `{"dir":"/"}`)
	m.chat.script = scripted("hello from the model", "ls", `{"dir":"/"}`)
	rows := 0
	m.both(t, func(t *testing.T, name string, native bool) {
		// Plain.
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 200,
			System: []anthropic.TextBlockParam{{Text: "be brief"}}, Messages: []anthropic.MessageParam{userText("hi")}})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "hello from the model" || msg.StopReason != anthropic.StopReasonEndTurn ||
			msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens != 4 || msg.Model != anthropic.Model(name) && !native {
			t.Fatalf("message %+v", msg)
		}
		// Streamed, through the SDK's accumulator.
		stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 200,
			Messages: []anthropic.MessageParam{userText("hi again")}})
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text != "hello from the model" || acc.StopReason != anthropic.StopReasonEndTurn ||
			acc.Usage.InputTokens == 0 || acc.Usage.OutputTokens != 4 {
			t.Fatalf("streamed message %+v", acc)
		}
		// A tool round trip: the model calls ls, the caller answers, the
		// model answers in text.
		params := anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 200, Tools: []anthropic.ToolUnionParam{lsTool},
			Messages: []anthropic.MessageParam{userText("what is in /?")}}
		first, err := c.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("tool call: %v", err)
		}
		if first.StopReason != anthropic.StopReasonToolUse || len(first.Content) != 1 || first.Content[0].Type != "tool_use" ||
			first.Content[0].Name != "ls" || string(first.Content[0].Input) != `{"dir":"/"}` {
			t.Fatalf("tool call %+v", first)
		}
		params.Messages = append(params.Messages, first.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(first.Content[0].ID, "bin etc", false)))
		second, err := c.Messages.New(ctx, params)
		if err != nil || second.Content[0].Text != "hello from the model" {
			t.Fatalf("after the tool result: %+v %v", second, err)
		}
		// The same round trip streamed, with a beta header an Anthropic
		// upstream gets.
		params.Messages = params.Messages[:1]
		stream = c.Messages.NewStreaming(ctx, params, option.WithHeader("anthropic-beta", "klique-test-beta"))
		acc = anthropic.Message{}
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if stream.Err() != nil || acc.StopReason != anthropic.StopReasonToolUse || len(acc.Content) != 1 || string(acc.Content[0].Input) != `{"dir":"/"}` {
			t.Fatalf("streamed tool call %+v %v", acc, stream.Err())
		}
		// count_tokens.
		// count_tokens: the Anthropic upstream's count, or the gateway's
		// upper bound (a message's overhead and a token per byte); never
		// on the ledger.
		count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(name),
			Messages: []anthropic.MessageParam{userText("how many tokens is this?")}})
		if err != nil {
			t.Fatalf("count_tokens: %v", err)
		}
		if native {
			seen := m.anth.requests()
			if last := seen[len(seen)-1]; last.Path != "/v1/messages/count_tokens" || count.InputTokens != int64(len(last.Body)/10) ||
				gjson.Get(last.Body, "model").Str != "claude-sonnet-4-5-20250929" || last.Header.Get("x-api-key") != providerKey {
				t.Fatalf("count_tokens %d; the upstream saw %+v", count.InputTokens, last)
			}
		} else if count.InputTokens != 8+int64(len("how many tokens is this?")) {
			t.Fatalf("count_tokens %d", count.InputTokens)
		}
		rows += 5
		calls := m.ledger(rows)
		for _, call := range calls[rows-5:] {
			if call.Endpoint != "messages" || call.UserName != "alice" || call.ProjectName != "fraud" || call.InputTokens == 0 || call.OutputTokens == 0 ||
				call.Outcome != model.CallOK {
				t.Fatalf("ledger row %s", dump(call))
			}
		}
		// What the upstream saw.
		if native {
			seen := m.anth.requests()
			last := seen[len(seen)-2] // before count_tokens
			if last.Path != "/v1/messages" || last.Header.Get("anthropic-beta") != "klique-test-beta" || last.Header.Get("x-api-key") != providerKey || last.Header.Get("Authorization") != "" ||
				last.Header.Get("anthropic-version") == "" || gjson.Get(last.Body, "model").Str != "claude-sonnet-4-5-20250929" {
				t.Fatalf("the Anthropic upstream saw %+v", last)
			}
		} else {
			seen := m.chat.requests()
			last := seen[len(seen)-1]
			if last.Path != "/v1/chat/completions" || gjson.Get(last.Body, "model").Str != "qwen3-coder" ||
				gjson.Get(last.Body, "tools.0.function.name").Str != "ls" || !gjson.Get(last.Body, "stream_options.include_usage").Bool() {
				t.Fatalf("the chat upstream saw %+v", last)
			}
		}
	})
}

// apiError is the SDK's error for a refused call.
func apiError(t *testing.T, err error, status int, typ string, says string) {
	t.Helper()
	var e *anthropic.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want the SDK's *anthropic.Error", err)
	}
	if e.StatusCode != status || string(e.Type()) != typ || !strings.Contains(e.Message, says) {
		t.Fatalf("error %d %s %q, want %d %s saying %q", e.StatusCode, e.Type(), e.Message, status, typ, says)
	}
}

func TestMessagesDoorRefusesInAnthropicsShape(t *testing.T) {
	m := newMessagesEnv(t, func(g *model.Gateway) {
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 1}}
		g.RateLimits = []*model.RateLimit{{Scope: model.RateLimitUser, Name: "bob", RequestsPerMinute: 1}}
		g.Guardrails = model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`}}
		g.Aliases = append(g.Aliases, &model.Alias{Name: "down", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "dead", Weight: 1}}}}})
		g.Routes = append(g.Routes, &model.Route{Name: "nowhere", Endpoints: []string{"http://127.0.0.1:1/v1"}, Timeout: time.Second})
		g.Models = append(g.Models, &model.LLMModel{Name: "dead", Route: "nowhere"})
	})
	ctx := context.Background()
	hi := []anthropic.MessageParam{userText("hi")}
	m.both(t, func(t *testing.T, name string, native bool) {
		// No key, a wrong key.
		noKey := anthropic.NewClient(option.WithBaseURL(m.srv.URL+"/"), option.WithAPIKey(""), option.WithMaxRetries(0))
		_, err := noKey.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 10, Messages: hi})
		apiError(t, err, 401, "authentication_error", "x-api-key")
		bad := anthropic.NewClient(option.WithBaseURL(m.srv.URL+"/"), option.WithAPIKey("kq-wrong"), option.WithMaxRetries(0))
		_, err = bad.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 10, Messages: hi})
		apiError(t, err, 401, "authentication_error", "not valid")
		// A key sent as a bearer token works as well as x-api-key.
		bearer := anthropic.NewClient(option.WithBaseURL(m.srv.URL+"/"), option.WithAuthToken(m.keys["alice"]),
			option.WithHeader("X-Klique-Project", "fraud"), option.WithMaxRetries(0))
		if _, err := bearer.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 10, Messages: hi}); err != nil {
			t.Fatalf("bearer: %v", err)
		}
		alice := m.anthropicClient("alice", "fraud")
		// An unknown model, one the caller may not use.
		_, err = alice.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-none", MaxTokens: 10, Messages: hi})
		apiError(t, err, 404, "not_found_error", "claude-none")
		vic := m.anthropicClient("vic", "detect")
		_, err = vic.Messages.New(ctx, anthropic.MessageNewParams{Model: "ml-only", MaxTokens: 10, Messages: hi})
		apiError(t, err, 403, "permission_error", "")
		// A request the door cannot read.
		_, err = alice.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), Messages: hi})
		apiError(t, err, 400, "invalid_request_error", "max_tokens is required")
		// Over budget: project detect has a token.
		_, err = vic.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 10, Messages: hi})
		apiError(t, err, 429, "rate_limit_error", "token budget of project detect")
		// Rate limited, with the wait.
		bob := m.anthropicClient("bob", "fraud")
		var resp *http.Response
		for i := 0; i < 2; i++ {
			_, err = bob.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 10, Messages: hi}, option.WithResponseInto(&resp))
		}
		apiError(t, err, 429, "rate_limit_error", "rate limit reached")
		if resp.Header.Get("retry-after") == "" {
			t.Fatalf("a rate-limited call without retry-after: %v", resp.Header)
		}
		// A guardrail.
		_, err = alice.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 10, Messages: []anthropic.MessageParam{userText("password: hunter2")}})
		apiError(t, err, 400, "invalid_request_error", "guardrail")
		// count_tokens is refused as a call is, and checked by the
		// guardrails: a blocked prompt is not sent to be counted.
		_, err = noKey.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(name), Messages: hi})
		apiError(t, err, 401, "authentication_error", "x-api-key")
		_, err = vic.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "ml-only", Messages: hi})
		apiError(t, err, 403, "permission_error", "")
		counted := len(m.anth.requests())
		_, err = alice.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(name), Messages: []anthropic.MessageParam{userText("password: hunter2")}})
		apiError(t, err, 400, "invalid_request_error", "guardrail")
		if len(m.anth.requests()) != counted {
			t.Fatalf("a blocked prompt was sent to be counted")
		}
		// An upstream that is down.
		_, err = alice.Messages.New(ctx, anthropic.MessageNewParams{Model: "down", MaxTokens: 10, Messages: hi})
		apiError(t, err, 502, "api_error", "failed")
	})
}

// setScript sets both mocks' script.
func (m *messagesEnv) setScript(s func(body gjson.Result, toolResults int) reply) {
	for _, mm := range []*mockModel{&m.chat.mockModel, &m.anth.mockModel} {
		mm.mu.Lock()
		mm.script = s
		mm.mu.Unlock()
	}
}

// drain reads a stream to its end and returns the accumulated message and
// the stream's error.
func drain(stream interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
}) (anthropic.Message, error) {
	var acc anthropic.Message
	for stream.Next() {
		_ = acc.Accumulate(stream.Current())
	}
	return acc, stream.Err()
}

// Guardrails read what the Messages door carries: the input's text, tool
// results and tool inputs; the answer's text and tool-call arguments,
// whole and streamed.
func TestMessagesDoorGuardrails(t *testing.T) {
	m := newMessagesEnv(t, func(g *model.Gateway) {
		g.Guardrails = model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`}}
	})
	ctx := context.Background()
	c := m.anthropicClient("alice", "fraud")
	m.both(t, func(t *testing.T, name string, native bool) {
		// Input: a tool result carrying the secret never goes upstream.
		before := len(m.anth.requests()) + len(m.chat.requests())
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 50, Tools: []anthropic.ToolUnionParam{lsTool},
			Messages: []anthropic.MessageParam{userText("read it"),
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_9", map[string]any{"dir": "/etc"}, "ls")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_9", "password: hunter2", false))}})
		apiError(t, err, 400, "invalid_request_error", "guardrail")
		if after := len(m.anth.requests()) + len(m.chat.requests()); after != before {
			t.Fatalf("a blocked input went upstream")
		}
		for _, tc := range []struct {
			name   string
			script func(gjson.Result, int) reply
		}{
			{"text", scripted("here is the password: hunter2", "", "")},
			{"tool arguments", scripted("", "ls", `{"dir":"password= hunter2"}`)},
		} {
			m.setScript(tc.script)
			params := anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 50, Tools: []anthropic.ToolUnionParam{lsTool},
				Messages: []anthropic.MessageParam{userText("tell me")}}
			_, err := c.Messages.New(ctx, params)
			apiError(t, err, 400, "invalid_request_error", "blocked by the guardrail")
			acc, err := drain(c.Messages.NewStreaming(ctx, params))
			if err == nil || !strings.Contains(err.Error(), "blocked by the guardrail") {
				t.Fatalf("%s: a blocked stream ended with %v", tc.name, err)
			}
			for _, b := range acc.Content {
				if strings.Contains(b.Text, "hunter2") || strings.Contains(string(b.Input), "hunter2") {
					t.Fatalf("%s: the caller got the secret: %+v", tc.name, acc)
				}
			}
		}
		m.setScript(nil)
	})
	for _, call := range m.ledger(1) {
		if call.Outcome == model.CallBlocked && call.Guardrail == "" {
			t.Fatalf("a blocked call without its rule: %s", dump(call))
		}
	}
}

// Usage is never zero: a whole answer and a stream are charged what the
// upstream said, and a stream cut off mid-answer what it produced.
func TestMessagesDoorUsageIsNeverZero(t *testing.T) {
	m := newMessagesEnv(t, nil)
	ctx := context.Background()
	c := m.anthropicClient("alice", "fraud")
	m.setScript(scripted("one two three four five six seven eight", "", ""))
	rows := 0
	m.both(t, func(t *testing.T, name string, native bool) {
		params := anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 50, Messages: []anthropic.MessageParam{userText("count")}}
		if _, err := c.Messages.New(ctx, params); err != nil {
			t.Fatal(err)
		}
		if _, err := drain(c.Messages.NewStreaming(ctx, params)); err != nil {
			t.Fatal(err)
		}
		mm := &m.chat.mockModel
		if native {
			mm = &m.anth.mockModel
		}
		mm.mu.Lock()
		mm.cutAfter = 3
		mm.mu.Unlock()
		_, err := drain(c.Messages.NewStreaming(ctx, params))
		mm.mu.Lock()
		mm.cutAfter = 0
		mm.mu.Unlock()
		if err == nil {
			t.Fatalf("a stream cut off ended without an error")
		}
		rows += 3
		calls := m.ledger(rows)
		whole, streamed, cut := calls[rows-3], calls[rows-2], calls[rows-1]
		if whole.OutputTokens != 8 || whole.InputTokens == 0 || streamed.OutputTokens != 8 || streamed.InputTokens == 0 {
			t.Fatalf("whole %s\nstreamed %s", dump(whole), dump(streamed))
		}
		if cut.Outcome != model.CallUpstreamError || cut.InputTokens == 0 || cut.OutputTokens < 3 {
			t.Fatalf("the cut stream on the ledger: %s", dump(cut))
		}
	})
}

// Budgets hold under 200 concurrent callers on the Messages door (real
// Redis), as on chat completions: spendOn is the chat test's helper.
func TestMessagesDoorBudgetsHoldUnder200ConcurrentCallers(t *testing.T) {
	m := newMessagesEnv(t, func(g *model.Gateway) {
		g.Budgets = []*model.TokenBudget{{Project: "fraud", Period: model.PeriodMonth, Tokens: 20_000, PerUserTokens: 12_000}}
	}, withRedis())
	body := `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`
	answered, refusals, r := m.spendOn([]string{"alice", "bob"}, 200, "messages", body, func(r response) string { return r.json("error.type").Str })
	if refusals["rate_limit_error false"] != 200 {
		t.Fatalf("refusals %v", refusals)
	}
	calls := m.ledger(int(answered))
	var total, alice int64
	for _, c := range calls {
		if c.Endpoint != "messages" {
			t.Fatalf("a call on the ledger by another door: %s", dump(c))
		}
		total += c.InputTokens + c.OutputTokens
		if c.UserName == "alice" {
			alice += c.InputTokens + c.OutputTokens
		}
	}
	if total > 20_000 || alice > 12_000 {
		t.Fatalf("charged %d (alice %d) of a budget of 20000 (12000 each)", total, alice)
	}
	if answered < 50 {
		t.Fatalf("only %d calls answered", answered)
	}
	if r.status != 429 || r.json("type").Str != "error" || !strings.Contains(r.json("error.message").Str, "project fraud") {
		t.Fatalf("refusal %d %s", r.status, r.body)
	}
}

// What a chat upstream cannot do is refused with a message that says so,
// and passes through to an Anthropic upstream.
func TestMessagesDoorRefusesWhatItCannotTranslate(t *testing.T) {
	m := newMessagesEnv(t, nil)
	body := func(model string) string {
		return `{"model":"` + model + `","max_tokens":20,"messages":[{"role":"user","content":"search"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`
	}
	r := m.post("alice", "fraud", "messages", body("claude-sonnet-4-5"))
	if r.status != 400 || r.json("type").Str != "error" || r.json("error.type").Str != "invalid_request_error" ||
		!strings.Contains(r.json("error.message").Str, "the tool web_search (type web_search_20250305) cannot be translated for a chat-completions model") {
		t.Fatalf("translated: %d %s", r.status, r.body)
	}
	if len(m.chat.requests()) != 0 {
		t.Fatalf("the chat upstream was called")
	}
	if r := m.post("alice", "fraud", "messages", body("native")); r.status != 200 || r.json("content.0.text").Str == "" {
		t.Fatalf("passed through: %d %s", r.status, r.body)
	}
	if seen := m.anth.requests(); len(seen) != 1 || gjson.Get(seen[0].Body, "tools.0.type").Str != "web_search_20250305" {
		t.Fatalf("the Anthropic upstream saw %+v", seen)
	}
}
