package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// reply is what a scripted model answers: text, or a call of a tool with
// its input's JSON.
type reply struct {
	text      string
	tool      string
	toolInput string
}

// scripted answers a tool call when the request offers the tool named
// callTool and the conversation has no tool result yet, and text
// otherwise: one round trip of tool use, as an agent makes it.
func scripted(text, callTool, input string) func(body gjson.Result, toolResults int) reply {
	return func(body gjson.Result, toolResults int) reply {
		if callTool != "" && toolResults == 0 {
			for _, t := range body.Get("tools").Array() {
				if t.Get("name").Str == callTool || t.Get("function.name").Str == callTool {
					return reply{tool: callTool, toolInput: input}
				}
			}
		}
		return reply{text: text}
	}
}

// seenRequest is a request a mock upstream was sent.
type seenRequest struct {
	Path   string
	Header http.Header
	Body   string
}

// mockModel is the common part of the two mock upstreams.
type mockModel struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []seenRequest
	script func(body gjson.Result, toolResults int) reply
	// status, when not 200, answers an error.
	status int
	// cutAfter > 0 breaks a stream's connection after that many chunks of
	// text, as a model server that crashes mid-answer does.
	cutAfter int
}

func (m *mockModel) record(r *http.Request) (gjson.Result, []byte) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.seen = append(m.seen, seenRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
	m.mu.Unlock()
	return gjson.ParseBytes(body), body
}

func (m *mockModel) requests() []seenRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]seenRequest(nil), m.seen...)
}

func (m *mockModel) cut(i int) {
	m.mu.Lock()
	n := m.cutAfter
	m.mu.Unlock()
	if n > 0 && i+1 == n {
		panic(http.ErrAbortHandler) // the connection breaks
	}
}

func (m *mockModel) answer(body gjson.Result, toolResults int) (reply, int) {
	m.mu.Lock()
	script, status := m.script, m.status
	m.mu.Unlock()
	if script == nil {
		script = scripted("hello from the mock", "", "")
	}
	return script(body, toolResults), status
}

// words splits a reply's text into the chunks a mock streams: a word each.
func chunksOf(text string) []string {
	var out []string
	for i, w := range strings.Fields(text) {
		if i > 0 {
			w = " " + w
		}
		out = append(out, w)
	}
	return out
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chatMock is a chat completions model server, as vLLM is: whole answers
// and streams (with a usage chunk when asked), text and tool calls.
type chatMock struct{ mockModel }

func newChatMock(t testing.TB) *chatMock {
	m := &chatMock{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *chatMock) serve(w http.ResponseWriter, r *http.Request) {
	body, raw := m.record(r)
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such path"}}`, http.StatusNotFound)
		return
	}
	toolResults := 0
	for _, msg := range body.Get("messages").Array() {
		if msg.Get("role").Str == "tool" {
			toolResults++
		}
	}
	rep, status := m.answer(body, toolResults)
	if status != 0 && status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"the chat mock says %d","type":"server_error"}}`, status)
		return
	}
	model := body.Get("model").Str
	prompt := int64(len(raw) / 10)
	output := int64(len(chunksOf(rep.text)))
	finish := "stop"
	if rep.tool != "" {
		output, finish = 5, "tool_calls"
	}
	if !body.Get("stream").Bool() {
		msg := `{"role":"assistant","content":` + jsonString(rep.text) + `}`
		if rep.tool != "" {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":` + jsonString(rep.tool) +
				`,"arguments":` + jsonString(rep.toolInput) + `}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-m","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			model, msg, finish, prompt, output, prompt+output)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(delta, finish string) {
		f := "null"
		if finish != "" {
			f = jsonString(finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-m\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", model, delta, f)
		fl.Flush()
	}
	chunk(`{"role":"assistant","content":""}`, "")
	if rep.tool != "" {
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":`+jsonString(rep.tool)+`,"arguments":""}}]}`, "")
		half := len(rep.toolInput) / 2
		for _, part := range []string{rep.toolInput[:half], rep.toolInput[half:]} {
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(part)+`}}]}`, "")
		}
	}
	for i, c := range chunksOf(rep.text) {
		chunk(`{"content":`+jsonString(c)+`}`, "")
		m.cut(i)
	}
	chunk(`{}`, finish)
	if body.Get("stream_options.include_usage").Bool() {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-m\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
			model, prompt, output, prompt+output)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// anthropicMock is Anthropic's Messages API: whole answers and streams
// (input tokens in message_start, output in message_delta), tool use, and
// count_tokens.
type anthropicMock struct{ mockModel }

func newAnthropicMock(t testing.TB) *anthropicMock {
	m := &anthropicMock{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *anthropicMock) serve(w http.ResponseWriter, r *http.Request) {
	body, raw := m.record(r)
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("x-api-key") == "" || r.Header.Get("anthropic-version") == "" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"x-api-key and anthropic-version are required"}}`)
		return
	}
	prompt := int64(len(raw) / 10)
	switch r.URL.Path {
	case "/v1/messages/count_tokens":
		fmt.Fprintf(w, `{"input_tokens":%d}`, prompt)
		return
	case "/v1/messages":
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"not_found_error","message":"no such path"}}`)
		return
	}
	toolResults := 0
	for _, msg := range body.Get("messages").Array() {
		for _, b := range msg.Get("content").Array() {
			if b.Get("type").Str == "tool_result" {
				toolResults++
			}
		}
	}
	rep, status := m.answer(body, toolResults)
	if status != 0 && status != http.StatusOK {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"the anthropic mock says %d"}}`, status)
		return
	}
	model := body.Get("model").Str
	output := int64(len(chunksOf(rep.text)))
	stop := "end_turn"
	if rep.tool != "" {
		output, stop = 5, "tool_use"
	}
	if !body.Get("stream").Bool() {
		content := `[{"type":"text","text":` + jsonString(rep.text) + `}]`
		if rep.tool != "" {
			content = `[{"type":"tool_use","id":"toolu_1","name":` + jsonString(rep.tool) + `,"input":` + rep.toolInput + `}]`
		}
		fmt.Fprintf(w, `{"id":"msg_mock","type":"message","role":"assistant","model":%q,"content":%s,"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":%d}}`,
			model, content, stop, prompt, output)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	event := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		fl.Flush()
	}
	event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_mock","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, model, prompt))
	if rep.tool != "" {
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":`+jsonString(rep.tool)+`,"input":{}}}`)
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+jsonString(rep.toolInput)+`}}`)
	} else {
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		event("ping", `{"type": "ping"}`)
		for i, c := range chunksOf(rep.text) {
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonString(c)+`}}`)
			m.cut(i)
		}
	}
	event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, output))
	event("message_stop", `{"type":"message_stop"}`)
}
