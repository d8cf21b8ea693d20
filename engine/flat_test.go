package engine_test

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/internal/flatref"
)

// TestFlatEstatesDecideAsBefore: a flat estate (every group directly under
// the tenant, all weights equal) is the organisation tree of depth one,
// and the pass decides on it exactly what it decided before the tree
// (issue 32): flatref is that pass, frozen. Over random worlds and event
// sequences (the property tests' worlds, contended or not), every pass's
// decisions, sentences included, are the same.
func TestFlatEstatesDecideAsBefore(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := genWorld(rt, rapid.Bool().Draw(rt, "tight"))
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			w.event(rt)
			got := engine.Pass(&w.s)
			want := flatPass(rt, &w.s)
			if g, _ := json.Marshal(got); string(g) != string(want) {
				rt.Fatalf("pass %d decided otherwise than before the tree:\n got %s\nwant %s", i, g, want)
			}
			w.apply(rt, got)
		}
	})
}

// flatPass runs the frozen pass on a copy of s and returns its decisions
// as JSON (the two packages' types have the same fields).
func flatPass(t *rapid.T, s *engine.Snapshot) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("snapshot to JSON: %v", err)
	}
	var fs flatref.Snapshot
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatalf("snapshot from JSON: %v", err)
	}
	for q := range fs.Queues {
		fs.Queues[q].Sizes = nil
	}
	out, err := json.Marshal(flatref.Pass(&fs))
	if err != nil {
		t.Fatalf("decisions to JSON: %v", err)
	}
	return out
}
