package engine_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
	"github.com/klique-ai/klique/internal/model"
)

// TestKeptReasonsAreWrittenOnlyWhenTheyChange: a pass given the previous
// pass's Reasons writes again only the sentences whose reason changed, and
// its decisions are still those of a pass that writes every sentence.
func TestKeptReasonsAreWrittenOnlyWhenTheyChange(t *testing.T) {
	// p is full: A is at its limit of 1, B (limit 2) waits for room on p.
	s := enginetest.NewEstate(t).Pool("p", 2).Profile("one", 1, "p").
		Group("A", 0, 1).Group("B", 0, 2).Queue("A", "one").Queue("B", "one").
		Run("A/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
		Run("B/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
		Wait("A/one", 1, "1").Wait("B/one", 1, "1").Build()

	// pass runs the kept pass on s, checks it against the pass that writes
	// every sentence, and that it wrote rendered sentences.
	var kept *engine.Reasons
	pass := func(step string, s *engine.Snapshot, rendered int) *engine.Decisions {
		t.Helper()
		d, r := engine.PassReusing(s, kept)
		if want := engine.Pass(s); !reflect.DeepEqual(d, want) {
			t.Fatalf("%s: the pass with kept reasons decided\n%+v\nand the pass without\n%+v", step, d, want)
		}
		if r.Rendered != rendered {
			t.Fatalf("%s: wrote %d sentences, want %d", step, r.Rendered, rendered)
		}
		kept = r
		return d
	}
	reason := func(s *engine.Snapshot, d *engine.Decisions, queue string) string {
		t.Helper()
		return enginetest.BlockedOf(s, d, queue).Reason
	}

	d := pass("first pass", s, 2)
	aAtLimit, bFull := reason(s, d, "A/one"), reason(s, d, "B/one")
	if !strings.Contains(aAtLimit, "group A is at its limit") || !strings.Contains(bFull, "every pool of profile one is full") {
		t.Fatalf("first pass: A %q, B %q", aAtLimit, bFull)
	}

	d = pass("same estate", s, 0)
	if a, b := reason(s, d, "A/one"), reason(s, d, "B/one"); a != aAtLimit || b != bFull {
		t.Fatalf("same estate: A %q, B %q; want the first pass's", a, b)
	}

	// An admin raises A's limit: A's head now waits for room on p, B's
	// reason is unchanged.
	s2 := *s
	s2.Groups = append([]engine.Group(nil), s.Groups...)
	s2.Groups[0].Limit = model.GPUs(3)
	d = pass("A's limit raised", &s2, 1)
	if a := reason(&s2, d, "A/one"); a == aAtLimit || !strings.Contains(a, "every pool of profile one is full") {
		t.Fatalf("A's limit raised: A %q, want the sentence written again for the full pool", a)
	}
	if b := reason(&s2, d, "B/one"); b != bFull {
		t.Fatalf("A's limit raised: B %q, want %q", b, bFull)
	}

	// Only a figure in B's sentence changes: p grows to 3 GPUs and a third
	// group fills it. The constraint is the same, the sentence is not.
	s3 := s2
	s3.Pools = append([]engine.Pool(nil), s2.Pools...)
	s3.Pools[0].Capacity = model.GPUs(3)
	s3.Running = append(append([]engine.Placement(nil), s2.Running...),
		engine.Placement{TaskID: "C", Queue: 0, Pool: 0, Size: model.GPUs(1), PlacedAt: enginetest.T0.Add(-time.Minute), Seq: 100})
	d = pass("p grown and filled", &s3, 2)
	if b := reason(&s3, d, "B/one"); b == bFull || !strings.Contains(b, "p 3/3") {
		t.Fatalf("p grown and filled: B %q, want the new figures", b)
	}
	pass("the grown estate again", &s3, 0)
}
