package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
)

// codexLike is a request as Codex CLI sends one on its second turn: the
// instructions, developer notes, the user's prompt, the model's function
// call and its output, a reasoning item, function tools and a namespace.
const codexLike = `{"model":"gpt-5-codex","stream":true,"store":false,"instructions":"You are Codex.","temperature":0,"top_p":1,
 "max_output_tokens":256,"parallel_tool_calls":false,"tool_choice":{"type":"function","name":"exec_command"},
 "text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object","properties":{"a":{"type":"string"}}},"strict":true}},
 "input":[
  {"type":"message","role":"developer","content":[{"type":"input_text","text":"sandbox: read-only"}]},
  {"role":"user","content":[{"type":"input_text","text":"what is here? "},{"type":"input_text","text":"list it"}]},
  {"role":"user","content":[{"type":"input_text","text":"and this"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]},
  {"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"opaque"},
  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
  {"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"},
  {"type":"function_call","call_id":"call_2","namespace":"multi_agent_v1","name":"close_agent","arguments":"{}"},
  {"type":"function_call_output","call_id":"call_1","output":"a.go\nb.go"},
  {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"closed"}]}
 ],
 "tools":[
  {"type":"function","name":"exec_command","description":"Runs a command","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}},
  {"type":"namespace","name":"multi_agent_v1","description":"agents","tools":[{"type":"function","name":"close_agent","parameters":{"type":"object"}}]}
 ]}`

func TestResponsesToChatMapsACodexRequest(t *testing.T) {
	tr, err := ResponsesToChat([]byte(codexLike))
	if err != nil {
		t.Fatal(err)
	}
	body, err := tr.Request("meta/llama")
	if err != nil {
		t.Fatal(err)
	}
	var c openai.ChatCompletionRequest
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	root := gjson.ParseBytes(body)
	if c.Model != "meta/llama" || !c.Stream || c.StreamOptions == nil || !c.StreamOptions.IncludeUsage || root.Get("max_tokens").Int() != 256 ||
		root.Get("temperature").Raw != "0" || root.Get("top_p").Raw != "1" || root.Get("parallel_tool_calls").Raw != "false" {
		t.Fatalf("settings: %s", body)
	}
	type msg struct{ role, content, toolCallID string }
	want := []msg{
		{"system", "You are Codex.", ""},
		{"system", "sandbox: read-only", ""},
		{"user", "what is here? list it", ""},
		{"user", "", ""}, // an image: parts
		{"assistant", "Let me look.", ""},
		{"tool", "a.go\nb.go", "call_1"},
		{"tool", "closed", "call_2"},
	}
	if len(c.Messages) != len(want) {
		t.Fatalf("%d messages: %s", len(c.Messages), body)
	}
	for i, w := range want {
		m := c.Messages[i]
		if m.Role != w.role || m.Content != w.content || m.ToolCallID != w.toolCallID {
			t.Errorf("message %d: %+v, want %+v", i, m, w)
		}
	}
	if parts := c.Messages[3].MultiContent; len(parts) != 2 || parts[0].Text != "and this" ||
		parts[1].ImageURL == nil || parts[1].ImageURL.URL != "data:image/png;base64,AAAA" || parts[1].ImageURL.Detail != "low" {
		t.Fatalf("image message: %+v", c.Messages[3])
	}
	// Both calls of the turn are the assistant message's, the namespace's
	// flattened into one name.
	tcs := c.Messages[4].ToolCalls
	if len(tcs) != 2 || tcs[0].ID != "call_1" || tcs[0].Function.Name != "exec_command" || tcs[0].Function.Arguments != `{"cmd":"ls"}` ||
		tcs[1].Function.Name != "multi_agent_v1__close_agent" {
		t.Fatalf("tool calls: %+v", tcs)
	}
	if len(c.Tools) != 2 || c.Tools[0].Function.Name != "exec_command" || c.Tools[0].Function.Description != "Runs a command" ||
		root.Get("tools.0.function.parameters.properties.cmd.type").Str != "string" || c.Tools[1].Function.Name != "multi_agent_v1__close_agent" {
		t.Fatalf("tools: %s", root.Get("tools").Raw)
	}
	if root.Get("tool_choice.type").Str != "function" || root.Get("tool_choice.function.name").Str != "exec_command" {
		t.Fatalf("tool_choice: %s", root.Get("tool_choice").Raw)
	}
	if root.Get("response_format.type").Str != "json_schema" || root.Get("response_format.json_schema.name").Str != "answer" ||
		!root.Get("response_format.json_schema.strict").Bool() || root.Get("response_format.json_schema.schema.properties.a.type").Str != "string" {
		t.Fatalf("response_format: %s", root.Get("response_format").Raw)
	}
	if strings.Contains(string(body), "opaque") || root.Get("store").Exists() {
		t.Fatalf("a reasoning item or store went upstream: %s", body)
	}
}

func TestResponsesToChatTakesAPlainRequest(t *testing.T) {
	tr, err := ResponsesToChat([]byte(`{"model":"chat","input":"hello","store":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := tr.Request("m")
	root := gjson.ParseBytes(body)
	if root.Get("messages.#").Int() != 1 || root.Get("messages.0.role").Str != "user" || root.Get("messages.0.content").Str != "hello" ||
		root.Get("stream").Bool() || root.Get("stream_options").Exists() || root.Get("temperature").Exists() || root.Get("max_tokens").Exists() {
		t.Fatalf("%s", body)
	}
}

func TestResponsesToChatRefusesWhatAChatUpstreamCannotDo(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"m","previous_response_id":"resp_1","input":"x"}`:                                     "previous_response_id: the gateway stores no responses",
		`{"model":"m","conversation":"conv_1","input":"x"}`:                                             "conversation",
		`{"model":"m","background":true,"input":"x"}`:                                                   "background",
		`{"model":"m","prompt":{"id":"pmpt_1"},"input":"x"}`:                                            "stored prompt",
		`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`:                                     "built-in tool web_search",
		`{"model":"m","input":"x","tools":[{"type":"file_search","vector_store_ids":[]}]}`:              "built-in tool file_search",
		`{"model":"m","input":"x","tools":[{"type":"code_interpreter"}]}`:                               "built-in tool code_interpreter",
		`{"model":"m","input":"x","tools":[{"type":"mcp","server_label":"s"}]}`:                         "built-in tool mcp",
		`{"model":"m","input":"x","tools":[{"type":"image_generation"}]}`:                               "built-in tool image_generation",
		`{"model":"m","input":"x","tools":[{"type":"computer_use_preview"}]}`:                           "built-in tool computer_use_preview",
		`{"model":"m","input":"x","tool_choice":{"type":"web_search"}}`:                                 "tool_choice",
		`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`:                                "item_reference",
		`{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`:                                "web_search_call",
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]}`: "file_id",
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]}`:  "input_file",
	} {
		_, err := ResponsesToChat([]byte(body))
		if !errors.Is(err, ErrUntranslatable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func TestResponsesAnswerTranslatesAWholeChatAnswer(t *testing.T) {
	tr, err := ResponsesToChat([]byte(codexLike))
	if err != nil {
		t.Fatal(err)
	}
	chat := `{"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"meta/llama","choices":[{"index":0,
	 "message":{"role":"assistant","content":"Two files.","tool_calls":[
	  {"id":"call_9","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"cat a.go\"}"}},
	  {"id":"call_10","type":"function","function":{"name":"multi_agent_v1__close_agent","arguments":"{}"}}]},
	 "finish_reason":"tool_calls"}],
	 "usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":8}}}`
	body, u, counted := tr.Answer(200, []byte(chat))
	var r responses.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if !counted || u.Input != 40 || u.Output != 12 {
		t.Fatalf("usage %+v %v", u, counted)
	}
	if r.Object != "response" || !strings.HasPrefix(r.ID, "resp_") || r.Status != responses.ResponseStatusCompleted || r.Model != "gpt-5-codex" ||
		r.OutputText() != "Two files." || r.Usage.InputTokens != 40 || r.Usage.OutputTokens != 12 || r.Usage.TotalTokens != 52 ||
		r.Usage.InputTokensDetails.CachedTokens != 8 || r.Instructions.OfString != "You are Codex." || gjson.GetBytes(body, "store").Raw != "false" {
		t.Fatalf("response: %s", body)
	}
	if len(r.Output) != 3 || r.Output[1].Type != "function_call" || r.Output[1].CallID != "call_9" || r.Output[1].Name != "exec_command" ||
		r.Output[1].Arguments.OfString != `{"cmd":"cat a.go"}` || r.Output[2].Name != "close_agent" || r.Output[2].Namespace != "multi_agent_v1" {
		t.Fatalf("output: %s", body)
	}

	// Out of tokens: incomplete, with the reason.
	chat = `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"Two"},"finish_reason":"length"}]}`
	body, _, counted = tr.Answer(200, []byte(chat))
	r = responses.Response{}
	if err := json.Unmarshal(body, &r); err != nil || counted || r.Status != responses.ResponseStatusIncomplete || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Fatalf("incomplete: %v %v %s", err, counted, body)
	}
}

func TestResponsesAnswerKeepsOrWrapsUpstreamErrors(t *testing.T) {
	tr, _ := ResponsesToChat([]byte(`{"model":"m","input":"x"}`))
	openAIShaped := `{"error":{"message":"model is overloaded","type":"server_error","code":"overloaded"}}`
	if body, _, counted := tr.Answer(503, []byte(openAIShaped)); string(body) != openAIShaped || counted {
		t.Fatalf("kept: %s", body)
	}
	body, _, _ := tr.Answer(400, []byte(`{"object":"error","message":"This model's maximum context length is 4096 tokens","type":"BadRequestError","code":400}`))
	if gjson.GetBytes(body, "error.message").Str != "This model's maximum context length is 4096 tokens" || gjson.GetBytes(body, "error.type").Str != "invalid_request_error" {
		t.Fatalf("wrapped: %s", body)
	}
	body, _, _ = tr.Answer(502, []byte("Bad Gateway"))
	if gjson.GetBytes(body, "error.message").Str != "Bad Gateway" || gjson.GetBytes(body, "error.type").Str != "server_error" {
		t.Fatalf("plain: %s", body)
	}
}

// sse splits a stream into its events' names and data.
func sse(t *testing.T, stream []byte) (names []string, data [][]byte) {
	t.Helper()
	for _, ev := range bytes.Split(bytes.TrimSpace(stream), []byte("\n\n")) {
		name, rest, ok := bytes.Cut(ev, []byte("\n"))
		if !ok || !bytes.HasPrefix(name, []byte("event: ")) || !bytes.HasPrefix(rest, []byte("data: ")) {
			t.Fatalf("malformed event %q", ev)
		}
		names = append(names, string(name[len("event: "):]))
		data = append(data, rest[len("data: "):])
	}
	return names, data
}

func chunk(delta string, extra string) []byte {
	return []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `}]` + extra + `}`)
}

func TestResponsesStreamTranslatesAChatStream(t *testing.T) {
	tr, err := ResponsesToChat([]byte(codexLike))
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Stream()
	var all, held []byte
	var usage struct {
		in, out int64
		counted bool
	}
	feed := func(data string) {
		out, h, u, counted := s.Event([]byte(data))
		all = append(all, out...)
		held = append(held, h...)
		if counted {
			usage.in, usage.out, usage.counted = u.Input, u.Output, true
		}
	}
	feed(string(chunk(`{"role":"assistant","content":""}`, "")))
	feed(string(chunk(`{"content":"Two \"files\""}`, "")))
	feed(string(chunk(`{"content":" here.\n"}`, "")))
	feed(string(chunk(`{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"exec_command","arguments":""}}]}`, "")))
	feed(string(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\":"}}]}`, "")))
	feed(string(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`, "")))
	feed(string(chunk(`{"tool_calls":[{"index":1,"id":"call_10","type":"function","function":{"name":"multi_agent_v1__close_agent","arguments":"{}"}}]}`, "")))
	feed(`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	feed(`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":9,"total_tokens":49}}`)
	if len(held) != 0 {
		t.Fatal("the terminal event came before [DONE]")
	}
	feed("[DONE]")
	if !usage.counted || usage.in != 40 || usage.out != 9 {
		t.Fatalf("usage %+v", usage)
	}
	names, data := sse(t, append(all, held...))
	wantNames := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if strings.Join(names, " ") != strings.Join(wantNames, " ") {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(wantNames, "\n"))
	}
	var deltas strings.Builder
	for i, d := range data {
		var ev responses.ResponseStreamEventUnion
		if err := json.Unmarshal(d, &ev); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, d)
		}
		if ev.Type != names[i] || ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d: type %q sequence %d: %s", i, ev.Type, ev.SequenceNumber, d)
		}
		switch ev.Type {
		case "response.output_text.delta":
			e := ev.AsResponseOutputTextDelta()
			if e.OutputIndex != 0 || !strings.HasPrefix(e.ItemID, "msg_") {
				t.Fatalf("delta %s", d)
			}
			deltas.WriteString(e.Delta)
		case "response.output_text.done":
			if e := ev.AsResponseOutputTextDone(); e.Text != "Two \"files\" here.\n" {
				t.Fatalf("text done %s", d)
			}
		case "response.function_call_arguments.done":
			e := ev.AsResponseFunctionCallArgumentsDone()
			if e.OutputIndex == 1 && e.Arguments != `{"cmd":"ls"}` || e.OutputIndex == 2 && e.Arguments != "{}" {
				t.Fatalf("arguments done %s", d)
			}
		}
	}
	if deltas.String() != "Two \"files\" here.\n" {
		t.Fatalf("deltas %q", deltas.String())
	}
	var done responses.ResponseCompletedEvent
	if err := json.Unmarshal(data[len(data)-1], &done); err != nil {
		t.Fatal(err)
	}
	r := done.Response
	if r.Status != responses.ResponseStatusCompleted || r.Usage.InputTokens != 40 || r.Usage.OutputTokens != 9 || len(r.Output) != 3 ||
		r.OutputText() != "Two \"files\" here.\n" || r.Output[1].CallID != "call_9" || r.Output[1].Arguments.OfString != `{"cmd":"ls"}` ||
		r.Output[2].Name != "close_agent" || r.Output[2].Namespace != "multi_agent_v1" || r.Model != "gpt-5-codex" {
		t.Fatalf("completed: %s", data[len(data)-1])
	}
	// Nothing after the end.
	if out, h, _, _ := s.Event([]byte("[DONE]")); len(out)+len(h) != 0 {
		t.Fatal("a second end")
	}
}

func TestResponsesStreamEndsACutStreamAsFailed(t *testing.T) {
	tr, _ := ResponsesToChat([]byte(`{"model":"m","input":"x","stream":true}`))
	s := tr.Stream()
	out, _, _, _ := s.Event(chunk(`{"content":"half"}`, ""))
	all := append([]byte(nil), out...)
	out, held := s.End()
	names, data := sse(t, append(append(all, out...), held...))
	if names[len(names)-2] != "error" || names[len(names)-1] != "response.failed" {
		t.Fatalf("events %v", names)
	}
	var failed responses.ResponseFailedEvent
	if err := json.Unmarshal(data[len(data)-1], &failed); err != nil {
		t.Fatal(err)
	}
	if failed.Response.Status != responses.ResponseStatusFailed || failed.Response.Error.Message != "the model's stream was cut off before its end" ||
		failed.Response.OutputText() != "half" {
		t.Fatalf("failed: %s", data[len(data)-1])
	}

	// One that finished but sent no [DONE] completes.
	s = tr.Stream()
	s.Event(chunk(`{"content":"all"}`, ""))
	s.Event([]byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`))
	_, held = s.End()
	if gjson.GetBytes(held[bytes.Index(held, []byte("data: "))+6:], "response.incomplete_details.reason").Str != "max_output_tokens" ||
		!bytes.HasPrefix(held, []byte("event: response.incomplete\n")) {
		t.Fatalf("held %s", held)
	}

	// A guardrail's block: an error event and response.failed, at once.
	s = tr.Stream()
	s.Event(chunk(`{"content":"secret"}`, ""))
	ev := s.ErrorEvent("guardrail_blocked", "the model's answer was blocked by the guardrail pii")
	names, data = sse(t, ev)
	var e responses.ResponseErrorEvent
	if len(names) != 2 || names[0] != "error" || json.Unmarshal(data[0], &e) != nil || e.Code != "guardrail_blocked" ||
		names[1] != "response.failed" || gjson.GetBytes(data[1], "response.error.code").Str != "guardrail_blocked" {
		t.Fatalf("error event %s", ev)
	}
	if out, held := s.End(); len(out)+len(held) != 0 {
		t.Fatal("an end after the error")
	}

	// An upstream's error chunk fails the stream.
	s = tr.Stream()
	out, held, _, _ = s.Event([]byte(`{"error":{"message":"out of memory","type":"server_error"}}`))
	if !bytes.Contains(out, []byte("out of memory")) || !bytes.HasPrefix(held, []byte("event: response.failed\n")) {
		t.Fatalf("error chunk: %s %s", out, held)
	}
}

func TestResponsesFailureNumbersOnFromThePassedStream(t *testing.T) {
	names, data := sse(t, ResponsesFailure("gpt-x", 7, "guardrail_blocked", "blocked by pii"))
	var e responses.ResponseErrorEvent
	var f responses.ResponseFailedEvent
	if len(names) != 2 || json.Unmarshal(data[0], &e) != nil || json.Unmarshal(data[1], &f) != nil ||
		e.SequenceNumber != 7 || e.Code != "guardrail_blocked" || e.Message != "blocked by pii" ||
		f.SequenceNumber != 8 || f.Response.Status != responses.ResponseStatusFailed || f.Response.Error.Message != "blocked by pii" || f.Response.Model != "gpt-x" {
		t.Fatalf("%v %s", names, data)
	}
}
