package translate_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/translate"
)

// checkSSE fails t unless out is whole server-sent events, each an
// "event:" line and one "data:" line of valid JSON: what the caller's SDK
// parses. An upstream's chunk, however malformed, must never break the
// framing of the stream the caller gets (a raw newline in a data line
// would end an event and start one the upstream wrote).
func checkSSE(t *testing.T, what string, out []byte) {
	t.Helper()
	if len(out) == 0 {
		return
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("%s: the events do not end with a blank line: %q", what, out)
	}
	for _, ev := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
		lines := bytes.Split(ev, []byte("\n"))
		if len(lines) != 2 || !bytes.HasPrefix(lines[0], []byte("event: ")) || !bytes.HasPrefix(lines[1], []byte("data: ")) {
			t.Fatalf("%s: an event is not one event line and one data line: %q\nall: %q", what, ev, out)
		}
		data := bytes.TrimPrefix(lines[1], []byte("data: "))
		if !json.Valid(data) {
			t.Fatalf("%s: an event's data is not JSON: %q", what, data)
		}
		if name := string(bytes.TrimPrefix(lines[0], []byte("event: "))); gjson.GetBytes(data, "type").Str != name {
			t.Fatalf("%s: event %q has data of type %q", what, name, gjson.GetBytes(data, "type").Str)
		}
	}
}

// chunksOf splits a fuzzed stream into the data of its events: one a line.
func chunksOf(stream []byte) [][]byte {
	return bytes.Split(stream, []byte("\n"))
}

// FuzzMessagesStream feeds a chat stream, a chunk a line, to the
// translation the Messages door uses for a chat upstream. Whatever the
// upstream sends, the caller gets whole Messages events of valid JSON, and
// the usage is never negative.
//
//	go test -run '^$' -fuzz '^FuzzMessagesStream$' -fuzztime 30s ./gateway/translate
func FuzzMessagesStream(f *testing.F) {
	f.Add([]byte(`{"id":"c9","choices":[{"index":0,"delta":{"content":"Hel"}}]}
{"id":"c9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"ls","arguments":"{\"d\":"}}]}}]}
{"id":"c9","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}
{"id":"c9","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":25}}
[DONE]`))
	f.Add([]byte(`{"choices":[{"delta":{"content":5}}]}
{"choices":[{"delta":{"content":["a"],"tool_calls":[{"index":"x","function":{"arguments":{"a":1}}}]}}]}
{"error":{"message":"boom"}}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		s := translate.NewChatToMessagesStream("m")
		for _, c := range chunksOf(stream) {
			out, held, u, _ := s.Chunk(c)
			checkSSE(t, "chunk", out)
			checkSSE(t, "held", held)
			if u.Input < 0 || u.Output < 0 {
				t.Fatalf("usage %+v", u)
			}
		}
		out, held := s.End()
		checkSSE(t, "end", out)
		checkSSE(t, "end held", held)
		if u, _ := s.Usage(); u.Input < 0 || u.Output < 0 {
			t.Fatalf("usage %+v", u)
		}
	})
}

// FuzzResponsesTranslation feeds a Responses request to the translation
// for a chat upstream, and an upstream's whole answer to the translation
// back. Nothing panics; a request that translates is a valid chat body; an
// answer translates to a valid Response object (or an error in OpenAI's
// shape).
//
//	go test -run '^$' -fuzz '^FuzzResponsesTranslation$' -fuzztime 30s ./gateway/translate
func FuzzResponsesTranslation(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":"hi"}`), []byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`))
	f.Add([]byte(`{"model":"m","instructions":"be brief","temperature":0.5,"top_p":1,"max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_image","image_url":"https://x/y.png"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"auto","text":{"format":{"type":"json_schema","name":"s","schema":{}}}}`),
		[]byte(`{"choices":[{"message":{"tool_calls":[{"id":"t","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"length"}]}`))
	f.Add([]byte(`{"model":"m","input":[{"type":"reasoning"}],"tools":[{"type":"web_search"}]}`), []byte(`{"object":"error","message":"bad"}`))
	f.Fuzz(func(t *testing.T, body, answer []byte) {
		tr, err := translate.ResponsesToChat(body)
		if err != nil {
			if tr != nil {
				t.Fatalf("a refusal (%v) returned a translation", err)
			}
			return
		}
		req, err := tr.Request("up")
		if err != nil {
			t.Fatalf("a translated request does not encode: %v", err)
		}
		if !json.Valid(req) || gjson.GetBytes(req, "model").Str != "up" {
			t.Fatalf("the chat request is not valid JSON for model up: %s", req)
		}
		for _, status := range []int{200, 400, 500} {
			out, u, _ := tr.Answer(status, answer)
			if u.Input < 0 || u.Output < 0 {
				t.Fatalf("usage %+v", u)
			}
			if status == 200 && !json.Valid(out) {
				t.Fatalf("the Response object is not JSON: %s", out)
			}
		}
		if out := translate.ResponsesErrorBody(502, answer); !json.Valid(out) && !gjson.GetBytes(answer, "error.message").Exists() {
			t.Fatalf("the error body is not JSON: %s", out)
		}
	})
}

// FuzzResponsesStream feeds a chat stream, a chunk a line, to the
// Responses stream translation of a request, then ends it (or fails it, as
// a guardrail does). The caller gets whole Responses events of valid JSON,
// numbered in order.
//
//	go test -run '^$' -fuzz '^FuzzResponsesStream$' -fuzztime 30s ./gateway/translate
func FuzzResponsesStream(f *testing.F) {
	f.Add([]byte(`{"id":"c9","choices":[{"index":0,"delta":{"content":"Hel"}}]}
{"id":"c9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"ls","arguments":"{\"d\":"}}]}}]}
{"id":"c9","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}
{"id":"c9","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":25}}
[DONE]`), false)
	f.Add([]byte(`{"choices":[{"delta":{"content":"a\u"}}]}
{"choices":[{"delta":{"tool_calls":[{"index":-1,"function":{"arguments":7}}]}}]}`), true)
	f.Fuzz(func(t *testing.T, stream []byte, blocked bool) {
		tr, err := translate.ResponsesToChat([]byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"ls","parameters":{}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		s := tr.Stream()
		var all []byte
		for _, c := range chunksOf(stream) {
			out, held, u, _ := s.Event(c)
			checkSSE(t, "event", out)
			checkSSE(t, "held", held)
			if u.Input < 0 || u.Output < 0 {
				t.Fatalf("usage %+v", u)
			}
			all = append(append(all, out...), held...)
		}
		if blocked {
			out := s.ErrorEvent("guardrail_blocked", "blocked")
			checkSSE(t, "error", out)
			all = append(all, out...)
		} else {
			out, held := s.End()
			checkSSE(t, "end", out)
			checkSSE(t, "end held", held)
			all = append(append(all, out...), held...)
		}
		seq := int64(-1)
		for _, line := range bytes.Split(all, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				n := gjson.GetBytes(data, "sequence_number")
				if !n.Exists() || n.Int() <= seq {
					t.Fatalf("sequence_number %s after %d: %s", n.Raw, seq, all)
				}
				seq = n.Int()
			}
		}
	})
}
