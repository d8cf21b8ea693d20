package wire

import (
	"bytes"
	"fmt"

	"github.com/tidwall/gjson"
)

// smallObject is how many keys an object may have before its duplicates
// are looked for in a map rather than in a list.
const smallObject = 16

// keyFrame is an object or array being read by checkKeys: from is where
// its keys start in the keys list, and set holds them once it has more
// than smallObject.
type keyFrame struct {
	object bool
	from   int
	set    map[string]struct{}
}

// checkKeys refuses a body in which one object has the same key twice
// (after its escapes are read: "a" and "\u0061" are one key). JSON leaves
// what such a body means to the reader: the gateway's reader keeps the
// first, most providers' the last. A guardrail would then read one text
// and the model be sent another, and a reservation counted for one
// max_tokens while the upstream obeyed another; so the gateway refuses it,
// as it refuses any body whose meaning depends on who reads it. body is
// valid JSON. One pass, no recursion: a deeply nested body costs no more
// than a flat one.
func checkKeys(body []byte) error {
	var (
		stack     []keyFrame
		keys      []string
		expectKey bool
	)
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			stack = append(stack, keyFrame{object: true, from: len(keys)})
			expectKey = true
		case '[':
			stack = append(stack, keyFrame{from: len(keys)})
			expectKey = false
		case '}', ']':
			if len(stack) > 0 {
				keys = keys[:stack[len(stack)-1].from]
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1].object
		case '"':
			end, escaped := stringEnd(body, i+1)
			if expectKey {
				key := view(body[i+1 : end])
				if escaped {
					key = gjson.Parse(string(body[i : end+1])).Str
				}
				f := &stack[len(stack)-1]
				if seen(f, keys, key) {
					return fmt.Errorf("the request body has the key %q twice in one object (at byte %d): send each key once", truncate(key, 40), i)
				}
				keys = append(keys, key)
				if f.set != nil {
					f.set[key] = struct{}{}
				}
				expectKey = false
			}
			i = end
		}
	}
	return nil
}

// seen reports whether the object f already has key.
func seen(f *keyFrame, keys []string, key string) bool {
	if f.set != nil {
		_, ok := f.set[key]
		return ok
	}
	own := keys[f.from:]
	for _, k := range own {
		if k == key {
			return true
		}
	}
	if len(own) >= smallObject {
		f.set = make(map[string]struct{}, 2*len(own))
		for _, k := range own {
			f.set[k] = struct{}{}
		}
	}
	return false
}

// stringEnd returns the index of the quote that closes the string whose
// text starts at from, and whether the string has an escape.
func stringEnd(body []byte, from int) (end int, escaped bool) {
	for i := from; i < len(body); {
		j := bytes.IndexAny(body[i:], `"\`)
		if j < 0 {
			break
		}
		i += j
		if body[i] == '"' {
			return i, escaped
		}
		escaped = true
		i += 2
	}
	return len(body) - 1, escaped
}
