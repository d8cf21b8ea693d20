package engine_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
	"github.com/klique-ai/klique/internal/model"
)

// The benchmarks measure the pure pass alone; each builds its snapshot once,
// outside the timer. Pass does not change its snapshot, so every iteration
// decides the same pass again. Run them on one core:
//
//	go test ./engine -run '^$' -bench . -benchtime 20x -cpu 1
//
// Each reports, besides time and allocations per pass, "heap-growth-B": the
// live heap after the last pass less the live heap before the first. It
// stays near zero however many passes run (compare -benchtime 1x and
// 100x): a pass keeps nothing once its decisions are dropped, and the bytes
// it allocates per pass (B/op) are the same at every N.

// BenchmarkPassNothingPlaceable is the estate of the issue: 1,000,000
// waiting tasks in 10,000 compute resources over 1,000 pools and 2,000
// groups, 50,000 placed tasks, and nothing can be placed. Every pool is
// full with 50 GPUs of work held by two groups at their reservations; half
// of the groups are also at their limit, and one group in ten is one GPU
// below its reservation, so reclaim looks for borrowed work and finds none.
//
// Each pass is given the previous pass's Reasons, as the loop gives them
// (engine.PassReusing): the estate stays stuck, so no head's reason
// changes and no sentence is written again.
//
// "flat" is that estate with every group under the tenant; "tree" puts
// its 2,000 groups, as teams, under 50 departments (issue 32), each
// reserving and limited to what its 40 teams reserve and may hold.
func BenchmarkPassNothingPlaceable(b *testing.B) {
	for _, tree := range []bool{false, true} {
		b.Run(treeName(tree), func(b *testing.B) {
			s := nothingPlaceable()
			if tree {
				underDepartments(s, 50)
			}
			// As Model.Snapshot does for the loop: the pass need not read
			// every waiting task to find none too large (WaitingSizes).
			s.SumUpWaiting()
			b.ReportAllocs()
			var kept *engine.Reasons
			runPassesWith(b, s, func() *engine.Decisions {
				d, r := engine.PassReusing(s, kept)
				kept = r
				return d
			}, checkStuck(b, s))
			if kept.Rendered != 0 {
				b.Fatalf("a pass over the same stuck estate wrote %d sentences again", kept.Rendered)
			}
		})
	}
}

func treeName(tree bool) string {
	if tree {
		return "tree"
	}
	return "flat"
}

// underDepartments puts the snapshot's groups, as teams, under n
// departments, as many teams in each, in index order: a department
// reserves the sum of its teams' reservations and is limited to the sum
// of their limits, so the tree decides what the flat estate decides, at
// the cost of checking every level.
func underDepartments(s *engine.Snapshot, n int) {
	teams := len(s.Groups)
	per := (teams + n - 1) / n
	for d := 0; d < n; d++ {
		dep := engine.Group{ID: fmt.Sprintf("department-%d", d), Name: fmt.Sprintf("department-%02d", d), Department: true}
		for g := d * per; g < min(teams, (d+1)*per); g++ {
			dep.Reservation += s.Groups[g].Reservation
			dep.Limit += s.Groups[g].Limit
			s.Groups[g].Parent = teams + d + 1
		}
		s.Groups = append(s.Groups, dep)
	}
}

// BenchmarkPassNothingPlaceableCold is BenchmarkPassNothingPlaceable as
// the pass alone costs at its most: every why-waiting sentence written (no
// kept reasons) and every waiting task read (no WaitingSizes), as in the
// benchmark before issue 34.
func BenchmarkPassNothingPlaceableCold(b *testing.B) {
	s := nothingPlaceable()
	b.ReportAllocs()
	runPasses(b, s, checkStuck(b, s))
}

func checkStuck(b *testing.B, s *engine.Snapshot) func(*engine.Decisions) {
	return func(d *engine.Decisions) {
		if len(d.Placements) != 0 || len(d.Preemptions) != 0 || len(d.Blocked) != len(s.Queues) {
			b.Fatalf("placed %d, preempted %d, blocked %d: the estate must be stuck", len(d.Placements), len(d.Preemptions), len(d.Blocked))
		}
	}
}

func nothingPlaceable() *engine.Snapshot {
	const (
		pools           = 1000
		groups          = 2 * pools
		queuesPerGroup  = 5
		waitingPerQueue = 100
		heldPerGroup    = 25 // two groups fill a pool of 50
	)
	s := &engine.Snapshot{Now: enginetest.T0}
	for p := 0; p < pools; p++ {
		s.Pools = append(s.Pools, engine.Pool{ID: fmt.Sprintf("pool-%d", p), Name: fmt.Sprintf("pool-%04d", p), Capacity: model.GPUs(2 * heldPerGroup)})
	}
	// Profile j lists pools j, j+1, j+2: each pool serves three profiles.
	for j := 0; j < pools; j++ {
		s.Profiles = append(s.Profiles, engine.Profile{ID: fmt.Sprintf("profile-%d", j), Name: fmt.Sprintf("profile-%04d", j),
			Pools: []int{j, (j + 1) % pools, (j + 2) % pools}, WeightMilli: 1000})
		for _, p := range s.Profiles[j].Pools {
			s.Pools[p].Profiles = append(s.Pools[p].Profiles, j)
		}
	}
	one := model.Size{Nodes: 1, PerNode: 1000}
	var seq int64
	for g := 0; g < groups; g++ {
		grp := engine.Group{ID: fmt.Sprintf("group-%d", g), Name: fmt.Sprintf("group-%04d", g),
			Reservation: model.GPUs(heldPerGroup), Limit: model.GPUs(2 * heldPerGroup)}
		if g%2 == 1 {
			grp.Limit = grp.Reservation // at its limit
		}
		if g%10 == 0 {
			grp.Reservation += model.GPUs(1) // below its reservation, nothing to reclaim
		}
		s.Groups = append(s.Groups, grp)
		home := g / 2
		for k, off := range []int{0, -1, -2, 1, 2} {
			pr := (home + off + pools) % pools
			q := len(s.Queues)
			s.Queues = append(s.Queues, engine.Queue{ID: fmt.Sprintf("q-%d-%d", g, k), Name: "1 GPU", Group: g, Profile: pr})
			s.Profiles[pr].Queues = append(s.Profiles[pr].Queues, q)
			if k == 0 {
				for i := 0; i < heldPerGroup; i++ {
					seq++
					s.Running = append(s.Running, engine.Placement{TaskID: fmt.Sprintf("r%d", seq), Queue: q, Pool: home, Size: 1000,
						PlacedAt: enginetest.T0.Add(-time.Duration(seq) * time.Second), Seq: seq})
				}
			}
		}
	}
	for q := range s.Queues {
		w := make([]engine.Task, waitingPerQueue)
		for i := range w {
			seq++
			w[i] = engine.Task{ID: fmt.Sprintf("w%d", seq), Size: one, Seq: seq}
		}
		s.Queues[q].Waiting = w
	}
	return s
}

// BenchmarkPlacementThroughput places 100,000 one-GPU tasks per pass on
// plentiful capacity: 100 pools, 1,000 groups (half with reservations, so
// both the reservation and the lend steps place) and 2,000 compute
// resources. It reports placements per second of the pure pass.
//
// "tree" puts the 1,000 groups, as teams, under 20 departments.
func BenchmarkPlacementThroughput(b *testing.B) {
	for _, tree := range []bool{false, true} {
		b.Run(treeName(tree), func(b *testing.B) { placementThroughput(b, tree) })
	}
}

func placementThroughput(b *testing.B, tree bool) {
	const (
		pools           = 100
		groups          = 1000
		waitingPerQueue = 50
	)
	s := &engine.Snapshot{Now: enginetest.T0}
	for p := 0; p < pools; p++ {
		s.Pools = append(s.Pools, engine.Pool{ID: fmt.Sprintf("pool-%d", p), Name: fmt.Sprintf("pool-%03d", p), Capacity: model.GPUs(100_000)})
	}
	for j := 0; j < pools; j++ {
		s.Profiles = append(s.Profiles, engine.Profile{ID: fmt.Sprintf("profile-%d", j), Name: fmt.Sprintf("profile-%03d", j),
			Pools: []int{j, (j + 1) % pools}, WeightMilli: 1000})
		for _, p := range s.Profiles[j].Pools {
			s.Pools[p].Profiles = append(s.Pools[p].Profiles, j)
		}
	}
	one := model.Size{Nodes: 1, PerNode: 1000}
	var seq int64
	for g := 0; g < groups; g++ {
		grp := engine.Group{ID: fmt.Sprintf("group-%d", g), Name: fmt.Sprintf("group-%04d", g), Limit: model.GPUs(1000)}
		if g%2 == 0 {
			grp.Reservation = model.GPUs(waitingPerQueue)
		}
		s.Groups = append(s.Groups, grp)
		for k := 0; k < 2; k++ {
			pr := (g + k*37) % pools
			q := len(s.Queues)
			s.Queues = append(s.Queues, engine.Queue{ID: fmt.Sprintf("q-%d-%d", g, k), Name: "1 GPU", Group: g, Profile: pr})
			s.Profiles[pr].Queues = append(s.Profiles[pr].Queues, q)
			for i := 0; i < waitingPerQueue; i++ {
				seq++
				s.Queues[q].Waiting = append(s.Queues[q].Waiting, engine.Task{ID: fmt.Sprintf("w%d", seq), Size: one, Seq: seq})
			}
		}
	}
	if tree {
		underDepartments(s, 20)
	}
	want := int(seq)
	b.ReportAllocs()
	runPasses(b, s, func(d *engine.Decisions) {
		if len(d.Placements) != want {
			b.Fatalf("placed %d of %d", len(d.Placements), want)
		}
	})
	b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "placements/s")
}

// BenchmarkReclaim: every pool is full of borrowed work and half of the
// groups are below their reservations with work waiting, so a pass
// preempts and places thousands of tasks. In "uniform", 200 pools of 64
// GPUs are each held whole by a borrower (reservation 8) and claimed by an
// owner (reservation 32) with 32 one-GPU tasks waiting. In "mixed-sizes",
// 1,000 pools of 24 GPUs each hold a borrower's 16-GPU gang and, newer,
// eight single GPUs (reservation 8), and an owner (reservation 16) waits
// with a 2x8 gang: newest first, the singles use up the room above the
// borrower's reservation without freeing enough, so every reclaim takes
// the exact search.
func BenchmarkReclaim(b *testing.B) {
	for _, mixed := range []bool{false, true} {
		name := "uniform"
		if mixed {
			name = "mixed-sizes"
		}
		b.Run(name, func(b *testing.B) {
			s, want := reclaimHeavy(mixed)
			b.ReportAllocs()
			runPasses(b, s, func(d *engine.Decisions) {
				if len(d.Placements) != want || len(d.Preemptions) == 0 {
					b.Fatalf("placed %d (want %d) after %d preemptions", len(d.Placements), want, len(d.Preemptions))
				}
			})
			b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "reclaims/s")
		})
	}
}

// reclaimHeavy builds the estates of BenchmarkReclaim and says how many
// placements a pass makes.
func reclaimHeavy(mixed bool) (*engine.Snapshot, int) {
	pools, capacity, ownerRes, claims := 200, 64, 32, 32
	claim := model.Size{Nodes: 1, PerNode: 1000}
	if mixed {
		pools, capacity, ownerRes, claims = 1000, 24, 16, 1
		claim = model.Size{Nodes: 2, PerNode: 8000}
	}
	s := &engine.Snapshot{Now: enginetest.T0}
	var seq int64
	for p := 0; p < pools; p++ {
		// Kubernetes pools: the mixed sizes' 2x8 gangs need a kind that
		// places multi-node work (model.PoolKind.CanRun).
		s.Pools = append(s.Pools, engine.Pool{ID: fmt.Sprintf("pool-%d", p), Name: fmt.Sprintf("pool-%04d", p), Kind: model.PoolKubernetes,
			Capacity: model.GPUs(capacity), Profiles: []int{p}})
		s.Profiles = append(s.Profiles, engine.Profile{ID: fmt.Sprintf("profile-%d", p), Name: fmt.Sprintf("profile-%04d", p), Pools: []int{p}, WeightMilli: 1000})
		owner, borrower := len(s.Groups), len(s.Groups)+1
		s.Groups = append(s.Groups,
			engine.Group{ID: fmt.Sprintf("owner-%d", p), Name: fmt.Sprintf("owner-%04d", p), Reservation: model.GPUs(ownerRes), Limit: model.GPUs(capacity)},
			engine.Group{ID: fmt.Sprintf("borrower-%d", p), Name: fmt.Sprintf("borrower-%04d", p), Reservation: model.GPUs(8), Limit: model.GPUs(capacity)})
		oq, bq := len(s.Queues), len(s.Queues)+1
		s.Queues = append(s.Queues, engine.Queue{ID: fmt.Sprintf("oq-%d", p), Group: owner, Profile: p}, engine.Queue{ID: fmt.Sprintf("bq-%d", p), Group: borrower, Profile: p})
		s.Profiles[p].Queues = []int{oq, bq}
		hold := func(n int, size model.MilliGPU) {
			for i := 0; i < n; i++ {
				seq++
				s.Running = append(s.Running, engine.Placement{TaskID: fmt.Sprintf("r%d", seq), Queue: bq, Pool: p, Size: size,
					PlacedAt: enginetest.T0.Add(time.Duration(seq-10_000_000) * time.Second), Seq: seq})
			}
		}
		if mixed {
			hold(1, 16_000)
			hold(8, 1000)
		} else {
			hold(64, 1000)
		}
		for i := 0; i < claims; i++ {
			seq++
			s.Queues[oq].Waiting = append(s.Queues[oq].Waiting, engine.Task{ID: fmt.Sprintf("w%d", seq), Size: claim, Seq: seq})
		}
	}
	return s, pools * claims
}

// runPasses runs one pass per iteration, checking the first, and reports
// how much the live heap grew across all of them.
func runPasses(b *testing.B, s *engine.Snapshot, check func(*engine.Decisions)) {
	runPassesWith(b, s, func() *engine.Decisions { return engine.Pass(s) }, check)
}

// runPassesWith is runPasses with the pass given: pass runs one pass over
// s, keeping across calls whatever the loop keeps.
func runPassesWith(b *testing.B, s *engine.Snapshot, pass func() *engine.Decisions, check func(*engine.Decisions)) {
	check(pass())
	before := liveHeap()
	cpu := processCPU(b)
	b.ResetTimer()
	for b.Loop() {
		pass()
	}
	b.StopTimer()
	// CPU time per pass, which other work on a shared machine stretches
	// far less than the wall time of ns/op.
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(liveHeap()-before), "heap-growth-B")
	runtime.KeepAlive(s)
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
