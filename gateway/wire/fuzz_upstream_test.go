package wire_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/klique-ai/klique/gateway/wire"
)

// FuzzUpstreamAnswer feeds an upstream's answer, or one event of its
// stream (name, data), to every reader of answers: usage and the generated
// text (what guardrails read and what is charged when no usage comes). An
// upstream is trusted to serve models, not to be well formed: nothing may
// panic, no usage is negative (a negative count would give back what other
// calls spent), and the text read of a valid answer is never longer than
// the answer (escapes only shorten).
//
//	go test -run '^$' -fuzz '^FuzzUpstreamAnswer$' -fuzztime 30s ./gateway/wire
func FuzzUpstreamAnswer(f *testing.F) {
	f.Add("", []byte(`{"choices":[{"index":0,"delta":{"content":"hi","reasoning_content":"r","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":-4}}`))
	f.Add("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"f","input":{"a":1}}}`))
	f.Add("content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`))
	f.Add("message_start", []byte(`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}`))
	f.Add("message_delta", []byte(`{"type":"message_delta","usage":{"input_tokens":"x","output_tokens":7}}`))
	f.Add("response.output_text.delta", []byte(`{"type":"response.output_text.delta","delta":"hé"}`))
	f.Add("response.completed", []byte(`{"type":"response.completed","response":{"output":[{"type":"function_call","name":"f","arguments":"{}"},{"type":"reasoning","summary":[{"text":"s"}]}],"usage":{"input_tokens":1,"output_tokens":2}}}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		usages := map[string]wire.Usage{}
		usages["chat"], _ = wire.UsageOf(data)
		usages["messages"], _ = wire.MessagesUsage(data)
		usages["responses"], _ = wire.ResponsesUsage(data)
		in, out, _, _ := wire.MessagesEventUsage(name, data)
		usages["messages event"] = wire.Usage{Input: in, Output: out}
		for door, u := range usages {
			if u.Input < 0 || u.Output < 0 {
				t.Fatalf("%s usage %+v is negative", door, u)
			}
		}
		texts := map[string]string{
			"chat":              wire.OutputText(data),
			"messages":          wire.MessagesOutputText(data),
			"messages event":    wire.MessagesEventText(name, data),
			"responses":         wire.ResponsesOutputText(data),
			"responses event":   wire.ResponsesEventText(name, data),
			"responses unnamed": wire.ResponsesEventText("", data),
		}
		if n := wire.CountOutput(data); n != int64(len(texts["chat"])) {
			t.Fatalf("CountOutput %d, OutputText %d bytes", n, len(texts["chat"]))
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			return
		}
		for door, text := range texts {
			if len(text) > len(data) {
				t.Fatalf("%s: read %d bytes of text from %d: %q", door, len(text), len(data), data)
			}
		}
	})
}
