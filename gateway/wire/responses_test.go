package wire

import (
	"slices"
	"strings"
	"testing"
)

func TestParseResponsesReadsEveryTextOfTheInput(t *testing.T) {
	body := `{"model":"gpt-5-codex","stream":true,"max_output_tokens":300,"instructions":"be brief",
	"input":[
	 {"role":"developer","content":"dev notes"},
	 {"type":"message","role":"user","content":[{"type":"input_text","text":"list files"},{"type":"input_image","image_url":"https://x/y.png"}]},
	 {"type":"function_call","call_id":"c1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},
	 {"type":"function_call_output","call_id":"c1","output":"a.go b.go"},
	 {"role":"assistant","content":[{"type":"output_text","text":"two files"}]},
	 {"type":"reasoning","id":"r1","summary":[{"type":"summary_text","text":"thought"}],"encrypted_content":"xyz"}
	],
	"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}}]}`
	c, err := ParseResponses([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	// What the guardrails read: every text, the image's URL, the tools'
	// names and schemas, in the order written.
	want := []string{"be brief", "dev notes", "list files", "https://x/y.png", "shell", `{"cmd":"ls"}`, "a.go b.go", "two files", "thought",
		"shell", `{"type":"object"}`}
	if c.Model != "gpt-5-codex" || !c.Stream || c.MaxTokens != 300 || c.Choices != 1 || !slices.Equal(c.Input, want) {
		t.Fatalf("call %+v", c)
	}
	var text int64
	for _, s := range []string{"be brief", "dev notes", "list files", `{"cmd":"ls"}`, "a.go b.go", "two files", "thought"} {
		text += int64(len(s))
	}
	tools := int64(len(`[{"type":"function","name":"shell","parameters":{"type":"object"}}]`))
	// instructions and six items, each a message's overhead.
	if wantTokens := text + 7*perMessage + tools + 3; c.InputTokens != wantTokens {
		t.Fatalf("input tokens %d, want %d", c.InputTokens, wantTokens)
	}
	// The image, by URL, costs the most a model bills for one.
	if !slices.Equal(c.Images, []Image{{}}) || c.MediaTokens(BillsOpenAI, 1445) != 1445 {
		t.Fatalf("images %+v", c.Images)
	}
}

func TestParseResponsesTakesAStringInput(t *testing.T) {
	c, err := ParseResponses([]byte(`{"model":"m","input":"hello"}`))
	if err != nil || c.Stream || c.MaxTokens != 0 || !slices.Equal(c.Input, []string{"hello"}) || c.InputTokens != 5+perMessage {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestParseResponsesRefusesBadRequests(t *testing.T) {
	for body, want := range map[string]string{
		`not json`:                  "not valid JSON",
		`[1]`:                       "JSON object",
		`{"input":"x"}`:             "model is required",
		`{"model":"m"}`:             "input is required",
		`{"model":"m","input":3}`:   "input is required",
		`{"model":"m","input":[3]}`: "input[0] must be an object",
		`{"model":"m","input":[{"content":"x"}]}`:                   "input[0] needs a type",
		`{"model":"m","input":[{"role":"user","content":3}]}`:       "input[0].content must be",
		`{"model":"m","input":"x","max_output_tokens":-1}`:          "max_output_tokens must not be negative",
		`{"model":"m","input":"x","max_output_tokens":99999999999}`: "max_output_tokens must be at most",
	} {
		if _, err := ParseResponses([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	// A stored response's continuation has no input of its own: read, so
	// that the door can say why it cannot be translated.
	if _, err := ParseResponses([]byte(`{"model":"m","previous_response_id":"resp_1"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestResponsesUsageAndOutputText(t *testing.T) {
	whole := `{"id":"resp_1","object":"response","status":"completed","output":[
	 {"type":"reasoning","summary":[{"type":"summary_text","text":"think "}]},
	 {"type":"message","content":[{"type":"output_text","text":"hi "},{"type":"refusal","refusal":"no"}]},
	 {"type":"function_call","name":"f","arguments":"{\"a\":1}"}],
	 "usage":{"input_tokens":12,"output_tokens":7,"total_tokens":19}}`
	if u, ok := ResponsesUsage([]byte(whole)); !ok || u != (Usage{12, 7}) {
		t.Fatalf("usage %+v %v", u, ok)
	}
	if got := ResponsesOutputText([]byte(whole)); got != `think hi nof{"a":1}` {
		t.Fatalf("text %q", got)
	}
	ev := `{"type":"response.completed","sequence_number":9,"response":{"usage":{"input_tokens":3,"output_tokens":-4}}}`
	if u, ok := ResponsesUsage([]byte(ev)); !ok || u != (Usage{3, 0}) {
		t.Fatalf("event usage %+v %v", u, ok)
	}
	if _, ok := ResponsesUsage([]byte(`{"type":"response.created","response":{"usage":null}}`)); ok {
		t.Fatal("no usage read as usage")
	}
	if got := ResponsesEventText("", []byte(`{"type":"response.output_text.delta","delta":"tok"}`)); got != "tok" {
		t.Fatalf("delta %q", got)
	}
	if got := ResponsesEventText("response.function_call_arguments.delta", []byte(`{"delta":"{\"x"}`)); got != `{"x` {
		t.Fatalf("args delta %q", got)
	}
	if got := ResponsesEventText("response.output_text.done", []byte(`{"text":"all"}`)); got != "" {
		t.Fatalf("done counted again: %q", got)
	}
	for name, want := range map[string]string{
		"response.reasoning_summary_text.delta": "why", "response.reasoning_text.delta": "why", "response.refusal.delta": "why",
		"response.custom_tool_call_input.delta": "why", "response.audio.transcript.delta": "why", "response.audio.delta": "",
	} {
		if got := ResponsesEventText(name, []byte(`{"delta":"why"}`)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got := ResponsesEventText("", []byte(`{"type":"response.output_item.added","item":{"type":"function_call","name":"f","arguments":""}}`)); got != "f" {
		t.Fatalf("a tool call's name %q", got)
	}
}
