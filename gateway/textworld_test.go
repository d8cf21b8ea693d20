package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
)

// The guardrail tests' world: one model server on loopback that speaks
// every API an upstream may (chat completions, completions, embeddings,
// Responses, Messages), answering each call as a test scripts it and
// recording what reached it; and a gateway whose aliases reach it by each
// way a door has (passed through, translated), each alias with a pattern
// guardrail or a model-based check.

// secret is the text the guardrails deny; harmless the text that stands
// in its place in the controls.
const (
	secret   = "TOPSECRET-123"
	harmless = "harmless-123"
)

// answer is what the mock sends: a whole body, or a stream's events (each
// sent as it is, a pause between them).
type answer struct {
	body   string
	events []string
	// pause spaces the events.
	pause time.Duration
}

// textMock is the model server.
type textMock struct {
	*httptest.Server
	mu   sync.Mutex
	seen []textSeen
	// script answers a call to path for upstream model; nil, or an answer
	// with neither body nor events, answers by default.
	script func(path, model string, body gjson.Result) answer
}

type textSeen struct{ Path, Model, Body string }

func newTextMock(t testing.TB) *textMock {
	m := &textMock{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *textMock) setScript(s func(path, model string, body gjson.Result) answer) {
	m.mu.Lock()
	m.script = s
	m.mu.Unlock()
}

// reached returns what the mock got for upstream models other than the
// guard's, and what the guard model got.
func (m *textMock) reached() (calls, checks []textSeen) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.seen {
		if s.Model == "up-guard" {
			checks = append(checks, s)
		} else {
			calls = append(calls, s)
		}
	}
	return calls, checks
}

func (m *textMock) reset() {
	m.mu.Lock()
	m.seen = nil
	m.mu.Unlock()
}

func (m *textMock) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	body := gjson.ParseBytes(raw)
	up := body.Get("model").Str
	m.mu.Lock()
	m.seen = append(m.seen, textSeen{Path: r.URL.Path, Model: up, Body: string(raw)})
	script := m.script
	m.mu.Unlock()
	var a answer
	switch {
	case up == "up-guard":
		// A guard model that reasons first, as some do (its thoughts
		// are no verdict): unsafe when it is shown the denied text.
		verdict := "safe"
		if strings.Contains(gjson.GetBytes(raw, "messages.0.content").Str, secret) {
			verdict = "unsafe S1"
		}
		a.body = chatWhole(`"reasoning_content":"Is this safe? Let me see.","content":` + jsonString(verdict))
	case script != nil:
		a = script(r.URL.Path, up, body)
	}
	if a.body == "" && a.events == nil {
		a = defaultAnswer(r.URL.Path, body.Get("stream").Bool())
	}
	if a.events == nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, a.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i, ev := range a.events {
		if i > 0 && a.pause > 0 {
			select {
			case <-time.After(a.pause):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, ev)
		fl.Flush()
	}
}

// defaultAnswer is a short, harmless answer in the shape of the API at
// path.
func defaultAnswer(path string, stream bool) answer {
	switch path {
	case "/v1/completions":
		if stream {
			return answer{events: []string{sse("", `{"id":"c","object":"text_completion","choices":[{"index":0,"text":"fine","finish_reason":"stop"}]}`), "data: [DONE]\n\n"}}
		}
		return answer{body: `{"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"fine","finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`}
	case "/v1/embeddings":
		return answer{body: `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m","usage":{"prompt_tokens":5,"total_tokens":5}}`}
	case "/v1/responses":
		if stream {
			return answer{events: responsesEvents(`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"fine","annotations":[]}]}`)}
		}
		return answer{body: responsesWhole(`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"fine","annotations":[]}]}`)}
	case "/v1/messages":
		if stream {
			return answer{events: messagesEvents(`{"type":"text","text":""}`, `{"type":"text_delta","text":"fine"}`)}
		}
		return answer{body: messagesWhole(`{"type":"text","text":"fine"}`)}
	}
	if stream {
		return answer{events: chatEvents(`"content":"fine"`)}
	}
	return answer{body: chatWhole(`"content":"fine"`)}
}

// sse is one server-sent event.
func sse(name, data string) string {
	if name == "" {
		return "data: " + data + "\n\n"
	}
	return "event: " + name + "\ndata: " + data + "\n\n"
}

// chatWhole is a chat completion whose message has fields.
func chatWhole(fields string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",` + fields +
		`},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`
}

// chatEvents is a chat stream whose one delta has fields, then its end
// and usage.
func chatEvents(fields string) []string {
	return []string{
		sse("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`),
		sse("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{`+fields+`}}]}`),
		sse("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		sse("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`),
		"data: [DONE]\n\n",
	}
}

// responsesWhole is a Response with one output item.
func responsesWhole(item string) string {
	return `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[` + item +
		`],"usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8}}`
}

// responsesEvents is a Responses stream: created, the events given (with
// their sequence numbers), then completed with item as its output.
func responsesEvents(item string, events ...string) []string {
	out := []string{sse("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`)}
	for i, ev := range events {
		name := gjson.Get(ev, "type").Str
		ev = strings.Replace(ev, "{", fmt.Sprintf(`{"sequence_number":%d,`, i+1), 1)
		out = append(out, sse(name, ev))
	}
	return append(out, sse("response.completed", fmt.Sprintf(`{"type":"response.completed","sequence_number":%d,"response":%s}`, len(events)+1, responsesWhole(item))))
}

// messagesWhole is a Messages answer with one content block.
func messagesWhole(block string) string {
	return `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[` + block +
		`],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}}`
}

// messagesEvents is a Messages stream of one content block, started as
// block and with one delta.
func messagesEvents(block, delta string) []string {
	return []string{
		sse("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`),
		sse("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+block+`}`),
		sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+delta+`}`),
		sse("content_block_stop", `{"type":"content_block_stop","index":0}`),
		sse("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`),
		sse("message_stop", `{"type":"message_stop"}`),
	}
}

// The aliases of the world: how a call reaches the mock (chat: a chat
// completions route, passed through from the chat door and translated
// from the others; openai: OpenAI's own API, which the Responses door
// passes through; anthropic: the Messages API, which the Messages door
// passes through), and which guardrail reads it (pat: the pattern,
// mod: the model-based check).
const (
	legChat      = "chat"
	legOpenAI    = "openai"
	legAnthropic = "anthropic"
)

func aliasFor(guardrail, leg string) string { return guardrail + "-" + leg }

func textWorld(m *textMock) func(g *model.Gateway, _ string) {
	return func(g *model.Gateway, _ string) {
		url := m.URL + "/v1"
		g.Routes = []*model.Route{{Name: "vllm", Endpoints: []string{url}, Timeout: 5 * time.Second}}
		g.Providers = []*model.Provider{
			{Name: "openai", BaseURL: url, KeySecret: "OPENAI_API_KEY", API: model.APIOpenAI, Timeout: 5 * time.Second},
			{Name: "anthropic", BaseURL: url, KeySecret: "OPENAI_API_KEY", API: model.APIAnthropic, Timeout: 5 * time.Second},
		}
		g.Models = []*model.LLMModel{
			{Name: "m-chat", Route: "vllm", Upstream: "up-chat", Currency: "USD", MaxOutputTokens: 1000},
			{Name: "m-openai", Provider: "openai", Upstream: "up-openai", Currency: "USD", MaxOutputTokens: 1000},
			{Name: "m-anthropic", Provider: "anthropic", Upstream: "up-anthropic", Currency: "USD", MaxOutputTokens: 1000},
			{Name: "m-guard", Route: "vllm", Upstream: "up-guard", Currency: "USD", MaxOutputTokens: 16},
		}
		g.Aliases = []*model.Alias{{Name: "guard", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "m-guard", Weight: 1}}}}}}
		for _, leg := range []string{legChat, legOpenAI, legAnthropic} {
			rules := []model.AliasRule{{Targets: []model.Target{{Model: "m-" + leg, Weight: 1}}}}
			g.Aliases = append(g.Aliases,
				&model.Alias{Name: aliasFor("pat", leg), Rules: rules, Guardrails: model.Guardrails{Deny: []string{`TOPSECRET-[0-9]+`}}},
				&model.Alias{Name: aliasFor("mod", leg), Rules: rules, Guardrails: model.Guardrails{GuardAlias: "guard"}})
		}
	}
}
