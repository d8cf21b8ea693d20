// Command openai-server is the smallest OpenAI-compatible model server the
// end-to-end tests launch as a serving app: it listens on --port, answers
// /health, and /v1/chat/completions with and without stream, saying which
// instance answered and reporting fixed token usage (7 in, 5 out).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	port := flag.Int("port", 0, "port to listen on (127.0.0.1)")
	flag.Parse()
	instance := os.Getenv("KLIQUE_APP_INSTANCE")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		text := "served by instance " + instance
		usage := map[string]int{"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
		created := time.Now().Unix()
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "cmpl-1", "object": "chat.completion", "created": created, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": text}}},
				"usage":   usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(v map[string]any) {
			v["id"], v["object"], v["created"], v["model"] = "cmpl-1", "chat.completion.chunk", created, req.Model
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		for i, part := range []string{"served by ", "instance ", instance} {
			delta := map[string]any{"content": part}
			if i == 0 {
				delta["role"] = "assistant"
			}
			chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta}}})
		}
		chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
		chunk(map[string]any{"choices": []any{}, "usage": usage})
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	log.Fatal(http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", *port), mux))
}
