package translate

import (
	"fmt"
	"strings"
	"testing"
)

// benchResponsesRequest is a 2 kB Responses request: instructions, a
// conversation of a few turns with a function call, and a tool.
func benchResponsesRequest() []byte {
	filler := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 30)
	return []byte(`{"model":"gpt-5-codex","stream":true,"instructions":"You are a helpful coding assistant.","max_output_tokens":400,
 "input":[{"role":"user","content":[{"type":"input_text","text":"` + filler + `"}]},
  {"role":"assistant","content":[{"type":"output_text","text":"Let me look at the files."}]},
  {"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"ls -la\"}"},
  {"type":"function_call_output","call_id":"call_1","output":"total 8\n-rw-r--r-- 1 me me 120 main.go\n-rw-r--r-- 1 me me 80 go.mod"},
  {"role":"user","content":"Now explain main.go in detail, please."}],
 "tools":[{"type":"function","name":"exec_command","description":"Runs a shell command and returns its output.","strict":false,
  "parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"The command."}},"required":["cmd"]}}]}`)
}

// benchChatStream is a 300-token chat stream as vLLM sends it, with its
// usage chunk.
func benchChatStream() [][]byte {
	var s [][]byte
	s = append(s, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`))
	for i := 0; i < 300; i++ {
		s = append(s, []byte(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[{"index":0,"delta":{"content":" tok%d"}}]}`, i)))
	}
	s = append(s, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		[]byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[],"usage":{"prompt_tokens":500,"completion_tokens":300,"total_tokens":800}}`),
		[]byte("[DONE]"))
	return s
}

// BenchmarkResponsesTranslation is the translation's own cost for one
// call: a 2 kB request to chat, and a 300-token chat stream back to
// Responses events.
func BenchmarkResponsesTranslation(b *testing.B) {
	req, stream := benchResponsesRequest(), benchChatStream()
	if len(req) < 1900 || len(req) > 2300 {
		b.Fatalf("request of %d bytes, want about 2 kB", len(req))
	}
	b.ReportAllocs()
	for b.Loop() {
		tr, err := ResponsesToChat(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Request("meta/llama"); err != nil {
			b.Fatal(err)
		}
		s := tr.Stream()
		for _, data := range stream {
			s.Event(data)
		}
	}
}

// BenchmarkResponsesAnswer is a whole 300-token chat answer turned into a
// Response.
func BenchmarkResponsesAnswer(b *testing.B) {
	tr, err := ResponsesToChat(benchResponsesRequest())
	if err != nil {
		b.Fatal(err)
	}
	var text strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&text, " tok%d", i)
	}
	chat := []byte(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"meta/llama","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":500,"completion_tokens":300,"total_tokens":800}}`, text.String()))
	b.ReportAllocs()
	for b.Loop() {
		tr.Answer(200, chat)
	}
}
