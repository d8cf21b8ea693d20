package engine_test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"

	"github.com/klique-ai/klique/engine"
)

// TestFlatEstatesDecideAsBefore: a flat estate (every group directly under
// the tenant, all weights equal) is the organisation tree of depth one,
// and the pass decides on it exactly what it decided before the tree
// (issue 32). testdata/flat_worlds.jsonl.gz holds 2,374 passes recorded
// from the pass as it was at 66494dc, over the property tests' random
// worlds and event sequences (400 worlds, contended or not: placements,
// reclaims, preemptions, failures, sentences): each line a snapshot and
// the decisions that pass made of it. Every one must come out the same,
// sentences included.
func TestFlatEstatesDecideAsBefore(t *testing.T) {
	f, err := os.Open("testdata/flat_worlds.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<22)
	n := 0
	for sc.Scan() {
		n++
		var c struct {
			Snapshot  engine.Snapshot
			Decisions json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("case %d: %v", n, err)
		}
		got, err := json.Marshal(engine.Pass(&c.Snapshot))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(c.Decisions) {
			t.Fatalf("case %d decided otherwise than before the tree:\n got %s\nwant %s", n, got, c.Decisions)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 2000 {
		t.Fatalf("%d recorded passes, want the 2,374 of the corpus", n)
	}
}
