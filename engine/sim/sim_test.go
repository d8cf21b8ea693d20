package sim

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
)

// smallEstate: one pool of 4 GPUs shared by two groups with a reservation
// of 2 each; group a has a daily budget of 3 hours.
const smallEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: p, kind: kubernetes, capacity: 4, gpuClass: h100}
profiles:
  - {name: one, size: 1, timeWeight: 1, pools: [p]}
  - {name: flex, sizeFromParameter: {parameter: gpus, default: 1}, timeWeight: 0, pools: [p]}
groups:
  - {name: a}
  - {name: b}
policies:
  - group: a
    reservation: 2
    limit: 4
    timeBudget: {hours: 3, period: day}
    computeResources: [{name: 1 GPU, profile: one}]
  - group: b
    reservation: 2
    limit: 4
    computeResources: [{name: 1 GPU, profile: one}, {name: any, profile: flex}]
`

type testBundle struct {
	estate *estate.Estate
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	e, _, err := LoadEstate([]byte(smallEstate))
	if err != nil {
		t.Fatalf("load estate: %v", err)
	}
	return &testBundle{estate: e}
}

func (b *testBundle) run(t *testing.T, workload string, opt Options) *Result {
	t.Helper()
	w, err := ParseWorkload(strings.NewReader(workload))
	if err != nil {
		t.Fatalf("parse workload: %v", err)
	}
	res, err := Run(b.estate, w, opt)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func group(t *testing.T, r *Result, name string) GroupResult {
	t.Helper()
	for _, g := range r.Groups {
		if g.Group == name {
			return g
		}
	}
	t.Fatalf("no group %s in %+v", name, r.Groups)
	return GroupResult{}
}

func secs(v float64) *float64 { return &v }

func hours(v float64) *float64 { return &v }

// reclaimWorkload: b borrows the whole pool at 09:00; a queues two tasks at
// 10:00 and reclaims its reservation; b's two preempted tasks resume when
// a's finish.
const reclaimWorkload = `# b borrows, a reclaims
{"at": "2026-12-01T09:00:00Z", "group": "b", "computeResource": "1 GPU", "duration": "2h", "count": 4}
{"at": 3600, "group": "a", "computeResource": "1 GPU", "duration": "30m", "count": 2}
`

func TestSimulation(t *testing.T) {
	t.Run("the same estate and workload give the same result, to the last figure", func(t *testing.T) {
		b := setup(t)
		got := b.run(t, reclaimWorkload, Options{})
		want := &Result{
			Start: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 1, 11, 30, 0, 0, time.UTC),
			PassInterval: "1s", Passes: got.Passes,
			Groups: []GroupResult{
				{Group: "a", Tasks: 2, Finished: 2, WaitP50: secs(0), WaitP95: secs(0), WaitMax: secs(0), ReclaimedFor: 2, GPUHours: 1, BudgetHours: hours(1)},
				// b's two preempted tasks had an hour left: they resume at
				// 10:30 and finish at 11:30.
				{Group: "b", Tasks: 4, Finished: 4, WaitP50: secs(0), WaitP95: secs(0), WaitMax: secs(0), PreemptedReclaim: 2, GPUHours: 8},
			},
			Pools:   []PoolResult{{Pool: "p", CapacityGPUs: 4, GPUHours: 9, Utilization: 0.9, PeakGPUs: 4}},
			RunOuts: []RunOut{},
		}
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.MarshalIndent(got, "", "  ")
			wj, _ := json.MarshalIndent(want, "", "  ")
			t.Fatalf("got\n%s\nwant\n%s", gj, wj)
		}
		again := b.run(t, reclaimWorkload, Options{})
		if !reflect.DeepEqual(got, again) {
			t.Fatal("a second run differs")
		}
		// Passes run only when something can change: a handful, not the
		// 9,000 seconds of the run.
		if got.Passes > 20 {
			t.Fatalf("%d passes for a run with five events", got.Passes)
		}
	})

	t.Run("reclaim shows up as preemptions of the borrower, made for the owner", func(t *testing.T) {
		r := setup(t).run(t, reclaimWorkload, Options{PassInterval: time.Minute})
		if g := group(t, r, "b"); g.PreemptedReclaim != 2 || g.PreemptedBudget != 0 {
			t.Fatalf("b: %+v, want 2 reclaim preemptions", g)
		}
		if g := group(t, r, "a"); g.ReclaimedFor != 2 {
			t.Fatalf("a: %+v, want 2 preemptions made for it", g)
		}
	})

	t.Run("a budget run-out is reported, and preempts and holds the group's work until the reset", func(t *testing.T) {
		// a runs two GPUs from 22:00 with 3 budget hours a day: they last
		// 1.5 hours, to 23:30. The rest waits for midnight.
		r := setup(t).run(t, `{"at": "2026-12-01T22:00:00Z", "group": "a", "computeResource": "1 GPU", "duration": "2h", "count": 2}`, Options{})
		want := []RunOut{{Group: "a", At: time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC), Period: "day", Hours: 3,
			ResetAt: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}}
		if !reflect.DeepEqual(r.RunOuts, want) {
			t.Fatalf("run-outs %+v, want %+v", r.RunOuts, want)
		}
		g := group(t, r, "a")
		if g.PreemptedBudget != 2 || g.BudgetRunOuts != 1 || g.Finished != 2 {
			t.Fatalf("a: %+v, want both tasks preempted for the budget and finished after the reset", g)
		}
		// Preempted at 23:30 with 30 minutes left, resumed at midnight.
		if end := time.Date(2026, 12, 2, 0, 30, 0, 0, time.UTC); !r.End.Equal(end) {
			t.Fatalf("ended %s, want %s", r.End, end)
		}
	})

	t.Run("budget used before the start counts in the start's period", func(t *testing.T) {
		r := setup(t).run(t, `{"group": "a", "budgetUsed": 2.5}
{"at": "2026-12-01T09:00:00Z", "group": "a", "computeResource": "1 GPU", "duration": "1h"}`, Options{})
		if len(r.RunOuts) != 1 || !r.RunOuts[0].At.Equal(time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)) {
			t.Fatalf("run-outs %+v, want one at 09:30", r.RunOuts)
		}
	})

	t.Run("until cuts the run and counts running work up to it", func(t *testing.T) {
		r := setup(t).run(t, reclaimWorkload, Options{Until: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)})
		g := group(t, r, "b")
		if g.Running != 4 || g.Finished != 0 || g.GPUHours != 2 || group(t, r, "a").Tasks != 0 {
			t.Fatalf("b %+v, a %+v: want 4 running for half an hour and a's tasks not arrived", g, group(t, r, "a"))
		}
	})

	t.Run("sizes come from the task on a profile that reads them, and waits are measured", func(t *testing.T) {
		r := setup(t).run(t, `{"at": 0, "group": "b", "computeResource": "any", "size": "4", "duration": "1h"}
{"at": 0, "group": "b", "computeResource": "any", "duration": "1h"}`, Options{Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
		g := group(t, r, "b")
		if *g.WaitP50 != 0 || *g.WaitMax != 3600 || g.GPUHours != 5 {
			t.Fatalf("b: %+v, want the 1-GPU task to wait an hour behind the 4-GPU one", g)
		}
	})
}

func TestWorkloadErrors(t *testing.T) {
	cases := []struct{ name, workload, want string }{
		{"not JSON", "{\"at\": 0,\n", "workload line 1: not a JSON object"},
		{"unknown field", `{"at": 0, "group": "a", "computeResource": "1 GPU", "duration": "1h", "gpus": 2}`, `unknown field "gpus"`},
		{"no duration", "\n# a comment\n" + `{"at": 0, "group": "a", "computeResource": "1 GPU"}`, "workload line 3: duration is required"},
		{"bad time", `{"at": "9am", "group": "a", "computeResource": "1 GPU", "duration": "1h"}`, `at "9am" is not an RFC 3339 time`},
		{"bad duration", `{"at": 0, "group": "a", "computeResource": "1 GPU", "duration": "2 hours"}`, `duration "2 hours" is not a duration`},
		{"negative count", `{"at": 0, "group": "a", "computeResource": "1 GPU", "duration": "1h", "count": 0}`, "count must be 1 to 100000"},
		{"budget line with a task", `{"group": "a", "budgetUsed": 1, "duration": "1h"}`, "a budgetUsed line gives only group and budgetUsed"},
		{"empty", "# nothing\n", "the workload has no tasks"},
	}
	for _, c := range cases {
		_, err := ParseWorkload(strings.NewReader(c.workload))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.name, err, c.want)
		}
	}

	b := setup(t)
	resolve := []struct{ name, workload, want string }{
		{"unknown group", `{"at": 0, "group": "z", "computeResource": "1 GPU", "duration": "1h"}`, `workload line 1: group "z" is not in the estate`},
		{"unknown compute resource", `{"at": 0, "group": "a", "computeResource": "8 GPUs", "duration": "1h"}`, `group "a" has no compute resource "8 GPUs" (it has ["1 GPU"])`},
		{"size on a fixed profile", `{"at": 0, "group": "a", "computeResource": "1 GPU", "size": "2", "duration": "1h"}`, "fixed size"},
		{"bad size", `{"at": 0, "group": "b", "computeResource": "any", "size": "3.5", "duration": "1h"}`, "workload line 1: GPU size"},
		{"budget of a group without one", `{"group": "b", "budgetUsed": 1}` + "\n" + `{"at": 0, "group": "a", "computeResource": "1 GPU", "duration": "1h"}`, `workload line 1: group "b" has no time budget`},
		{"offsets without a start", `{"at": 0, "group": "a", "computeResource": "1 GPU", "duration": "1h"}`, "give the start"},
	}
	for _, c := range resolve {
		w, err := ParseWorkload(strings.NewReader(c.workload))
		if err != nil {
			t.Fatalf("%s: parse: %v", c.name, err)
		}
		opt := Options{Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		if c.name == "offsets without a start" {
			opt.Start = time.Time{}
		}
		_, err = Run(b.estate, w, opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.name, err, c.want)
		}
	}
}

func TestModel(t *testing.T) {
	data, err := os.ReadFile("../../examples/estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := LoadEstate(data)
	if err != nil {
		t.Fatal(err)
	}
	m := engine.NewModel(e)
	s, err := m.Snapshot(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), []engine.TaskState{
		{ID: "w2", ComputeResourceID: queueID(t, m, "nlp", "1 GPU"), Size: e.ProfileByName("one-gpu").Size, Seq: 2},
		{ID: "w1", ComputeResourceID: queueID(t, m, "nlp", "1 GPU"), Size: e.ProfileByName("one-gpu").Size, Seq: 1},
		{ID: "r1", ComputeResourceID: queueID(t, m, "vision", "1 GPU"), PoolID: e.PoolByName("bare-metal").ID, Size: e.ProfileByName("one-gpu").Size, Seq: 3,
			PlacedAt: time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)},
	}, map[string]int64{e.PolicyOfGroup(e.GroupByName("vision").ID).ID: 5_000_000})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("pools are in name order, with the execution priority of each", func(t *testing.T) {
		var names []string
		for _, p := range s.Pools {
			names = append(names, p.Name)
		}
		if want := []string{"bare-metal", "cloud-burst", "onprem-k8s", "slurm-a100"}; !reflect.DeepEqual(names, want) {
			t.Fatalf("pools %v, want %v", names, want)
		}
		var order []string
		for _, pr := range s.Pools[2].Profiles {
			order = append(order, s.Profiles[pr].Name)
		}
		if want := []string{"gpu-eighth", "half-gpu", "one-gpu", "eight-gpus", "multi-node-2x8"}; !reflect.DeepEqual(order, want) {
			t.Fatalf("onprem-k8s serves %v, want %v", order, want)
		}
	})

	t.Run("profiles keep their pool order and queuing priority", func(t *testing.T) {
		pr := s.Profiles[m.ProfileIndex[e.ProfileByName("one-gpu").ID]]
		var pools, groups []string
		for _, p := range pr.Pools {
			pools = append(pools, s.Pools[p].Name)
		}
		for _, q := range pr.Queues {
			groups = append(groups, s.Groups[s.Queues[q].Group].Name)
		}
		if want := []string{"onprem-k8s", "bare-metal", "cloud-burst"}; !reflect.DeepEqual(pools, want) {
			t.Fatalf("one-gpu pools %v, want %v", pools, want)
		}
		if want := []string{"ml-research", "vision", "nlp"}; !reflect.DeepEqual(groups, want) {
			t.Fatalf("one-gpu queuing priority %v, want %v", groups, want)
		}
		if pr.WeightMilli != 1000 {
			t.Fatalf("weight %d", pr.WeightMilli)
		}
	})

	t.Run("budgets, waiting and running work are laid out for the pass", func(t *testing.T) {
		v := s.Groups[m.PolicyIndex[e.PolicyOfGroup(e.GroupByName("vision").ID).ID]]
		if v.Budget == nil || v.Budget.Total != 2000_000_000 || v.Budget.Used != 5_000_000 || v.Budget.LowWatermark != 15*time.Minute ||
			!v.Budget.ResetAt.Equal(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)) || v.Reservation != 16_000 || v.Limit != 32_000 {
			t.Fatalf("vision %+v budget %+v", v, v.Budget)
		}
		q := s.Queues[m.QueueIndex[queueID(t, m, "nlp", "1 GPU")]]
		if len(q.Waiting) != 2 || q.Waiting[0].ID != "w1" || q.Waiting[1].ID != "w2" {
			t.Fatalf("nlp's queue %+v, want w1 then w2", q.Waiting)
		}
		if len(s.Running) != 1 || s.Pools[s.Running[0].Pool].Name != "bare-metal" || s.Running[0].Size != 1000 {
			t.Fatalf("running %+v", s.Running)
		}
		if d := engine.Pass(s); len(d.Placements) != 2 {
			t.Fatalf("the pass placed %+v, want nlp's two tasks", d.Placements)
		}
	})

	t.Run("a task of an unknown compute resource is an error", func(t *testing.T) {
		if _, err := m.Snapshot(time.Now(), []engine.TaskState{{ID: "x", ComputeResourceID: "nope"}}, nil); err == nil {
			t.Fatal("no error")
		}
	})
}

func queueID(t *testing.T, m *engine.Model, group, name string) string {
	t.Helper()
	for _, cr := range m.Queues {
		if cr.Name == name && m.Estate.PolicyGroupName(cr.PolicyID) == group {
			return cr.ID
		}
	}
	t.Fatalf("no compute resource %s of %s", name, group)
	return ""
}

// TestExampleWorkload runs the shipped example and checks the story its
// comments tell.
func TestExampleWorkload(t *testing.T) {
	data, err := os.ReadFile("../../examples/estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := LoadEstate(data)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("../../examples/workload.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ParseWorkload(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(e, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ml, vision, nlp := group(t, r, "ml-research"), group(t, r, "vision"), group(t, r, "nlp")
	if ml.PreemptedReclaim == 0 || vision.ReclaimedFor != ml.PreemptedReclaim {
		t.Errorf("ml-research %+v, vision %+v: vision must reclaim ml-research's borrowed GPUs", ml, vision)
	}
	if len(r.RunOuts) != 1 || r.RunOuts[0].Group != "vision" || vision.PreemptedBudget == 0 {
		t.Errorf("run-outs %+v, vision %+v: vision's budget must run out and preempt its work", r.RunOuts, vision)
	}
	if *nlp.WaitMax != 2*3600 {
		t.Errorf("nlp %+v: its second 8-GPU job must wait two hours at its limit", nlp)
	}
	for _, g := range r.Groups {
		if g.Finished != g.Tasks {
			t.Errorf("%s finished %d of %d", g.Group, g.Finished, g.Tasks)
		}
	}

	// Skipping the passes at which nothing can change changes nothing:
	// running every pass of a 10-second grid gives the same figures.
	skip, err := Run(e, w, Options{PassInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	every, err := Run(e, w, Options{PassInterval: 10 * time.Second, everyPass: true})
	if err != nil {
		t.Fatal(err)
	}
	if every.Passes < 100*skip.Passes {
		t.Fatalf("%d passes on every tick against %d skipping", every.Passes, skip.Passes)
	}
	skip.Passes, every.Passes = 0, 0
	if !reflect.DeepEqual(skip, every) {
		sj, _ := json.MarshalIndent(skip, "", "  ")
		ej, _ := json.MarshalIndent(every, "", "  ")
		t.Fatalf("skipping passes changed the result:\n%s\nevery pass:\n%s", sj, ej)
	}
}

// TestSkippingPassesChangesNothing: over random workloads on the small
// estate, jumping from event to event gives the same result as running
// every pass of the grid.
func TestSkippingPassesChangesNothing(t *testing.T) {
	b := setup(t)
	start := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC) // crosses the daily reset
	rapid.Check(t, func(rt *rapid.T) {
		w := &Workload{}
		if rapid.Bool().Draw(rt, "budgetUsed") {
			w.BudgetUsed = append(w.BudgetUsed, BudgetUse{Group: "a", MicroHours: rapid.Int64Range(0, 3_000_000).Draw(rt, "used")})
		}
		// Every pass of a fine grid is slow: a short run on a 1s grid, or a
		// long one across the daily reset on a 1m grid.
		long := rapid.Bool().Draw(rt, "long")
		opt := Options{Start: start, PassInterval: time.Second, Until: start.Add(20 * time.Minute)}
		if long {
			opt.PassInterval, opt.Until = time.Minute, start.Add(12*time.Hour)
		}
		span := opt.Until.Sub(start) / time.Second
		n := rapid.IntRange(1, 12).Draw(rt, "lines")
		for i := 0; i < n; i++ {
			a := Arrival{Line: i + 1, Offset: time.Duration(rapid.IntRange(0, int(span)).Draw(rt, "second")) * time.Second,
				Duration: time.Duration(rapid.IntRange(1, int(span)/2).Draw(rt, "seconds")) * time.Second, Count: rapid.IntRange(1, 4).Draw(rt, "count")}
			switch rapid.IntRange(0, 2).Draw(rt, "kind") {
			case 0:
				a.Group, a.ComputeResource = "a", "1 GPU"
			case 1:
				a.Group, a.ComputeResource = "b", "1 GPU"
			default:
				a.Group, a.ComputeResource, a.Size = "b", "any", rapid.SampledFrom([]string{"0.5", "1", "2", "4"}).Draw(rt, "size")
			}
			w.Arrivals = append(w.Arrivals, a)
		}
		skip, err := Run(b.estate, w, opt)
		if err != nil {
			rt.Fatal(err)
		}
		opt.everyPass = true
		every, err := Run(b.estate, w, opt)
		if err != nil {
			rt.Fatal(err)
		}
		skip.Passes, every.Passes = 0, 0
		if !reflect.DeepEqual(skip, every) {
			sj, _ := json.Marshal(skip)
			ej, _ := json.Marshal(every)
			rt.Fatalf("skipping passes changed the result:\n%s\nevery pass:\n%s", sj, ej)
		}
	})
}
