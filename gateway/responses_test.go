package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	openaiv3 "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
)

// responsesWorld is the Responses door's estate: alias "native" goes to
// an OpenAI provider that speaks the Responses API (a pass-through), and
// alias "coder", which Codex's gpt-5-codex names too, to a vLLM route
// that speaks only chat completions (a translation).
type responsesWorld struct {
	native *respMock // the Responses API mock (OpenAI)
	chat   *respMock // the chat completions mock (vLLM)
}

func newResponsesWorld(t testing.TB) *responsesWorld {
	return &responsesWorld{native: newResponsesMock(t), chat: newRespChatMock(t)}
}

func (w *responsesWorld) configure(extra func(g *model.Gateway)) func(g *model.Gateway, _ string) {
	return func(g *model.Gateway, _ string) {
		g.Providers = []*model.Provider{{Name: "openai", BaseURL: w.native.URL + "/v1", KeySecret: "OPENAI_API_KEY", Timeout: 2 * time.Second, API: model.APIOpenAI}}
		g.Routes = []*model.Route{{Name: "vllm", Endpoints: []string{w.chat.URL + "/v1"}, Timeout: 2 * time.Second}}
		g.Models = []*model.LLMModel{
			{Name: "gpt", Provider: "openai", Upstream: "gpt-x", InputPriceMicros: 1_000_000, OutputPriceMicros: 4_000_000, Currency: "USD", MaxOutputTokens: 1000},
			{Name: "llama", Route: "vllm", Upstream: "meta/llama", InputPriceMicros: 200_000, OutputPriceMicros: 200_000, Currency: "USD", MaxOutputTokens: 1000},
		}
		g.Aliases = []*model.Alias{
			{Name: "native", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "gpt", Weight: 1}}}}},
			{Name: "coder", Names: []string{"gpt-5-codex"}, Rules: []model.AliasRule{{Targets: []model.Target{{Model: "llama", Weight: 1}}}}},
			{Name: "ml-only", Rules: []model.AliasRule{{Groups: []string{"ml"}, Targets: []model.Target{{Model: "llama", Weight: 1}}}}},
		}
		if extra != nil {
			extra(g)
		}
	}
}

// responsesClient is openai-go pointed at the gateway: only the base URL
// and the key are the gateway's; the project rides in a header, as an
// SDK's default headers carry it. No retries: a test sees each answer.
func (e *env) responsesClient(user, project string) openaiv3.Client {
	opts := []option.RequestOption{option.WithBaseURL(e.srv.URL + "/v1/"), option.WithAPIKey(e.keys[user]), option.WithMaxRetries(0)}
	if project != "" {
		opts = append(opts, option.WithHeader("X-Klique-Project", project))
	}
	return openaiv3.NewClient(opts...)
}

func respInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openaiv3.String(s)}
}

// streamText reads a Responses stream through the SDK: its text deltas,
// its event types, and its last event's response.
func respStream(t *testing.T, st interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) (text string, types []string, last responses.Response) {
	t.Helper()
	var sb strings.Builder
	seq := int64(-1)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq+1 {
			t.Fatalf("event %s numbered %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			sb.WriteString(ev.Delta)
		}
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed":
			last = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return sb.String(), types, last
}

func TestTheResponsesDoorServesTheOpenAIGoClient(t *testing.T) {
	for _, tc := range []struct {
		name, alias, upstream string
		mock                  func(w *responsesWorld) *respMock
		path                  string
	}{
		{"pass-through to an OpenAI upstream", "native", "gpt-x", func(w *responsesWorld) *respMock { return w.native }, "/v1/responses"},
		{"translated for a chat completions upstream", "gpt-5-codex", "meta/llama", func(w *responsesWorld) *respMock { return w.chat }, "/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newResponsesWorld(t)
			e := newEnv(t, w.configure(nil))
			ctx := context.Background()
			c := e.responsesClient("alice", "fraud")
			up := tc.mock(w)

			// Plain.
			up.set(tc.upstream, respScript{text: "a plain answer"})
			r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: tc.alias, Input: respInput("hello"),
				Instructions: openaiv3.String("be brief"), MaxOutputTokens: openaiv3.Int(50)})
			if err != nil {
				t.Fatal(err)
			}
			if r.OutputText() != "a plain answer" || r.Status != responses.ResponseStatusCompleted || r.Usage.OutputTokens != 3 || r.Usage.InputTokens == 0 {
				t.Fatalf("plain: %s", r.RawJSON())
			}
			seen := up.requests()
			if len(seen) != 1 || seen[0].Path != tc.path || gjson.GetBytes(seen[0].Body, "model").Str != tc.upstream {
				t.Fatalf("upstream saw %+v", seen)
			}
			if tc.alias == "native" {
				if seen[0].Auth != "Bearer "+providerKey || gjson.GetBytes(seen[0].Body, "instructions").Str != "be brief" {
					t.Fatalf("pass-through body %s", seen[0].Body)
				}
			} else if b := gjson.ParseBytes(seen[0].Body); b.Get("messages.0.role").Str != "system" || b.Get("messages.0.content").Str != "be brief" ||
				b.Get("messages.1.content").Str != "hello" || b.Get("max_tokens").Int() != 50 {
				t.Fatalf("translated body %s", seen[0].Body)
			}

			// Streamed.
			up.set(tc.upstream, respScript{text: "streamed through the door"})
			got, types, last := respStream(t, c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: tc.alias, Input: respInput("hello")}))
			if got != "streamed through the door" || types[0] != "response.created" || types[len(types)-1] != "response.completed" ||
				last.Usage.OutputTokens != 4 || last.OutputText() != "streamed through the door" {
				t.Fatalf("stream: %q %v %s", got, types, last.RawJSON())
			}

			// A function call, its output sent back, and the answer.
			weather := responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)
			up.set(tc.upstream, respScript{call: &respCall{id: "call_7", name: "get_weather", args: `{"city":"Paris"}`}})
			r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: tc.alias, Input: respInput("weather in Paris?"),
				Tools: []responses.ToolUnionParam{weather}})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].Name != "get_weather" ||
				r.Output[0].CallID != "call_7" || r.Output[0].Arguments.OfString != `{"city":"Paris"}` {
				t.Fatalf("function call: %s", r.RawJSON())
			}
			// The SDK's ToParam sends the item as it came (its fields stay
			// empty: the call id is read from the output item).
			call := r.Output[0].AsFunctionCall().ToParam()
			output := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp_c":21}`)
			output.OfFunctionCallOutput.CallID = param.NewOpt(r.Output[0].CallID)
			up.set(tc.upstream, respScript{text: "It is 21 degrees."})
			r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: tc.alias, Tools: []responses.ToolUnionParam{weather},
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("weather in Paris?", responses.EasyInputMessageRoleUser),
					{OfFunctionCall: &call}, output}}})
			if err != nil || r.OutputText() != "It is 21 degrees." {
				t.Fatalf("the answer after the call: %v %v", r, err)
			}
			last4 := up.requests()[3].Body
			if tc.alias == "native" {
				if gjson.GetBytes(last4, "input.1.type").Str != "function_call" || gjson.GetBytes(last4, "input.2.call_id").Str != "call_7" {
					t.Fatalf("pass-through round trip %s", last4)
				}
			} else if b := gjson.ParseBytes(last4); b.Get("messages.1.role").Str != "assistant" ||
				b.Get("messages.1.tool_calls.0.id").Str != "call_7" || b.Get("messages.1.tool_calls.0.function.name").Str != "get_weather" ||
				b.Get("messages.2.role").Str != "tool" || b.Get("messages.2.tool_call_id").Str != "call_7" ||
				b.Get("messages.2.content").Str != `{"temp_c":21}` || b.Get("tools.0.function.name").Str != "get_weather" {
				t.Fatalf("translated round trip %s", last4)
			}

			// The streamed function call.
			up.set(tc.upstream, respScript{call: &respCall{id: "call_8", name: "get_weather", args: `{"city":"Oslo"}`}})
			_, types, last = respStream(t, c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: tc.alias,
				Input: respInput("and Oslo?"), Tools: []responses.ToolUnionParam{weather}}))
			if !respContains(types, "response.function_call_arguments.delta") || len(last.Output) != 1 ||
				last.Output[0].CallID != "call_8" || last.Output[0].Arguments.OfString != `{"city":"Oslo"}` {
				t.Fatalf("streamed call: %v %s", types, last.RawJSON())
			}

			// Every call is on the ledger, the door's, the caller's, with
			// the tokens the upstream counted.
			calls := e.ledger(5)
			for _, rec := range calls {
				if rec.Endpoint != "responses" || rec.UserName != "alice" || rec.ProjectName != "fraud" || rec.Outcome != model.CallOK ||
					rec.InputTokens == 0 || rec.OutputTokens == 0 {
					t.Fatalf("ledger %s", dump(rec))
				}
			}
			wantAlias := map[string]string{"native": "native", "gpt-5-codex": "coder"}[tc.alias]
			if calls[0].OutputTokens != 3 || calls[1].OutputTokens != 4 || calls[0].Alias != wantAlias || !calls[1].Stream {
				t.Fatalf("ledger %s", dump(calls))
			}
		})
	}
}

func respContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// apiError returns the SDK's error for err, or fails.
func respAPIError(t *testing.T, err error) *openaiv3.Error {
	t.Helper()
	var apiErr *openaiv3.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an *openai.Error, got %v", err)
	}
	return apiErr
}

func TestTheResponsesDoorRefusesInOpenAIsShape(t *testing.T) {
	w := newResponsesWorld(t)
	e := newEnv(t, w.configure(func(g *model.Gateway) {
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodDay, Tokens: 1}}
	}))
	ctx := context.Background()
	ask := func(c openaiv3.Client, p responses.ResponseNewParams) *openaiv3.Error {
		t.Helper()
		_, err := c.Responses.New(ctx, p)
		return respAPIError(t, err)
	}
	plain := responses.ResponseNewParams{Model: "coder", Input: respInput("hi")}

	noKey := openaiv3.NewClient(option.WithBaseURL(e.srv.URL+"/v1/"), option.WithAPIKey(""), option.WithMaxRetries(0))
	if err := ask(noKey, plain); err.StatusCode != 401 || err.Code != "invalid_api_key" {
		t.Fatalf("no key: %d %s", err.StatusCode, err.RawJSON())
	}
	badKey := openaiv3.NewClient(option.WithBaseURL(e.srv.URL+"/v1/"), option.WithAPIKey("kq_nonsense"), option.WithMaxRetries(0))
	if err := ask(badKey, plain); err.StatusCode != 401 || err.Code != "invalid_api_key" {
		t.Fatalf("bad key: %d %s", err.StatusCode, err.RawJSON())
	}
	alice, vic := e.responsesClient("alice", "fraud"), e.responsesClient("vic", "detect")
	if err := ask(alice, responses.ResponseNewParams{Model: "nope", Input: respInput("hi")}); err.StatusCode != 404 || err.Code != "model_not_found" {
		t.Fatalf("unknown model: %d %s", err.StatusCode, err.RawJSON())
	}
	if err := ask(vic, responses.ResponseNewParams{Model: "ml-only", Input: respInput("hi")}); err.StatusCode != 403 || err.Code != "model_not_allowed" {
		t.Fatalf("not allowed: %d %s", err.StatusCode, err.RawJSON())
	}
	// A spent budget: 402, so that Codex shows the gateway's message.
	if err := ask(vic, plain); err.StatusCode != 402 || err.Code != "insufficient_quota" || !strings.Contains(err.Message, "project detect") {
		t.Fatalf("budget: %d %s", err.StatusCode, err.RawJSON())
	}
	// What a chat upstream cannot do is refused, saying why.
	err := ask(alice, responses.ResponseNewParams{Model: "coder", Input: respInput("hi"),
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}})
	if err.StatusCode != 400 && err.StatusCode != 502 || !strings.Contains(err.Message, "built-in tool web_search") {
		t.Fatalf("web search: %d %s", err.StatusCode, err.RawJSON())
	}
	err = ask(alice, responses.ResponseNewParams{Model: "coder", Input: respInput("hi"), PreviousResponseID: openaiv3.String("resp_1")})
	if !strings.Contains(err.Message, "previous_response_id: the gateway stores no responses") {
		t.Fatalf("previous response: %d %s", err.StatusCode, err.RawJSON())
	}
	// ... but goes through to an upstream that speaks the Responses API.
	if _, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "native", Input: respInput("hi"),
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}}); err != nil {
		t.Fatalf("web search to OpenAI: %v", err)
	}
	// An upstream's own error, its message kept; and one that is down.
	w.chat.set("meta/llama", respScript{status: http.StatusServiceUnavailable})
	if err := ask(alice, plain); err.StatusCode != 503 || err.Message != "upstream says 503" {
		t.Fatalf("upstream error: %d %s", err.StatusCode, err.RawJSON())
	}
	w.chat.set("meta/llama", respScript{status: http.StatusBadRequest, errorBody: `{"object":"error","message":"This model's maximum context length is 8 tokens","type":"BadRequestError","code":400}`})
	if err := ask(alice, plain); err.StatusCode != 400 || err.Message != "This model's maximum context length is 8 tokens" {
		t.Fatalf("vLLM's error: %d %s", err.StatusCode, err.RawJSON())
	}
	w.chat.Close()
	if err := ask(alice, plain); err.StatusCode != 502 || err.Code != "upstream_error" || !strings.Contains(err.Message, "every model of alias coder failed") {
		t.Fatalf("upstream down: %d %s", err.StatusCode, err.RawJSON())
	}
	// A bad request says what to change.
	if err := ask(alice, responses.ResponseNewParams{Model: "coder", Input: respInput("hi"), MaxOutputTokens: openaiv3.Int(-3)}); err.StatusCode != 400 ||
		!strings.Contains(err.Message, "max_output_tokens must not be negative") {
		t.Fatalf("bad request: %d %s", err.StatusCode, err.RawJSON())
	}
}

func TestTheResponsesDoorsGuardrailsBlockInputOutputAndStreams(t *testing.T) {
	w := newResponsesWorld(t)
	e := newEnv(t, w.configure(func(g *model.Gateway) {
		g.Guardrails = model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`}}
	}))
	ctx := context.Background()
	c := e.responsesClient("alice", "fraud")
	for _, alias := range []string{"native", "coder"} {
		upstream := map[string]string{"native": "gpt-x", "coder": "meta/llama"}[alias]
		mock := map[string]*respMock{"native": w.native, "coder": w.chat}[alias]

		// The input, a tool's output included.
		out := responses.ResponseInputItemParamOfFunctionCallOutput("password: hunter2")
		out.OfFunctionCallOutput.CallID = param.NewOpt("call_1")
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: alias, Input: responses.ResponseNewParamsInputUnion{
			OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfFunctionCall("{}", "call_1", "read"), out}}})
		if a := respAPIError(t, err); a.StatusCode != 400 || a.Code != "guardrail_blocked" {
			t.Fatalf("%s input: %d %s", alias, a.StatusCode, a.RawJSON())
		}
		// A whole answer.
		mock.set(upstream, respScript{text: "the password: hunter2"})
		_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: alias, Input: respInput("hi")})
		if a := respAPIError(t, err); a.StatusCode != 400 || a.Code != "guardrail_blocked" {
			t.Fatalf("%s output: %d %s", alias, a.StatusCode, a.RawJSON())
		}
		// A tool call's arguments, streamed.
		mock.set(upstream, respScript{call: &respCall{id: "call_2", name: "login", args: `{"note":"password= hunter2"}`}})
		st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: alias, Input: respInput("hi")})
		var types []string
		var failed responses.Response
		var errCode string
		for st.Next() {
			ev := st.Current()
			types = append(types, ev.Type)
			if ev.Type == "error" {
				errCode = ev.Code
			}
			if ev.Type == "response.failed" {
				failed = ev.Response
			}
		}
		if errCode != "guardrail_blocked" || failed.Status != responses.ResponseStatusFailed || failed.Error.Code != "guardrail_blocked" ||
			respContains(types, "response.completed") {
			t.Fatalf("%s stream: %v %v %s", alias, types, st.Err(), failed.RawJSON())
		}
	}
	for _, rec := range e.ledger(6) {
		if rec.Outcome != model.CallBlocked || rec.Guardrail == "" {
			t.Fatalf("ledger %s", dump(rec))
		}
	}
}

// A stream cut off upstream, or one that stops without its end, charges
// what it produced, never nothing, and tells the caller it failed.
func TestTheResponsesDoorChargesACutStream(t *testing.T) {
	w := newResponsesWorld(t)
	e := newEnv(t, w.configure(nil))
	ctx := context.Background()
	c := e.responsesClient("alice", "fraud")
	for i, alias := range []string{"native", "coder", "native", "coder"} {
		cut := respScript{text: "one two three four five", cutAfter: 2}
		if i >= 2 {
			cut = respScript{text: "one two three four five", stopShort: true}
		}
		w.native.set("gpt-x", cut)
		w.chat.set("meta/llama", cut)
		st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: alias, Input: respInput("count")})
		var types []string
		var failed responses.Response
		for st.Next() {
			ev := st.Current()
			types = append(types, ev.Type)
			if ev.Type == "response.failed" {
				failed = ev.Response
			}
		}
		if failed.Status != responses.ResponseStatusFailed || !strings.Contains(failed.Error.Message, "cut off") {
			t.Fatalf("%d %s: %v %v %s", i, alias, types, st.Err(), failed.RawJSON())
		}
	}
	for _, rec := range e.ledger(4) {
		if rec.InputTokens == 0 || rec.OutputTokens == 0 {
			t.Fatalf("ledger %s", dump(rec))
		}
	}
}

// Budgets hold on the Responses door as on the chat door: 200 callers at
// once (translated to the chat upstream of budgetWorld), and the sum
// charged never passes the budget.
func TestResponsesBudgetsHoldUnder200ConcurrentCallers(t *testing.T) {
	backends(t, func(t *testing.T, opts ...envOption) {
		e := newEnv(t, budgetWorld, opts...)
		answered, refusals, r := e.spendOn([]string{"alice", "bob"}, 200, "responses", `{"model":"chat","input":"hello there","max_output_tokens":100}`, func(r response) string { return r.json("error.code").Str })
		if refusals["insufficient_quota false"] != 200 {
			t.Fatalf("refusals %v", refusals)
		}
		calls := e.ledger(int(answered))
		var total, alice int64
		for _, c := range calls {
			if c.Endpoint != "responses" || c.Outcome == model.CallOK && (c.InputTokens == 0 || c.OutputTokens == 0) {
				t.Fatalf("ledger %s", dump(c))
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
		if msg := r.json("error.message").Str; r.status != 402 || r.json("error.code").Str != "insufficient_quota" || !strings.Contains(msg, "project fraud") {
			t.Fatalf("refusal %d %s", r.status, r.body)
		}
	})
}
