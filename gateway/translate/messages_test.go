package translate_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/translate"
)

// A request with every part the translation maps: the chat request it
// gives must read back, with the OpenAI SDK's own types, as the same
// conversation.
func TestMessagesToChat(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":300,"temperature":0,"top_p":0.5,"stop_sequences":["END"],
		"system":[{"type":"text","text":"be brief"},{"type":"text","text":"and kind","cache_control":{"type":"ephemeral"}}],
		"thinking":{"type":"enabled","budget_tokens":2048},"metadata":{"user_id":"u1"},
		"tools":[{"name":"ls","description":"list a directory","input_schema":{"type":"object","properties":{"dir":{"type":"string"}},"required":["dir"],"additionalProperties":false}}],
		"tool_choice":{"type":"any","disable_parallel_tool_use":true},
		"messages":[
			{"role":"user","content":[{"type":"text","text":"what is in /?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"let me look"},{"type":"tool_use","id":"toolu_1","name":"ls","input":{"dir":"/"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"bin etc"}]},{"type":"text","text":"and now?"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"ls","input":{"dir":"/x"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"no such dir","is_error":true}]}]}`
	out, err := translate.MessagesToChat([]byte(body), "qwen-32b", true)
	if err != nil {
		t.Fatalf("MessagesToChat: %v", err)
	}
	var q openai.ChatCompletionNewParams
	if err := json.Unmarshal(out, &q); err != nil {
		t.Fatalf("the chat request does not read as one: %v\n%s", err, out)
	}
	r := gjson.ParseBytes(out)
	for path, want := range map[string]string{
		"model": "qwen-32b", "max_tokens": "300", "temperature": "0", "top_p": "0.5", "stop": `["END"]`, "user": "u1",
		"stream": "true", "stream_options.include_usage": "true", "tool_choice": "required", "parallel_tool_calls": "false",
		"tools.0.type": "function", "tools.0.function.name": "ls", "tools.0.function.description": "list a directory",
		"tools.0.function.parameters.required": `["dir"]`, "tools.0.function.parameters.additionalProperties": "false",
		"messages.#":      "7",
		"messages.0.role": "system", "messages.0.content": "be brief\nand kind",
		"messages.1.role": "user", "messages.1.content.0.text": "what is in /?", "messages.1.content.1.image_url.url": "data:image/png;base64,AAAA",
		"messages.2.role": "assistant", "messages.2.content": "let me look", "messages.2.tool_calls.0.id": "toolu_1",
		"messages.2.tool_calls.0.function.name": "ls", "messages.2.tool_calls.0.function.arguments": `{"dir":"/"}`,
		"messages.3.role": "tool", "messages.3.tool_call_id": "toolu_1", "messages.3.content": "bin etc",
		"messages.4.role": "user", "messages.4.content": "and now?",
		"messages.5.role": "assistant", "messages.5.tool_calls.0.id": "toolu_2",
		"messages.6.role": "tool", "messages.6.content": "Error: no such dir",
	} {
		got := r.Get(path)
		if got.String() != want && got.Raw != want {
			t.Errorf("%s = %s, want %s\n%s", path, got.Raw, want, out)
		}
	}
	for _, absent := range []string{"thinking", "cache_control", "budget_tokens", "signature"} {
		if bytes.Contains(out, []byte(absent)) {
			t.Errorf("the chat request carries %q: %s", absent, out)
		}
	}
	// Without a stream, nothing of one is asked for.
	plain, err := translate.MessagesToChat([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"tool","name":"ls"},"tools":[{"name":"ls","input_schema":{"type":"object"}}]}`), "up", false)
	if err != nil {
		t.Fatal(err)
	}
	if p := gjson.ParseBytes(plain); p.Get("stream").Exists() || p.Get("stream_options").Exists() || p.Get("messages.0.content").Str != "hi" ||
		p.Get("tool_choice.function.name").Str != "ls" || p.Get("temperature").Exists() {
		t.Errorf("plain request: %s", plain)
	}
}

// What a chat upstream cannot do is refused with a message naming it.
func TestMessagesToChatRefuses(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for name, tc := range map[string]struct{ body, says string }{
		"a server tool":  {`{"model":"m","max_tokens":5,` + msgs + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "web_search"},
		"code execution": {`{"model":"m","max_tokens":5,` + msgs + `,"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`, "code_execution"},
		"mcp servers":    {`{"model":"m","max_tokens":5,` + msgs + `,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]}`, "mcp_servers"},
		"a container":    {`{"model":"m","max_tokens":5,` + msgs + `,"container":"c1"}`, "container"},
		"a document": {`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}`,
			"messages[0]: a document block"},
		"an image tool result": {`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}]}`,
			"tool_result with content other than text"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := translate.MessagesToChat([]byte(tc.body), "up", false)
			var u *translate.Untranslatable
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "cannot be translated") {
				t.Fatalf("error = %v, want an Untranslatable naming %q", err, tc.says)
			}
		})
	}
}

// A whole chat answer reads, with the Anthropic SDK's own types, as the
// message it stands for; an upstream error becomes Anthropic's error.
func TestChatToMessages(t *testing.T) {
	data := `{"id":"c1","object":"chat.completion","created":1,"model":"qwen","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":"looking","tool_calls":[{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\"dir\":\"/\"}"}}]}}],
		"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`
	body, u, counted := translate.ChatToMessages(200, []byte(data), "claude-sonnet-4-5")
	var m anthropic.Message
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not a message: %v\n%s", err, body)
	}
	if m.ID != "msg_c1" || m.Model != "claude-sonnet-4-5" || m.Role != "assistant" || m.StopReason != anthropic.StopReasonToolUse ||
		m.Usage.InputTokens != 12 || m.Usage.OutputTokens != 7 || len(m.Content) != 2 {
		t.Fatalf("message = %s", body)
	}
	if m.Content[0].Type != "text" || m.Content[0].Text != "looking" || m.Content[1].Type != "tool_use" || m.Content[1].ID != "call_1" ||
		m.Content[1].Name != "ls" || string(m.Content[1].Input) != `{"dir":"/"}` {
		t.Fatalf("content = %s", body)
	}
	if !counted || u.Input != 12 || u.Output != 7 {
		t.Fatalf("usage %+v counted %v", u, counted)
	}
	for finish, want := range map[string]anthropic.StopReason{"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal", "": "end_turn"} {
		if got := translate.StopReason(finish); got != want {
			t.Errorf("StopReason(%q) = %s, want %s", finish, got, want)
		}
	}
	// No usage: not counted.
	if _, _, counted := translate.ChatToMessages(200, []byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}`), "m"); counted {
		t.Errorf("an answer without usage read as counted")
	}
	// An upstream error keeps its status, in Anthropic's shape.
	body, _, _ = translate.ChatToMessages(429, []byte(`{"error":{"message":"slow down","type":"rate_limit"}}`), "m")
	if r := gjson.ParseBytes(body); r.Get("type").Str != "error" || r.Get("error.type").Str != "rate_limit_error" || !strings.Contains(r.Get("error.message").Str, "slow down") {
		t.Fatalf("error body = %s", body)
	}
}

// chatChunks is a chat stream with text, two tool calls, a finish and a
// usage chunk, as vLLM sends it.
var chatChunks = []string{
	`{"id":"c9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
	`{"id":"c9","choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
	`{"id":"c9","choices":[{"index":0,"delta":{"content":"lo \"you\"\n"}}]}`,
	`{"id":"c9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"ls","arguments":""}}]}}]}`,
	`{"id":"c9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"dir\":"}}]}}]}`,
	`{"id":"c9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"/\"}"}}]}}]}`,
	`{"id":"c9","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"cat","arguments":"{\"f\":\"a\"}"}}]}}]}`,
	`{"id":"c9","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"c9","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":25,"total_tokens":65}}`,
	`[DONE]`,
}

// events splits a Messages stream into its events, read with the SDK's
// own event type.
func events(t *testing.T, stream []byte) []anthropic.MessageStreamEventUnion {
	t.Helper()
	var evs []anthropic.MessageStreamEventUnion
	sc := bufio.NewScanner(bytes.NewReader(stream))
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var ev anthropic.MessageStreamEventUnion
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Fatalf("event %s: %v", line, err)
			}
			if ev.Type != name {
				t.Fatalf("event: %s carries data of type %s", name, ev.Type)
			}
			evs = append(evs, ev)
		}
	}
	return evs
}

// A translated stream accumulates, with the SDK's own accumulator, into
// the message the chat stream stood for, with the upstream's usage; its
// message_stop is held for the ledger.
func TestChatToMessagesStream(t *testing.T) {
	s := translate.NewChatToMessagesStream("claude-sonnet-4-5")
	var stream bytes.Buffer
	var held []byte
	var counted bool
	for _, c := range chatChunks {
		out, h, u, ok := s.Chunk([]byte(c))
		stream.Write(out)
		if h != nil {
			held = append([]byte(nil), h...)
		}
		if ok {
			counted = true
			if u.Input != 40 || u.Output != 25 {
				t.Fatalf("usage %+v", u)
			}
		}
	}
	if !counted || held == nil || !bytes.Contains(held, []byte("message_stop")) || bytes.Contains(stream.Bytes(), []byte("message_stop")) {
		t.Fatalf("counted %v held %q", counted, held)
	}
	stream.Write(held)
	var m anthropic.Message
	for _, ev := range events(t, stream.Bytes()) {
		if err := m.Accumulate(ev); err != nil {
			t.Fatalf("accumulate: %v\n%s", err, stream.Bytes())
		}
	}
	if m.ID != "msg_c9" || m.Model != "claude-sonnet-4-5" || m.StopReason != anthropic.StopReasonToolUse || m.Usage.InputTokens != 40 || m.Usage.OutputTokens != 25 {
		t.Fatalf("message %+v\n%s", m, stream.Bytes())
	}
	if len(m.Content) != 3 || m.Content[0].Text != "Hello \"you\"\n" || m.Content[1].Name != "ls" || m.Content[1].ID != "call_a" ||
		string(m.Content[1].Input) != `{"dir":"/"}` || m.Content[2].Name != "cat" || string(m.Content[2].Input) != `{"f":"a"}` {
		t.Fatalf("content %+v\n%s", m.Content, stream.Bytes())
	}
}

// A stream cut before its end is still closed for the caller: the open
// block stops, message_delta counts what was produced (a token per byte
// of its text, as the gateway charges it), message_stop is held.
func TestChatToMessagesStreamEnd(t *testing.T) {
	s := translate.NewChatToMessagesStream("m")
	var stream bytes.Buffer
	for _, c := range chatChunks[:3] {
		out, _, _, _ := s.Chunk([]byte(c))
		stream.Write(out)
	}
	out, held := s.End()
	stream.Write(out)
	stream.Write(held)
	var m anthropic.Message
	for _, ev := range events(t, stream.Bytes()) {
		if err := m.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if m.Content[0].Text != "Hello \"you\"\n" || m.StopReason != anthropic.StopReasonEndTurn || m.Usage.OutputTokens != int64(len("Hello \"you\"\n")) {
		t.Fatalf("message %+v\n%s", m, stream.Bytes())
	}
	if u, counted := s.Usage(); counted || u.Output != int64(len("Hello \"you\"\n")) {
		t.Fatalf("usage %+v %v", u, counted)
	}
	if again, h := s.End(); again != nil || h != nil {
		t.Fatalf("a second End wrote %q %q", again, h)
	}
	// An error event reads as the SDK's error event.
	ev := translate.ErrorEvent(400, `blocked by "x"`)
	if !bytes.HasPrefix(ev, []byte("event: error\ndata: ")) || gjson.GetBytes(bytes.TrimPrefix(bytes.TrimSpace(ev), []byte("event: error\ndata: ")), "error.message").Str != `blocked by "x"` {
		t.Fatalf("error event %q", ev)
	}
}

// No request, and no chunk of a stream, makes the translation panic: a
// body it cannot read is an error, a chunk it cannot read is skipped.
func FuzzMessagesTranslation(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), []byte(chatChunks[3]))
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":null}]}],"tools":[{}]}`), []byte(`{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"image"}]}]}]}`), []byte(`{"error":{}}`))
	f.Fuzz(func(t *testing.T, body, chunk []byte) {
		if req, err := translate.MessagesToChat(body, "up", true); err == nil && (!json.Valid(req) || gjson.GetBytes(req, "model").Str != "up") {
			t.Fatalf("the chat request is not valid JSON for model up: %s", req)
		}
		if out, u, _ := translate.ChatToMessages(200, chunk, "m"); !json.Valid(out) || u.Input < 0 || u.Output < 0 {
			t.Fatalf("the Messages answer %s, usage %+v", out, u)
		}
		s := translate.NewChatToMessagesStream("m")
		s.Chunk(chunk)
		s.Chunk(chunk)
		s.End()
	})
}

// A chunk that is not valid JSON (an upstream's bad escape, or two data
// lines of one event joined by a newline inside a string) must not pass
// its raw text into the caller's events: each event stays one line of
// valid JSON, and the text the guardrail read (gjson's reading of it) is
// what the caller gets.
func TestMessagesStreamKeepsEventsWholeWhenAChunkIsNot(t *testing.T) {
	for _, chunk := range []string{
		`{"choices":[{"index":0,"delta":{"content":"a\x"}}]}`,
		"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\nevent: message_stop\"}}]}",
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"0\0"}}]}}]}`,
		"{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\n\"}}]}}]}",
	} {
		s := translate.NewChatToMessagesStream("m")
		out, _, _, _ := s.Chunk([]byte(chunk))
		checkSSE(t, chunk, out)
		if !bytes.Contains(out, []byte("_delta")) {
			t.Errorf("%q: the delta was dropped: %q", chunk, out)
		}
	}
}
