package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// streamTokens is how many tokens the benchmarks' streamed answers have:
// a chunk (or event) each.
const streamTokens = 300

// prerendered serves one fixed answer, written at once: a mock whose own
// cost per call is a single write, so that what the benchmark's process
// spends is the gateway's.
func prerendered(b testing.TB, contentType, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// chatStream is a chat completions stream of n one-token chunks, its
// finish, its usage chunk and [DONE], as vLLM sends it.
func chatStream(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n")
	}
	sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	fmt.Fprintf(&sb, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":500,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", n, 500+n)
	sb.WriteString("data: [DONE]\n\n")
	return sb.String()
}

// messagesStream is the same answer as Anthropic streams it.
func messagesStream(n int) string {
	var sb strings.Builder
	sb.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":500,\"output_tokens\":1}}}\n\n")
	sb.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := 0; i < n; i++ {
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word\"}}\n\n")
	}
	sb.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	fmt.Fprintf(&sb, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":%d}}\n\n", n)
	sb.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return sb.String()
}

// benchText is about 2 kB of prompt.
var benchText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 42)

// BenchmarkMessagesDoor is one streamed call of a 2 kB prompt and a
// 300-token answer through the gateway's handler, in process, with the
// bench configuration's budget, rate limits (in-process limiter) and
// guardrail: by the chat door passed through, by the Messages door passed
// through to an Anthropic upstream, and by the Messages door translated
// to a chat upstream. The mocks write a prerendered answer at once. It
// reports the process's CPU per call and the bytes allocated per call.
//
//	go test ./gateway -run '^$' -bench 'MessagesDoor$' -benchtime 2000x
func BenchmarkMessagesDoor(b *testing.B) {
	chatURL := prerendered(b, "text/event-stream", chatStream(streamTokens))
	anthURL := prerendered(b, "text/event-stream", messagesStream(streamTokens))
	e := newEnvTB(b, func(g *model.Gateway, _ string) {
		benchConfig(g, chatURL)
		g.Providers = []*model.Provider{{Name: "anthropic", BaseURL: anthURL + "/v1", KeySecret: "OPENAI_API_KEY", API: model.APIAnthropic, Timeout: 10 * time.Second}}
		g.Models = append(g.Models, &model.LLMModel{Name: "sonnet", Provider: "anthropic", InputPriceMicros: 200_000, OutputPriceMicros: 200_000, Currency: "USD"})
		g.Aliases = append(g.Aliases, &model.Alias{Name: "native", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "sonnet", Weight: 1}}}}})
	})
	key := e.keys["vic"]
	chatBody := `{"model":"chat","max_tokens":400,"stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` + benchText + `"}]}`
	messagesBody := func(alias string) string {
		return `{"model":"` + alias + `","max_tokens":400,"stream":true,"system":"You are a helpful assistant.","messages":[{"role":"user","content":"` + benchText + `"}]}`
	}
	for _, tc := range []struct{ name, path, body string }{
		{"chat-pass-through", "/v1/chat/completions", chatBody},
		{"messages-pass-through", "/v1/messages", messagesBody("native")},
		{"messages-translated", "/v1/messages", messagesBody("chat")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			call := func() {
				req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("X-Klique-Project", "detect")
				rec := httptest.NewRecorder()
				e.gw.ServeHTTP(rec, req)
				if rec.Code != 200 || strings.Count(rec.Body.String(), " word") != streamTokens {
					b.Fatalf("%d %.300s", rec.Code, rec.Body)
				}
			}
			for i := 0; i < 20; i++ {
				call()
			}
			b.ReportAllocs()
			cpu := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				call()
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/call")
		})
	}
}
