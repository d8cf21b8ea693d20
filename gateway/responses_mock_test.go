package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	openaiv3 "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
)

// respScript is what a mock model server answers a model: text (streamed a
// word an event), or a function call; or an error status.
type respScript struct {
	text string
	// call, when set, is a function call to make instead of text.
	call *respCall
	// status other than 200 answers an error with errorBody (or OpenAI's
	// shape with a message).
	status    int
	errorBody string
	// cutAfter > 0 breaks a stream's connection after that many events of
	// its text, as a model server that crashes mid-answer does.
	cutAfter int
	// stopShort ends a stream cleanly after its text, without its end
	// (chat: no finish reason, usage or [DONE]; Responses: no
	// response.completed).
	stopShort bool
}

type respCall struct{ id, name, args string }

// respSeen is a request a mock model server got.
type respSeen struct {
	Path, Auth string
	Body       []byte
}

// respMock is a model server on loopback scripted per model name: the
// chat completions mock stands in for vLLM (a translated upstream), the
// Responses mock for OpenAI (a pass-through one).
type respMock struct {
	*httptest.Server
	mu      sync.Mutex
	seen    []respSeen
	scripts map[string]respScript
	// queued are answers a model gives in turn before its respScript.
	queued map[string][]respScript
}

func newRespMock(t testing.TB, serve func(m *respMock, w http.ResponseWriter, body []byte, s respScript)) *respMock {
	m := &respMock{scripts: map[string]respScript{}, queued: map[string][]respScript{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		model := gjson.GetBytes(body, "model").Str
		m.mu.Lock()
		m.seen = append(m.seen, respSeen{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: body})
		s, ok := m.scripts[model]
		if q := m.queued[model]; len(q) > 0 {
			s, ok, m.queued[model] = q[0], true, q[1:]
		}
		m.mu.Unlock()
		if !ok {
			s = respScript{text: "hello from " + model}
		}
		if s.status != 0 && s.status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(s.status)
			if s.errorBody != "" {
				_, _ = io.WriteString(w, s.errorBody)
			} else {
				fmt.Fprintf(w, `{"error":{"message":"upstream says %d","type":"server_error","code":null}}`, s.status)
			}
			return
		}
		serve(m, w, body, s)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *respMock) set(model string, s respScript) {
	m.mu.Lock()
	m.scripts[model] = s
	m.mu.Unlock()
}

// queue has model answer with each of scripts in turn, then as set.
func (m *respMock) queue(model string, scripts ...respScript) {
	m.mu.Lock()
	m.queued[model] = append(m.queued[model], scripts...)
	m.mu.Unlock()
}

func (m *respMock) requests() []respSeen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]respSeen(nil), m.seen...)
}

// respPromptTokens is what a mock says a prompt used: a token per 10 bytes.
func respPromptTokens(body []byte) int { return len(body)/10 + 1 }

// newRespChatMock is a chat completions server as vLLM answers: whole or
// streamed, the stream's usage in a last chunk only when
// stream_options.include_usage asks for it.
func newRespChatMock(t testing.TB) *respMock {
	return newRespMock(t, func(m *respMock, w http.ResponseWriter, body []byte, s respScript) {
		model := gjson.GetBytes(body, "model").Str
		prompt, completion := respPromptTokens(body), words(s.text)
		if s.call != nil {
			completion = words(s.call.args) + 1
		}
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, completion, prompt+completion)
		finish := "stop"
		if s.call != nil {
			finish = "tool_calls"
		}
		if !gjson.GetBytes(body, "stream").Bool() {
			msg := map[string]any{"role": "assistant", "content": s.text}
			if s.call != nil {
				msg["content"] = nil
				msg["tool_calls"] = []any{map[string]any{"id": s.call.id, "type": "function",
					"function": map[string]any{"name": s.call.name, "arguments": s.call.args}}}
			}
			m, _ := json.Marshal(msg)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`,
				model, m, finish, usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := func(delta string, tail string) {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s%s}]}\n\n", model, delta, tail)
			fl.Flush()
		}
		chunk(`{"role":"assistant","content":""}`, "")
		for i, word := range strings.Fields(s.text) {
			if i > 0 {
				word = " " + word
			}
			q, _ := json.Marshal(word)
			chunk(`{"content":`+string(q)+`}`, "")
			if s.cutAfter > 0 && i+1 == s.cutAfter {
				panic(http.ErrAbortHandler)
			}
		}
		if c := s.call; c != nil {
			name, _ := json.Marshal(c.name)
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%s,"arguments":""}}]}`, c.id, name), "")
			half := len(c.args) / 2
			for _, part := range []string{c.args[:half], c.args[half:]} {
				q, _ := json.Marshal(part)
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(q)+`}}]}`, "")
			}
		}
		if s.stopShort {
			return
		}
		chunk(`{}`, fmt.Sprintf(`,"finish_reason":%q`, finish))
		if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":%s}\n\n", model, usage)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	})
}

// newResponsesMock is a Responses API server as OpenAI answers: a
// Response object, or its stream of events with the usage in
// response.completed.
func newResponsesMock(t testing.TB) *respMock {
	return newRespMock(t, func(m *respMock, w http.ResponseWriter, body []byte, s respScript) {
		model := gjson.GetBytes(body, "model").Str
		prompt, completion := respPromptTokens(body), words(s.text)
		var item map[string]any
		if c := s.call; c != nil {
			completion = words(c.args) + 1
			item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": c.id, "name": c.name, "arguments": c.args, "status": "completed"}
		} else {
			item = map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": s.text, "annotations": []any{}}}}
		}
		resp := map[string]any{"id": "resp_mock", "object": "response", "created_at": 1, "status": "completed", "model": model,
			"output": []any{item}, "error": nil, "incomplete_details": nil, "tools": []any{}, "tool_choice": "auto", "parallel_tool_calls": true,
			"usage": map[string]any{"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
				"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}
		if !gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(resp)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		seq := 0
		event := func(v map[string]any) {
			v["sequence_number"] = seq
			seq++
			data, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], data)
			fl.Flush()
		}
		started := map[string]any{}
		for k, v := range resp {
			started[k] = v
		}
		started["status"], started["output"], started["usage"] = "in_progress", []any{}, nil
		event(map[string]any{"type": "response.created", "response": started})
		event(map[string]any{"type": "response.in_progress", "response": started})
		if c := s.call; c != nil {
			event(map[string]any{"type": "response.output_item.added", "output_index": 0,
				"item": map[string]any{"type": "function_call", "id": "fc_1", "call_id": c.id, "name": c.name, "arguments": "", "status": "in_progress"}})
			event(map[string]any{"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": c.args})
			event(map[string]any{"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_1", "arguments": c.args})
		} else {
			event(map[string]any{"type": "response.output_item.added", "output_index": 0,
				"item": map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []any{}}})
			event(map[string]any{"type": "response.content_part.added", "output_index": 0, "item_id": "msg_1", "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for i, word := range strings.Fields(s.text) {
				if i > 0 {
					word = " " + word
				}
				event(map[string]any{"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": word, "logprobs": []any{}})
				if s.cutAfter > 0 && i+1 == s.cutAfter {
					panic(http.ErrAbortHandler)
				}
			}
			event(map[string]any{"type": "response.output_text.done", "output_index": 0, "item_id": "msg_1", "content_index": 0, "text": s.text, "logprobs": []any{}})
			event(map[string]any{"type": "response.content_part.done", "output_index": 0, "item_id": "msg_1", "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": s.text, "annotations": []any{}}})
		}
		if s.stopShort {
			return
		}
		event(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
		event(map[string]any{"type": "response.completed", "response": resp})
	})
}

// The mocks are checked against the official clients, so that the door's
// tests meet servers that answer as the real ones do.
func TestTheModelMocksSpeakTheirAPIs(t *testing.T) {
	ctx := context.Background()
	rm := newResponsesMock(t)
	rm.set("gpt-x", respScript{text: "two words"})
	c := openaiv3.NewClient(option.WithBaseURL(rm.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-x", Input: responses.ResponseNewParamsInputUnion{OfString: openaiv3.String("hi")}})
	if err != nil || r.OutputText() != "two words" || r.Usage.OutputTokens != 2 {
		t.Fatalf("responses: %+v %v", r, err)
	}
	st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-x", Input: responses.ResponseNewParamsInputUnion{OfString: openaiv3.String("hi")}})
	var text strings.Builder
	var usage int64
	for st.Next() {
		ev := st.Current()
		text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		if ev.Type == "response.completed" {
			usage = ev.AsResponseCompleted().Response.Usage.OutputTokens
		}
	}
	if st.Err() != nil || text.String() != "two words" || usage != 2 {
		t.Fatalf("responses stream: %q %d %v", text.String(), usage, st.Err())
	}

	cm := newRespChatMock(t)
	cm.set("meta/llama", respScript{call: &respCall{id: "call_1", name: "get_weather", args: `{"city":"Paris"}`}})
	cc := openaiv3.NewClient(option.WithBaseURL(cm.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	acc := openaiv3.ChatCompletionAccumulator{}
	cs := cc.Chat.Completions.NewStreaming(ctx, openaiv3.ChatCompletionNewParams{Model: "meta/llama",
		Messages:      []openaiv3.ChatCompletionMessageParamUnion{openaiv3.UserMessage("weather?")},
		StreamOptions: openaiv3.ChatCompletionStreamOptionsParam{IncludeUsage: openaiv3.Bool(true)}})
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	if cs.Err() != nil || len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 ||
		acc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || acc.Usage.CompletionTokens != 2 {
		t.Fatalf("chat stream: %+v %v", acc.Choices, cs.Err())
	}
}
