package engine_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/sim"
)

var updateFlat = flag.Bool("update-flat", false, "rewrite testdata/flat_example.golden.json from this build")

// TestFlatEstateUnchanged holds the shipped example, a flat estate (no
// departments), to what it was before the organisation tree existed: the
// same snapshot field for field, the same decisions of a pass over work on
// every compute resource, and the same figures over the example workload.
// The golden file was written by the build before departments; a change
// that moves any of it for a flat estate is a change of behaviour, not of
// layout.
func TestFlatEstateUnchanged(t *testing.T) {
	data, err := os.ReadFile("../examples/estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := sim.LoadEstate(data)
	if err != nil {
		t.Fatal(err)
	}
	m := engine.NewModel(e)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var tasks []engine.TaskState
	seq := int64(0)
	// Three tasks waiting on every compute resource, and one running on
	// the first pool of each profile, so that reservations, lending and
	// reclaim all have something to decide.
	for _, cr := range m.Queues {
		pr := e.Profile(cr.ProfileID)
		for i := 0; i < 3; i++ {
			seq++
			tasks = append(tasks, engine.TaskState{ID: cr.ID + "-w" + string(rune('0'+i)), ComputeResourceID: cr.ID, Size: pr.Size, Seq: seq})
		}
		if len(pr.Pools) > 0 {
			seq++
			tasks = append(tasks, engine.TaskState{ID: cr.ID + "-r", ComputeResourceID: cr.ID, PoolID: pr.Pools[0], Size: pr.Size, Seq: seq,
				PlacedAt: now.Add(-time.Hour), Claimed: true})
		}
	}
	used := map[string]int64{}
	for i, pol := range m.Policies {
		used[pol.ID] = int64(i) * 3_000_000
	}
	s, err := m.Snapshot(now, tasks, used)
	if err != nil {
		t.Fatal(err)
	}
	snapJSON, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	d := engine.Pass(s)
	f, err := os.Open("../examples/workload.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := sim.ParseWorkload(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.Run(e, w, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(map[string]any{"snapshot": json.RawMessage(snapJSON), "decisions": d, "simulation": r}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/flat_example.golden.json"
	if *updateFlat {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		_ = os.WriteFile(golden+".got", got, 0o644)
		t.Fatalf("the flat example's snapshot, pass or simulation changed; compare %s with %s.got", golden, golden)
	}
}
