package wire_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/wire"
)

// What is not text is not read: base64 payloads (an image's, a sound's,
// a file's), ids, roles and types, settings, what identifies the caller
// to the provider, and token ids. A field no list names is read, keys
// and all; JSON is read as written and, where it escapes its text,
// unescaped too; a place a list skips but for one field reads that field.
func TestTextOfReadsTextAndOnlyText(t *testing.T) {
	for _, tc := range []struct {
		ep   wire.Endpoint
		body string
		want []string
	}{
		{wire.Chat, `{"model":"m","user":"u@x","metadata":{"k":"v"},"service_tier":"auto","messages":[
			{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGR","format":"wav"}},{"type":"file","file":{"file_data":"JVBER","file_id":"f1","filename":"a.pdf"}},{"type":"text","text":"hi"}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"fn","arguments":"{\"q\":\"\\u0041b\"}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"done"}],
			"tool_choice":"auto","logit_bias":{"50256":-100},"x_new":{"deep":["note"]},"seed":5}`,
			[]string{"a.pdf", "hi", "fn", `{"q":"\u0041b"}`, "q", "Ab", "done", `{"deep":["note"]}`}},
		{wire.Completions, `{"model":"m","prompt":[[1,2],"say",[3]],"user":"u"}`, []string{"say"}},
		{wire.Embeddings, `{"model":"m","input":[[1,2,3]],"encoding_format":"float"}`, nil},
		{wire.Messages, `{"model":"m","max_tokens":5,"metadata":{"user_id":"u"},"thinking":{"type":"enabled","budget_tokens":9},"messages":[
			{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}}]},
			{"role":"assistant","content":[{"type":"redacted_thinking","data":"enc"},{"type":"tool_use","id":"t1","name":"ls","input":{"d":"/"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a b","cache_control":{"type":"ephemeral"}}]}]}],
			"mcp_servers":[{"type":"url","url":"https://mcp","name":"files","authorization_token":"tok"}]}`,
			[]string{"notes", "ls", `{"d":"/"}`, "a b", "files"}},
		{wire.Responses, `{"model":"m","input":[{"type":"reasoning","id":"rs_1","encrypted_content":"enc","summary":[]},
			{"type":"function_call","call_id":"c1","id":"fc_1","status":"completed","name":"fn","arguments":"{}"}],
			"tools":[{"type":"mcp","server_label":"files","headers":{"Authorization":"Bearer tok"}}],"reasoning":{"effort":"high"},"include":["x"]}`,
			[]string{"fn", "{}", "files"}},
	} {
		got := wire.TextOf(nil, tc.ep, gjson.Parse(tc.body))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: read %q, want %q", tc.ep, got, tc.want)
		}
	}
	// A door's list names its fields once, each with a path of keys and #.
	for _, ep := range []wire.Endpoint{wire.Chat, wire.Completions, wire.Embeddings, wire.Responses, wire.Messages} {
		seen := map[string]bool{}
		for _, f := range wire.Fields(ep) {
			if seen[f.Path] || f.Path == "" || strings.Contains(f.Path, "..") {
				t.Errorf("%s: the field %q is listed twice, or is no path", ep, f.Path)
			}
			seen[f.Path] = true
		}
	}
}
