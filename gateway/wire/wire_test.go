package wire_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/wire"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name string
		ep   wire.Endpoint
		body string
		want wire.Call
		err  string
	}{
		{name: "a chat call", ep: wire.Chat,
			body: `{"model":"chat","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"héllo"}],"max_tokens":50}`,
			want: wire.Call{Model: "chat", MaxTokens: 50, Choices: 1, Input: []string{"be brief", "héllo"}, InputTokens: 8 + 8 + 8 + 6}},
		{name: "content parts, max_completion_tokens, n and a stream asking for usage", ep: wire.Chat,
			body: `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"n":2,"max_completion_tokens":7,"max_tokens":99,
				"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"x"}}]}]}`,
			// The image is not free: given by URL, its size is not known,
			// and it costs the most the model bills for one (MediaTokens).
			want: wire.Call{Model: "chat", Stream: true, IncludeUsage: true, MaxTokens: 7, Choices: 2, Input: []string{"look", "x"}, InputTokens: 8 + 4,
				Images: []wire.Image{{}}}},
		{name: "tools count as prompt", ep: wire.Chat,
			body: `{"model":"chat","messages":[{"role":"user","content":""}],"tools":[{"type":"function"}]}`,
			want: wire.Call{Model: "chat", Choices: 1, Input: []string{""}, InputTokens: 8 + int64(len(`[{"type":"function"}]`))}},
		{name: "a completion prompt array", ep: wire.Completions, body: `{"model":"c","prompt":["ab","c"]}`,
			want: wire.Call{Model: "c", Choices: 1, Input: []string{"ab", "c"}, InputTokens: 3}},
		{name: "embeddings of token ids never stream", ep: wire.Embeddings, body: `{"model":"embed","input":[[1,2,3],[4]],"stream":true}`,
			want: wire.Call{Model: "embed", Choices: 1, InputTokens: 4}},
		{name: "not JSON", ep: wire.Chat, body: `{"model":`, err: "not valid JSON"},
		{name: "not an object", ep: wire.Chat, body: `[1]`, err: "must be a JSON object"},
		{name: "no model", ep: wire.Chat, body: `{"messages":[{"role":"user","content":"x"}]}`, err: "model is required"},
		{name: "no messages", ep: wire.Chat, body: `{"model":"chat","messages":[]}`, err: "messages is required"},
		{name: "negative max_tokens", ep: wire.Chat, body: `{"model":"chat","max_tokens":-1,"messages":[{"content":"x"}]}`, err: "must not be negative"},
		{name: "a max_tokens past any model", ep: wire.Chat, body: `{"model":"chat","max_tokens":9223372036854775807,"messages":[{"content":"x"}]}`,
			err: "max_tokens must be at most 16777216"},
		{name: "a max_completion_tokens past any model", ep: wire.Chat, body: `{"model":"chat","max_completion_tokens":16777217,"messages":[{"content":"x"}]}`,
			err: "max_tokens must be at most 16777216"},
		{name: "n out of range", ep: wire.Chat, body: `{"model":"chat","n":0,"messages":[{"content":"x"}]}`, err: "n must be between 1 and 128"},
		{name: "an embeddings input of objects", ep: wire.Embeddings, body: `{"model":"e","input":[{"a":1}]}`, err: "input must be a string"},
		{name: "no prompt", ep: wire.Completions, body: `{"model":"c"}`, err: "prompt is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wire.Parse(tc.ep, []byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != tc.want.Model || got.Stream != tc.want.Stream || got.IncludeUsage != tc.want.IncludeUsage ||
				got.MaxTokens != tc.want.MaxTokens || got.Choices != tc.want.Choices || got.InputTokens != tc.want.InputTokens ||
				strings.Join(got.Input, "|") != strings.Join(tc.want.Input, "|") || !slices.Equal(got.Images, tc.want.Images) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPatchingKeepsTheRestOfTheBody(t *testing.T) {
	body := []byte(`{"model":"chat","messages":[{"role":"user","content":"hi \"there\""}],"tools":[{"type":"function","function":{"name":"f"}}],"stream":true}`)
	out, err := wire.SetModel(body, "meta-llama/Llama-3.1-70B")
	if err != nil {
		t.Fatal(err)
	}
	out, err = wire.AskUsage(out)
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out, "model").Str != "meta-llama/Llama-3.1-70B" || !gjson.GetBytes(out, "stream_options.include_usage").Bool() ||
		gjson.GetBytes(out, "messages.0.content").Str != `hi "there"` || gjson.GetBytes(out, "tools.0.function.name").Str != "f" {
		t.Fatalf("patched body %s", out)
	}
}

func TestUsageAndOutput(t *testing.T) {
	resp := []byte(`{"choices":[{"message":{"role":"assistant","content":"Hello"}},{"message":{"content":" world"}}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	if u, ok := wire.UsageOf(resp); !ok || u.Input != 12 || u.Output != 3 {
		t.Fatalf("usage %+v %v", u, ok)
	}
	if got := wire.OutputText(resp); got != "Hello world" {
		t.Fatalf("output %q", got)
	}
	chunk := []byte(`{"choices":[{"delta":{"content":"Hel"}}]}`)
	if _, ok := wire.UsageOf(chunk); ok || wire.OutputText(chunk) != "Hel" {
		t.Fatal("chunk")
	}
	if _, ok := wire.UsageOf([]byte(`{"choices":[],"usage":null}`)); ok {
		t.Fatal("a null usage read as usage")
	}
	// Tool and function calls' names and arguments are output too, whole
	// and streamed, and so are reasoning and refusals.
	for body, want := range map[string]string{
		`{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"q\":\"x\"}"}}]}}]}`: `f{"q":"x"}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\""}}]}}]}`:                          `{"q"`,
		`{"choices":[{"message":{"function_call":{"name":"f","arguments":"{}"}}}]}`:                                       `f{}`,
		`{"choices":[{"message":{"reasoning_content":"hm ","content":"ok"}}]}`:                                            `hm ok`,
		`{"choices":[{"delta":{"reasoning":"hm"}}]}`:                                                                      `hm`,
		`{"choices":[{"message":{"content":null,"refusal":"no"}}]}`:                                                       `no`,
	} {
		if got := wire.OutputText([]byte(body)); got != want {
			t.Errorf("OutputText(%s) = %q, want %q", body, got, want)
		}
	}
	// An upstream's negative count gives nothing back.
	if u, ok := wire.UsageOf([]byte(`{"usage":{"prompt_tokens":-5,"completion_tokens":-9223372036854775807}}`)); !ok || u.Input != 0 || u.Output != 0 {
		t.Fatalf("negative usage read as %+v", u)
	}
}

// An answer that says no usage is counted a token per byte of its text,
// its content and its tool calls' arguments, in every choice.
func TestCountOutput(t *testing.T) {
	cases := []struct {
		body string
		want int64
	}{
		{`{"choices":[{"message":{"role":"assistant","content":"Hello"}},{"message":{"content":" wörld"}}]}`, 5 + 7},
		{`{"choices":[{"text":"abc"}]}`, 3},
		{`{"choices":[{"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"function":{"arguments":"{}"}}]}}]}`, 1 + 7 + 2},
		{`{"data":[{"embedding":[0.1]}]}`, 0},
		{`not json`, 0},
	}
	for _, tc := range cases {
		if got := wire.CountOutput([]byte(tc.body)); got != tc.want {
			t.Errorf("CountOutput(%s) = %d, want %d", tc.body, got, tc.want)
		}
	}
}
