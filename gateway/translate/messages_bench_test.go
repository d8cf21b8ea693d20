package translate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/klique-ai/klique/gateway/translate"
)

// benchRequest is a Messages request of about 2 kB: a system prompt, a
// tool, and a few turns.
func benchRequest() []byte {
	para := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 8)
	return []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"system":[{"type":"text","text":` + fmt.Sprintf("%q", para) + `}],
		"tools":[{"name":"read_file","description":"read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}],
		"messages":[{"role":"user","content":` + fmt.Sprintf("%q", para+para) + `},
		{"role":"assistant","content":[{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"/etc/hosts"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + fmt.Sprintf("%q", para) + `}]}]}`)
}

// benchStream is a chat stream of 300 one-token chunks and its usage.
func benchStream() [][]byte {
	var out [][]byte
	for i := 0; i < 300; i++ {
		out = append(out, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`))
	}
	out = append(out, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		[]byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":500,"completion_tokens":300,"total_tokens":800}}`),
		[]byte(`[DONE]`))
	return out
}

// BenchmarkMessagesTranslation is the translation's own cost per call: a
// 2 kB request to chat, and a 300-chunk chat stream back to Messages.
func BenchmarkMessagesTranslation(b *testing.B) {
	req, chunks := benchRequest(), benchStream()
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := translate.MessagesToChat(req, "up", true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := translate.NewChatToMessagesStream("claude-sonnet-4-5")
			for _, c := range chunks {
				s.Chunk(c)
			}
		}
	})
}
