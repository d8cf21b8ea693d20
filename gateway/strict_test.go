package gateway_test

import (
	"strings"
	"testing"
)

// What providers refuse, the gateway refuses too, on every door, in the
// door's error shape and before anything else is done: a stream that is
// not a boolean ("stream": "yes" was read as false and answered 200), and
// a body that is not valid UTF-8 (a raw byte that is not, or an escape of
// half a surrogate pair: the text a guardrail reads must be the text the
// model is sent), and a body with a key twice in one object (the
// gateway would read one and the upstream obey the other). Nothing reaches the upstream or the ledger, nothing is
// reserved, and the message says what to change.
func TestEveryDoorRefusesANonBooleanStreamInvalidUTF8AndDuplicateKeys(t *testing.T) {
	m := newBillingMock(t)
	e := billingGateway(t, m, 1_000_000)
	doors := []struct {
		path, body string
		anthropic  bool
	}{
		{"chat/completions", `{"model":"vlm","messages":[{"role":"user","content":"%s"}]%s}`, false},
		{"completions", `{"model":"vlm","prompt":"%s"%s}`, false},
		{"embeddings", `{"model":"vlm","input":"%s"%s}`, false},
		{"messages", `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"%s"}]%s}`, true},
		{"messages/count_tokens", `{"model":"claude","messages":[{"role":"user","content":"%s"}]%s}`, true},
		{"responses", `{"model":"gpt","input":"%s"%s}`, false},
	}
	for _, d := range doors {
		for _, tc := range []struct{ name, text, extra, says string }{
			{"stream yes", "hi", `,"stream":"yes"`, `stream must be true or false, not "yes"`},
			{"stream 1", "hi", `,"stream":1`, "stream must be true or false, not 1"},
			{"a Latin-1 byte", "caf\xe9", "", "not valid UTF-8"},
			{"an encoded surrogate", "\xed\xa0\x80", "", "not valid UTF-8"},
			{"a lone surrogate escape", `\ud83d`, "", `lone surrogate \ud83d`},
			{"a duplicate key", "hi", `,"model":"gpt"`, `the request body has the key "model" twice in one object`},
			{"a duplicate key, escaped", "hi", `,"mod\u0065l":"gpt"`, `the key "model" twice`},
		} {
			body := strings.Replace(strings.Replace(d.body, "%s", tc.text, 1), "%s", tc.extra, 1)
			r := e.post("vic", "detect", d.path, body)
			msg := r.json("error.message").Str
			shaped := r.json("error.type").Str == "invalid_request_error" &&
				(d.anthropic && r.json("type").Str == "error" || !d.anthropic && r.json("error.code").Str == "invalid_request_error")
			if r.status != 400 || !shaped || !strings.Contains(msg, tc.says) {
				t.Errorf("%s, %s: %d %s, want a 400 in the door's shape saying %q", d.path, tc.name, r.status, r.body, tc.says)
			}
		}
		// The same call, well formed, is answered.
		body := strings.Replace(strings.Replace(d.body, "%s", `caf\u00e9 \ud83d\ude00 é`, 1), "%s", `,"stream":false`, 1)
		if r := e.post("vic", "detect", d.path, body); r.status != 200 {
			t.Errorf("%s, well formed: %d %s", d.path, r.status, r.body)
		}
	}
	// Only the well-formed calls reached the upstream and the ledger
	// (count_tokens is passed to the Anthropic upstream to count, and is
	// not on the ledger).
	if seen := m.requests(); len(seen) != len(doors) {
		t.Fatalf("the upstream saw %d calls, want %d", len(seen), len(doors))
	}
	if calls := e.ledger(len(doors) - 1); len(calls) != len(doors)-1 {
		t.Fatalf("%d calls on the ledger, want %d: %s", len(calls), len(doors)-1, dump(calls))
	}
}
