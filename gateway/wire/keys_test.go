package wire_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/klique-ai/klique/gateway/wire"
)

// doorParsers reads a body on each door: the body is the door's smallest
// call with extra appended to its top object.
var doorParsers = map[string]func(extra string) error{
	"chat": func(b string) error {
		_, err := wire.Parse(wire.Chat, []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]`+b+`}`))
		return err
	},
	"completions": func(b string) error {
		_, err := wire.Parse(wire.Completions, []byte(`{"model":"m","prompt":"x"`+b+`}`))
		return err
	},
	"embeddings": func(b string) error {
		_, err := wire.Parse(wire.Embeddings, []byte(`{"model":"m","input":"x"`+b+`}`))
		return err
	},
	"messages": func(b string) error {
		_, err := wire.ParseMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]`+b+`}`), false)
		return err
	},
	"count_tokens": func(b string) error {
		_, err := wire.ParseMessages([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]`+b+`}`), true)
		return err
	},
	"responses": func(b string) error {
		_, err := wire.ParseResponses([]byte(`{"model":"m","input":"x"` + b + `}`))
		return err
	},
}

// manyKeys is an object of n distinct keys, then extra.
func manyKeys(n int, extra string) string {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	return b.String() + extra + `}`
}

// A body in which one object has a key twice means what its reader
// decides: the gateway read the first "messages" (and guarded it) while
// the upstream obeyed the last. Every door refuses it, at any depth and
// however the key is spelled; the same key in different objects, or in a
// string, is no duplicate.
func TestEveryDoorRefusesADuplicateKey(t *testing.T) {
	for name, parse := range doorParsers {
		for _, tc := range []struct{ extra, want string }{
			{`,"model":"other"`, `the request body has the key "model" twice in one object`},
			{`,"mod\u0065l":"other"`, `key "model" twice`},
			{`,"metadata":{"a":1,"b":{"c":[{"d":1,"d":2}]}}`, `key "d" twice`},
			{`,"metadata":` + manyKeys(40, `"k7":0`), `key "k7" twice`},
			{`,"metadata":{"a\"b":1,"a\u0022b":2}`, `key "a\"b" twice`},
		} {
			if err := parse(tc.extra); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "send each key once") {
				t.Errorf("%s with %s: %v, want %q", name, tc.extra, err, tc.want)
			}
		}
		for _, ok := range []string{
			`,"metadata":{"a":{"a":1},"b":{"a":2}}`,
			`,"x":["a","a",{"a":1},{"a":1}]`,
			`,"user":"\"model\":1,\"model\":2"`,
			`,"metadata":` + manyKeys(40, `"last":0`),
			`,"metadata":{"a":1,"A":2,"a ":3}`,
		} {
			if err := parse(ok); err != nil {
				t.Errorf("%s with %s: %v", name, ok, err)
			}
		}
	}
}
