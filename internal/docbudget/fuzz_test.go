package docbudget

import (
	"errors"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
)

// fuzzBudget is small enough that a fuzzer finds documents over it.
var fuzzBudget = Budget{Document: "fuzzed document", MaxBytes: 64 << 10, MaxNodes: 2_000, MaxAliases: 100, MaxDepth: 16}

// FuzzBudgetBoundsTheDecoder checks the budget against the decoder it
// guards: whatever the bytes, counting never panics, and a document the
// budget lets through decodes to no more values than it counted (an alias
// expanded by the decoder was counted as all its anchor holds) and no
// deeper. A document it refuses is refused by Unmarshal without decoding.
//
// Seeds live in testdata/fuzz/FuzzBudgetBoundsTheDecoder; run it with
//
//	go test -run '^$' -fuzz FuzzBudgetBoundsTheDecoder -fuzztime 60s ./internal/docbudget
func FuzzBudgetBoundsTheDecoder(f *testing.F) {
	f.Add([]byte(docbudgettest.Pipeline(3, 3)))
	f.Add([]byte(docbudgettest.Estate(2, 4)))
	f.Add([]byte("base: &b {x: 1, y: [2, 3]}\nsteps:\n  - {<<: *b, name: a}\n  - <<: [*b]\n    name: c\n"))
	f.Add([]byte(`{"a": {"b": [1, 2, {"c": null}]}, "d": "e"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := fuzzBudget.count(data)
		if err == nil {
			err = fuzzBudget.Check(u)
		}
		var over *Error
		if err != nil {
			var v any
			if uerr := fuzzBudget.Unmarshal(data, &v); uerr == nil || v != nil || (errors.As(err, &over) && !errors.As(uerr, &over)) {
				t.Fatalf("YAML refused with %v, Unmarshal gave %v, %v", err, v, uerr)
			}
			return
		}
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil || v == nil {
			return // nothing decoded, or the decoder refuses what its parser took
		}
		w := walker{limit: u.Nodes}
		nodes, depth := w.walk(v, 1)
		if w.over || nodes > u.Nodes || int64(depth) > max(u.Depth, 1) {
			t.Fatalf("decoded %d values %d deep (past the count: %v), counted %+v:\n%q", nodes, depth, w.over, u, data)
		}
	})
}

// walker counts a decoded value's values as the budget counts them, and
// stops once past limit, so that a budget that undercounts an alias bomb
// fails here rather than running the fuzzer out of memory.
type walker struct {
	limit, seen int64
	over        bool
}

func (w *walker) walk(v any, depth int) (int64, int) {
	if w.seen++; w.seen > w.limit {
		w.over = true
		return w.seen, depth
	}
	n, deepest := int64(1), depth
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			w.seen++
			m, d := w.walk(e, depth+1)
			n, deepest = n+1+m, max(deepest, d)
		}
	case map[any]any:
		for _, e := range x {
			w.seen++
			m, d := w.walk(e, depth+1)
			n, deepest = n+1+m, max(deepest, d)
		}
	case []any:
		for _, e := range x {
			m, d := w.walk(e, depth+1)
			n, deepest = n+m, max(deepest, d)
		}
	default:
		return 1, depth - 1 // a scalar adds no level
	}
	return n, deepest
}
