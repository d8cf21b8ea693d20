package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
)

// The Responses door's benchmark: in one run, a 2 kB request answered by
// 300 tokens, whole and streamed, through
//
//   - the chat door to a chat completions server (pass-through: the
//     reference),
//   - the Responses door to a Responses server (pass-through),
//   - the Responses door to a chat completions server (translation),
//
// and the same answers fetched straight from the mock servers, whose cost
// (the mock's and a client's) is taken off each way's to leave the
// gateway's own. The gateway is called in process (its handler, as in
// BenchmarkGatewayCall), with the benchmarks' budget and rate limits
// (in process) and its guardrail; the mocks answer over loopback with
// answers rendered once.
//
//	go test ./gateway -run '^$' -bench ResponsesDoor -benchtime 2000x
func BenchmarkResponsesDoor(b *testing.B) {
	mock := newBenchStreams(b)
	e := newEnvTB(b, func(g *model.Gateway, _ string) {
		benchConfig(g, mock.URL)
		g.Providers = []*model.Provider{{Name: "openai", BaseURL: mock.URL + "/v1", Timeout: 10 * time.Second, API: model.APIOpenAI}}
		g.Models = append(g.Models, &model.LLMModel{Name: "gpt", Provider: "openai", Upstream: "gpt-x", InputPriceMicros: 200_000, OutputPriceMicros: 200_000, Currency: "USD"})
		g.Aliases = append(g.Aliases, &model.Alias{Name: "native", Rules: []model.AliasRule{{Targets: []model.Target{{Model: "gpt", Weight: 1}}}}})
		g.RateLimits = append(g.RateLimits, &model.RateLimit{Scope: model.RateLimitAlias, Name: "native", RequestsPerMinute: 1 << 40})
	})
	key := e.keys["vic"]
	for _, stream := range []bool{false, true} {
		shape := "whole"
		if stream {
			shape = "streamed"
		}
		chatBody, respBody := respBenchChatRequest(stream), respBenchRequest(stream)
		for _, way := range []struct {
			name, path, alias string
			body              []byte
			direct            string // the mock's path for the direct call
		}{
			{"chat pass-through", "chat/completions", "chat", chatBody, "/v1/chat/completions"},
			{"responses pass-through", "responses", "native", respBody, "/v1/responses"},
			{"responses translated", "responses", "chat", respBody, "/v1/chat/completions"},
		} {
			b.Run(shape+"/"+way.name+"/gateway", func(b *testing.B) {
				body := respSetModel(b, way.body, way.alias)
				call := func() {
					req := httptest.NewRequest(http.MethodPost, "/v1/"+way.path, bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("X-Klique-Project", "detect")
					rec := httptest.NewRecorder()
					e.gw.ServeHTTP(rec, req)
					if rec.Code != 200 || stream && !bytes.Contains(rec.Body.Bytes(), []byte("tok299")) {
						b.Fatalf("%d %.300s", rec.Code, rec.Body)
					}
				}
				respPerCall(b, call)
			})
			b.Run(shape+"/"+way.name+"/direct", func(b *testing.B) {
				upstream := "meta/llama"
				if way.alias == "native" {
					upstream = "gpt-x"
				}
				body := respSetModel(b, way.body, upstream)
				if way.path == "responses" && way.direct == "/v1/chat/completions" {
					body = respBenchChatRequest(stream) // what the translation sends
				}
				client := &http.Client{}
				call := func() {
					resp, err := client.Post(mock.URL+way.direct, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				respPerCall(b, call)
			})
		}
	}
}

// perCall runs call b.N times after a warm-up and reports the process's
// CPU time and heap bytes per call.
func respPerCall(b *testing.B, call func()) {
	for i := 0; i < 50; i++ {
		call()
	}
	b.ReportAllocs()
	cpu, alloc := processCPU(b), allocated()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call()
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e3, "cpu-µs/call")
	b.ReportMetric(float64(allocated()-alloc)/float64(b.N), "heap-B/call")
}

func respSetModel(b *testing.B, body []byte, m string) []byte {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		b.Fatal(err)
	}
	v["model"] = m
	out, _ := json.Marshal(v)
	return out
}

// respBenchFiller makes a request about 2 kB.
var respBenchFiller = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 30)

func respBenchRequest(stream bool) []byte {
	return []byte(fmt.Sprintf(`{"model":"chat","stream":%t,"instructions":"You are a helpful coding assistant.","max_output_tokens":400,
 "input":[{"role":"user","content":[{"type":"input_text","text":%q}]},
  {"role":"assistant","content":[{"type":"output_text","text":"Let me look at the files."}]},
  {"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"ls -la\"}"},
  {"type":"function_call_output","call_id":"call_1","output":"total 8\nmain.go\ngo.mod"},
  {"role":"user","content":"Now explain main.go in detail, please."}],
 "tools":[{"type":"function","name":"exec_command","description":"Runs a shell command and returns its output.","strict":false,
  "parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"The command."}},"required":["cmd"]}}]}`, stream, respBenchFiller))
}

func respBenchChatRequest(stream bool) []byte {
	return []byte(fmt.Sprintf(`{"model":"chat","stream":%t,"max_tokens":400,"messages":[{"role":"system","content":"You are a helpful coding assistant."},
 {"role":"user","content":%q},
 {"role":"assistant","content":"Let me look at the files.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"ls -la\"}"}}]},
 {"role":"tool","tool_call_id":"call_1","content":"total 8\nmain.go\ngo.mod"},
 {"role":"user","content":"Now explain main.go in detail, please."}],
 "tools":[{"type":"function","function":{"name":"exec_command","description":"Runs a shell command and returns its output.","strict":false,
  "parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"The command."}},"required":["cmd"]}}}]}`, stream, respBenchFiller))
}

// benchStreams is a mock serving 300-token answers, rendered once: chat
// completions and Responses, whole and streamed (an event flushed at a
// time, as a model server sends tokens).
type benchStreams struct {
	*httptest.Server
	chatWhole, respWhole   []byte
	chatEvents, respEvents [][]byte
}

func newBenchStreams(b *testing.B) *benchStreams {
	m := &benchStreams{}
	var text strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&text, " tok%d", i)
	}
	m.chatWhole = []byte(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"meta/llama","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":500,"completion_tokens":300,"total_tokens":800}}`, text.String()))
	m.respWhole = []byte(fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-x","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}],"usage":{"input_tokens":500,"output_tokens":300,"total_tokens":800}}`, text.String()))
	chat := func(s string) { m.chatEvents = append(m.chatEvents, []byte("data: "+s+"\n\n")) }
	chat(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
	for i := 0; i < 300; i++ {
		chat(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[{"index":0,"delta":{"content":" tok%d"}}]}`, i))
	}
	chat(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	chat(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"meta/llama","choices":[],"usage":{"prompt_tokens":500,"completion_tokens":300,"total_tokens":800}}`)
	m.chatEvents = append(m.chatEvents, []byte("data: [DONE]\n\n"))
	seq := 0
	resp := func(typ, rest string) {
		m.respEvents = append(m.respEvents, []byte(fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, rest)))
		seq++
	}
	started := `"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-x","output":[],"usage":null}`
	resp("response.created", started)
	resp("response.in_progress", started)
	resp("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"in_progress","content":[]}`)
	resp("response.content_part.added", `"output_index":0,"item_id":"msg_1","content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`)
	for i := 0; i < 300; i++ {
		resp("response.output_text.delta", fmt.Sprintf(`"output_index":0,"item_id":"msg_1","content_index":0,"delta":" tok%d","logprobs":[]`, i))
	}
	q, _ := json.Marshal(text.String())
	resp("response.output_text.done", fmt.Sprintf(`"output_index":0,"item_id":"msg_1","content_index":0,"text":%s,"logprobs":[]`, q))
	resp("response.content_part.done", fmt.Sprintf(`"output_index":0,"item_id":"msg_1","content_index":0,"part":{"type":"output_text","text":%s,"annotations":[]}`, q))
	item := fmt.Sprintf(`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":%s,"annotations":[]}]}`, q)
	resp("response.output_item.done", `"output_index":0,"item":`+item)
	resp("response.completed", `"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-x","output":[`+item+`],"usage":{"input_tokens":500,"output_tokens":300,"total_tokens":800}}`)

	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		stream := gjson.GetBytes(body, "stream").Bool()
		isResp := strings.HasSuffix(r.URL.Path, "/responses")
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			if isResp {
				_, _ = w.Write(m.respWhole)
			} else {
				_, _ = w.Write(m.chatWhole)
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		events := m.chatEvents
		if isResp {
			events = m.respEvents
		}
		for _, ev := range events {
			_, _ = w.Write(ev)
			fl.Flush()
		}
	}))
	b.Cleanup(m.Close)
	return m
}
