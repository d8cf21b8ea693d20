package wire_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klique-ai/klique/gateway/wire"
)

// A door's decoder, as the fuzz targets call it.
type doorParse func(body []byte) (wire.Call, error)

// fuzzDoor is the property every door's decoder keeps, whatever the body:
// it never panics; a refusal is an error with nothing read, and cheap; a
// body it reads is valid JSON and UTF-8, and what it reads is within the
// bounds the reservation relies on (a model, 1 to 128 choices, max_tokens
// within CheckMaxTokens, counts that are not negative, text that is
// UTF-8). The body the gateway sends upstream (model swapped, output
// bounded) reads the same way again.
func fuzzDoor(f *testing.F, ep wire.Endpoint, parse doorParse, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		start := time.Now()
		c, err := parse(body)
		if took := time.Since(start); took > time.Second {
			t.Fatalf("reading %d bytes took %v", len(body), took)
		}
		if err != nil {
			if c.Model != "" || c.InputTokens != 0 || len(c.Input) != 0 || err.Error() == "" {
				t.Fatalf("a refusal (%v) read %+v", err, c)
			}
			return
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			t.Fatalf("read a body that is not valid JSON or UTF-8: %q", body)
		}
		if strings.TrimSpace(c.Model) == "" || c.Choices < 1 || c.Choices > 128 || wire.CheckMaxTokens("max_tokens", c.MaxTokens) != nil ||
			c.InputTokens < 0 || c.UnsizedFiles < 0 {
			t.Fatalf("read out of bounds: %+v", c)
		}
		for _, b := range []wire.Billing{wire.BillsPerImage, wire.BillsOpenAI, wire.BillsAnthropic} {
			if n := c.MediaTokens(b, 1000); n < 0 || n > int64(len(c.Images))*1000+c.UnsizedFiles*wire.FilePages*1000 {
				t.Fatalf("media tokens %d for %d images and %d files", n, len(c.Images), c.UnsizedFiles)
			}
		}
		for _, s := range c.Input {
			if !utf8.ValidString(s) {
				t.Fatalf("guarded text is not UTF-8: %q", s)
			}
		}
		swapped, err := wire.SetModel(body, "upstream-model")
		if err != nil {
			t.Fatalf("SetModel: %v", err)
		}
		again, err := parse(swapped)
		if err != nil || again.Model != "upstream-model" || again.Choices != c.Choices || again.MaxTokens != c.MaxTokens ||
			again.Stream != c.Stream || again.InputTokens != c.InputTokens || len(again.Images) != len(c.Images) {
			t.Fatalf("with its model swapped the body reads %+v, %v; was %+v\n%s", again, err, c, swapped)
		}
		const bound = 77
		bounded, err := wire.BoundOutput(swapped, ep, bound, false)
		if err != nil {
			t.Fatalf("BoundOutput: %v", err)
		}
		again, err = parse(bounded)
		if err != nil || (ep != wire.Embeddings && (again.MaxTokens < 1 || again.MaxTokens > bound)) {
			t.Fatalf("bounded to %d the body reads %+v, %v\n%s", bound, again, err, bounded)
		}
	})
}

func chatParse(ep wire.Endpoint) doorParse {
	return func(body []byte) (wire.Call, error) { return wire.Parse(ep, body) }
}

// Seeds of each door live in testdata/fuzz/Fuzz<Door>Request too; run one
// with
//
//	go test -run '^$' -fuzz '^FuzzChatRequest$' -fuzztime 30s ./gateway/wire
func FuzzChatRequest(f *testing.F) {
	fuzzDoor(f, wire.Chat, chatParse(wire.Chat),
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"n":2,"max_completion_tokens":9,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"file","file":{"file_data":"JVBERi0="}}]}],"max_tokens":3.5,"stop":["a"]}`)
}

func FuzzCompletionsRequest(f *testing.F) {
	fuzzDoor(f, wire.Completions, chatParse(wire.Completions),
		`{"model":"m","prompt":"once upon"}`,
		`{"model":"m","prompt":["a","b"],"best_of":3,"n":2,"max_tokens":10,"stream":true}`,
		`{"model":"m","prompt":[[1,2,3],[4]],"max_tokens":null}`)
}

func FuzzEmbeddingsRequest(f *testing.F) {
	fuzzDoor(f, wire.Embeddings, chatParse(wire.Embeddings),
		`{"model":"m","input":"text"}`,
		`{"model":"m","input":["a","b"],"encoding_format":"float"}`,
		`{"model":"m","input":[1,2,3],"stream":false}`)
}

func FuzzMessagesRequest(f *testing.F) {
	fuzzDoor(f, wire.Messages, func(body []byte) (wire.Call, error) { return wire.ParseMessages(body, false) },
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":50,"stream":true,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"document","source":{"type":"url","url":"https://x/y.pdf"}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}]}`)
}

func FuzzResponsesRequest(f *testing.F) {
	fuzzDoor(f, wire.Responses, wire.ParseResponses,
		`{"model":"m","input":"hi"}`,
		`{"model":"m","instructions":"be brief","max_output_tokens":20,"stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_image","image_url":"https://x/y.png","detail":"high"},{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0="}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}],"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"}}],"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"}}}}`)
}
