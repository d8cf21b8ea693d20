package wire_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/gateway/wire"
)

func TestParseMessages(t *testing.T) {
	const tools = `[{"name":"ls","input_schema":{"type":"object"}}]`
	cases := []struct {
		name  string
		body  string
		count bool
		want  wire.Call
		err   string
	}{
		{name: "a plain call with a system string",
			body: `{"model":"claude-sonnet-4-5","max_tokens":50,"system":"be brief","messages":[{"role":"user","content":"héllo"}]}`,
			want: wire.Call{Model: "claude-sonnet-4-5", MaxTokens: 50, Choices: 1, Input: []string{"be brief", "héllo"}, InputTokens: 8 + 8 + 6}},
		{name: "system blocks, a stream, tools, a tool round trip and an image",
			body: `{"model":"m","max_tokens":7,"stream":true,"system":[{"type":"text","text":"sys"}],"tools":` + tools + `,"messages":[
				{"role":"user","content":[{"type":"text","text":"list"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"tool_use","id":"t1","name":"ls","input":{"d":"/"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a b"}]},{"type":"tool_result","tool_use_id":"t2","content":"c"}]}]}`,
			want: wire.Call{Model: "m", Stream: true, MaxTokens: 7, Choices: 1,
				Input:       []string{"sys", "ls", `{"type":"object"}`, "list", "hm", "ls", `{"d":"/"}`, "a b", "c"},
				InputTokens: 3 + 3*8 + 4 + 2 + 9 + 2 + 3 + 1 + int64(len(tools)),
				// The image's data is no image the gateway can read: its size
				// is not known, and it costs the model's most.
				Images: []wire.Image{{}}}},
		{name: "count_tokens takes no max_tokens and never streams", count: true,
			body: `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			want: wire.Call{Model: "m", Choices: 1, Input: []string{"hi"}, InputTokens: 8 + 2}},
		{name: "not JSON", body: `{"model":`, err: "not valid JSON"},
		{name: "not an object", body: `"x"`, err: "must be a JSON object"},
		{name: "no model", body: `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, err: "model is required"},
		{name: "no max_tokens", body: `{"model":"m","messages":[{"role":"user","content":"x"}]}`, err: "max_tokens is required"},
		{name: "max_tokens past any model", body: `{"model":"m","max_tokens":9223372036854775807,"messages":[{"role":"user","content":"x"}]}`,
			err: "max_tokens must be at most"},
		{name: "no messages", body: `{"model":"m","max_tokens":1,"messages":[]}`, err: "messages is required"},
		{name: "content neither string nor blocks", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":3}]}`,
			err: "messages[0].content must be a string"},
		{name: "a system prompt of the wrong type", body: `{"model":"m","max_tokens":1,"system":5,"messages":[{"role":"user","content":"x"}]}`,
			err: "system must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wire.ParseMessages([]byte(tc.body), tc.count)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMessages: %v", err)
			}
			if got.Model != tc.want.Model || got.Stream != tc.want.Stream || got.MaxTokens != tc.want.MaxTokens ||
				got.Choices != tc.want.Choices || got.InputTokens != tc.want.InputTokens || strings.Join(got.Input, "|") != strings.Join(tc.want.Input, "|") ||
				!slices.Equal(got.Images, tc.want.Images) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMessagesUsageAndText(t *testing.T) {
	body := []byte(`{"id":"msg_1","type":"message","content":[{"type":"thinking","thinking":"hm ","signature":"s"},{"type":"text","text":"hi "},{"type":"tool_use","id":"t","name":"ls","input":{"d":"/"}}],
		"usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":7}}`)
	if u, ok := wire.MessagesUsage(body); !ok || u.Input != 105 || u.Output != 7 {
		t.Fatalf("usage %+v %v", u, ok)
	}
	if _, ok := wire.MessagesUsage([]byte(`{"type":"error"}`)); ok {
		t.Fatal("an error read as counted")
	}
	if got := wire.MessagesOutputText(body); got != `hm hi ls{"d":"/"}` {
		t.Fatalf("text %q", got)
	}
	for _, tc := range []struct {
		name, data, text string
		in, out          int64
		hasIn, hasOut    bool
	}{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":12,"cache_read_input_tokens":3,"output_tokens":1}}}`, "", 15, 1, true, true},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`, "Hel", 0, 0, false, false},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`, `{"a"`, 0, 0, false, false},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`, "hm", 0, 0, false, false},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`, "", 0, 0, false, false},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"ls","input":{}}}`, "ls", 0, 0, false, false},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, "", 0, 0, false, false},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":30}}`, "", 0, 30, false, true},
		{"message_delta", `{"type":"message_delta","delta":{},"usage":{"input_tokens":20,"output_tokens":31}}`, "", 20, 31, true, true},
		{"ping", `{"type":"ping"}`, "", 0, 0, false, false},
	} {
		text := wire.MessagesEventText(tc.name, []byte(tc.data))
		in, out, hasIn, hasOut := wire.MessagesEventUsage(tc.name, []byte(tc.data))
		if text != tc.text || in != tc.in || out != tc.out || hasIn != tc.hasIn || hasOut != tc.hasOut {
			t.Errorf("%s %s: %q %d %d %v %v", tc.name, tc.data, text, in, out, hasIn, hasOut)
		}
	}
}
