package engine_test

import (
	"fmt"
	"reflect"
	"sort"
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
)

// smallOrLarge draws 1..small half of the time and 0..large otherwise, so
// that estates are often tight enough for contention.
func smallOrLarge(small, large int) *rapid.Generator[int] {
	return rapid.OneOf(rapid.IntRange(1, small), rapid.IntRange(0, large))
}

var worldStart = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

// sizeChoices are the task sizes the generators use: fractions, whole GPUs
// and multi-node gangs, small ones more often.
var sizeChoices = []string{"0.125", "0.25", "0.5", "1", "1", "1", "2", "2", "4", "8", "2x4", "2x8"}

// weightChoices are time weights in thousandths, 0 (exempt) to 8.
var weightChoices = []int64{0, 125, 500, 1000, 1500, 2000, 8000}

// world is the simulated estate: the static snapshot parts, the waiting
// tasks inside s.Queues, the running work, and a ledger of placement
// intervals.
type world struct {
	s engine.Snapshot
	// variable marks profiles that read sizes from tasks; sizes[pr] is the
	// fixed size of the others.
	variable []bool
	sizes    []model.Size
	// taskSize keeps each task's size across placement and preemption.
	taskSize map[string]model.Size
	seq      int64
	// intervals is every placement interval; open ones have a zero end.
	intervals []interval
	open      map[string]int
	// exact is the GPU time of all work, accumulated step by step as the
	// clock advances, in milli-GPU × microseconds (exact integers).
	exact  int64
	passes int
	// reasons are the last pass's, kept as the loop keeps them.
	reasons *engine.Reasons
	// tree: the groups form an organisation tree (genTreeWorld). An
	// admin's lowered limit then leaves reservations as they are, so
	// that they still fit within their parents'.
	tree bool
}

// pathOf is group g's path in the organisation tree: g, its parent, ...,
// its top-level ancestor (a flat estate's path is g alone).
func pathOf(s *engine.Snapshot, g int) []int {
	path := []int{g}
	for p, ok := s.Groups[g].ParentIndex(); ok; p, ok = s.Groups[p].ParentIndex() {
		path = append(path, p)
	}
	return path
}

type interval struct {
	task       string
	size       model.MilliGPU
	start, end time.Time
}

// genWorld draws an estate; tight draws one built for contention.
func genWorld(t *rapid.T, tight bool) *world {
	w := &world{taskSize: map[string]model.Size{}, open: map[string]int{}}
	// Sunday evening: the world crosses midnight and the weekly budget
	// reset early on.
	w.s.Now = worldStart
	nPools := rapid.IntRange(1, 4).Draw(t, "pools")
	capacity := smallOrLarge(16, 64)
	if tight {
		nPools = rapid.IntRange(1, 2).Draw(t, "pools")
		capacity = rapid.IntRange(2, 12)
	}
	total := 0
	for p := 0; p < nPools; p++ {
		c := capacity.Draw(t, "capacity")
		total += c
		w.s.Pools = append(w.s.Pools, engine.Pool{ID: fmt.Sprintf("pool-%d", p), Name: fmt.Sprintf("p%d", p), Capacity: model.GPUs(c),
			Kind: rapid.SampledFrom(model.PoolKinds).Draw(t, "kind")})
	}
	poolIdx := make([]int, nPools)
	for i := range poolIdx {
		poolIdx[i] = i
	}
	nProfiles := rapid.IntRange(1, 4).Draw(t, "profiles")
	for pr := 0; pr < nProfiles; pr++ {
		order := rapid.Permutation(poolIdx).Draw(t, "poolOrder")
		n := rapid.IntRange(1, min(3, nPools)).Draw(t, "profilePools")
		if tight {
			n = nPools
		}
		w.s.Profiles = append(w.s.Profiles, engine.Profile{ID: fmt.Sprintf("profile-%d", pr), Name: fmt.Sprintf("pr%d", pr),
			Pools: append([]int(nil), order[:n]...), WeightMilli: rapid.SampledFrom(weightChoices).Draw(t, "weight")})
		w.variable = append(w.variable, rapid.Bool().Draw(t, "variableSize"))
		w.sizes = append(w.sizes, sizeOf(rapid.SampledFrom(sizeChoices).Draw(t, "size")))
	}
	// Execution priority: a random order of the profiles linked to a pool.
	for p := range w.s.Pools {
		var linked []int
		for pr := range w.s.Profiles {
			for _, lp := range w.s.Profiles[pr].Pools {
				if lp == p {
					linked = append(linked, pr)
				}
			}
		}
		if len(linked) > 0 {
			w.s.Pools[p].Profiles = rapid.Permutation(linked).Draw(t, "executionPriority")
		}
	}
	nGroups := rapid.IntRange(1, 4).Draw(t, "groups")
	for g := 0; g < nGroups; g++ {
		limit := smallOrLarge(16, 64).Draw(t, "limit")
		reservation := rapid.IntRange(0, limit).Draw(t, "reservation")
		if tight {
			limit = total
			reservation = rapid.IntRange(1, max(1, total/2)).Draw(t, "reservation")
		}
		grp := engine.Group{ID: fmt.Sprintf("group-%d", g), Name: fmt.Sprintf("g%d", g),
			Reservation: model.GPUs(reservation), Limit: model.GPUs(limit)}
		if rapid.Bool().Draw(t, "budgeted") {
			total := int64(rapid.IntRange(0, 40).Draw(t, "budgetHours")) * 1_000_000
			grp.Budget = &engine.Budget{Total: total, Used: rapid.Int64Range(0, total).Draw(t, "budgetUsed"),
				LowWatermark: time.Duration(rapid.IntRange(0, 30).Draw(t, "watermarkMinutes")) * time.Minute,
				Period:       model.PeriodWeek, ResetAt: engine.PeriodEnd(model.PeriodWeek, worldStart)}
		}
		w.s.Groups = append(w.s.Groups, grp)
	}
	// Queues join groups to profiles; each profile's queuing priority is a
	// random order of its queues.
	for g := range w.s.Groups {
		for pr := range w.s.Profiles {
			if tight || rapid.Bool().Draw(t, "connect") {
				w.s.Queues = append(w.s.Queues, engine.Queue{ID: fmt.Sprintf("q-%d-%d", g, pr), Name: fmt.Sprintf("g%d/pr%d", g, pr), Group: g, Profile: pr})
			}
		}
	}
	for pr := range w.s.Profiles {
		var qs []int
		for q := range w.s.Queues {
			if w.s.Queues[q].Profile == pr {
				qs = append(qs, q)
			}
		}
		if len(qs) > 0 {
			w.s.Profiles[pr].Queues = rapid.Permutation(qs).Draw(t, "queuingPriority")
		}
	}
	return w
}

// event applies one random event to the world.
func (w *world) event(t *rapid.T) {
	switch rapid.IntRange(0, 11).Draw(t, "event") {
	case 0, 1, 2, 3: // arrivals
		if len(w.s.Queues) == 0 {
			return
		}
		q := rapid.IntRange(0, len(w.s.Queues)-1).Draw(t, "queue")
		pr := w.s.Queues[q].Profile
		for n := rapid.IntRange(1, 8).Draw(t, "arrivals"); n > 0; n-- {
			size := w.sizes[pr]
			if w.variable[pr] {
				size = sizeOf(rapid.SampledFrom(sizeChoices).Draw(t, "taskSize"))
			}
			w.seq++
			id := fmt.Sprintf("t%d", w.seq)
			w.taskSize[id] = size
			w.s.Queues[q].Waiting = append(w.s.Queues[q].Waiting, engine.Task{ID: id, Size: size, Seq: w.seq})
		}
	case 4, 5: // a running task finishes
		if len(w.s.Running) == 0 {
			return
		}
		i := rapid.IntRange(0, len(w.s.Running)-1).Draw(t, "finish")
		w.release(w.s.Running[i].TaskID)
	case 6, 7: // time passes
		w.advance(time.Duration(rapid.Int64Range(1, 6*3600*1000).Draw(t, "advanceMillis")) * time.Millisecond)
	case 8: // an admin raises or lowers a budget
		g := rapid.IntRange(0, len(w.s.Groups)-1).Draw(t, "budgetGroup")
		if b := w.s.Groups[g].Budget; b != nil {
			b.Total = int64(rapid.IntRange(0, 40).Draw(t, "newBudgetHours")) * 1_000_000
		}
	case 9: // nothing happens between two passes
	case 10: // an admin changes a pool's capacity, often below what it holds
		p := rapid.IntRange(0, len(w.s.Pools)-1).Draw(t, "capacityPool")
		old := int(w.s.Pools[p].Capacity / 1000)
		w.s.Pools[p].Capacity = model.GPUs(rapid.IntRange(0, old+2).Draw(t, "newCapacity"))
	case 11: // an admin changes a group's limit (and, below it, its reservation)
		g := rapid.IntRange(0, len(w.s.Groups)-1).Draw(t, "limitGroup")
		grp := &w.s.Groups[g]
		grp.Limit = model.GPUs(rapid.IntRange(0, int(grp.Limit/1000)+2).Draw(t, "newLimit"))
		if grp.Limit > 0 && !w.tree {
			// A limit of 0 pauses the group and keeps its reservation.
			grp.Reservation = min(grp.Reservation, grp.Limit)
		}
	}
}

// advance moves the clock: running work accrues GPU time, budgeted groups
// burn budget at their running rate, and budgets renew at the period end.
func (w *world) advance(d time.Duration) {
	for _, r := range w.s.Running {
		w.exact += int64(r.Size) * d.Microseconds()
	}
	rate := make([]int64, len(w.s.Groups))
	for _, r := range w.s.Running {
		q := &w.s.Queues[r.Queue]
		// A department's budget burns at its teams' rate.
		for _, g := range pathOf(&w.s, q.Group) {
			rate[g] += w.s.Profiles[q.Profile].WeightMilli
		}
	}
	w.s.Now = w.s.Now.Add(d)
	for g := range w.s.Groups {
		b := w.s.Groups[g].Budget
		if b == nil {
			continue
		}
		if !w.s.Now.Before(b.ResetAt) {
			// The period renewed: only the part after the reset counts.
			since := w.s.Now.Sub(engine.PeriodStart(b.Period, w.s.Now))
			b.Used = engine.MicroBudgetHours(min(since, d), rate[g])
			b.ResetAt = engine.PeriodEnd(b.Period, w.s.Now)
			continue
		}
		b.Used += engine.MicroBudgetHours(d, rate[g])
	}
}

// release ends a running task's placement (a finish or a preemption) and
// closes its ledger interval.
func (w *world) release(id string) engine.Placement {
	for i, r := range w.s.Running {
		if r.TaskID == id {
			w.s.Running = append(w.s.Running[:i], w.s.Running[i+1:]...)
			w.intervals[w.open[id]].end = w.s.Now
			delete(w.open, id)
			return r
		}
	}
	panic("release of a task that is not running: " + id)
}

// pass runs the engine, checks every property, and applies the decisions.
func (w *world) pass(t *rapid.T) {
	w.passes++
	before := cloneSnapshot(&w.s)
	d := engine.Pass(&w.s)
	if !reflect.DeepEqual(&w.s, before) {
		t.Fatalf("pass %d changed its snapshot", w.passes)
	}
	if again := engine.Pass(before); !reflect.DeepEqual(d, again) {
		t.Fatalf("pass %d is not deterministic on a deep copy:\n%+v\n%+v", w.passes, d, again)
	}
	// A pass that reuses the last pass's sentences decides the same,
	// sentence for sentence, whatever changed since.
	kept, reasons := engine.PassReusing(before, w.reasons)
	if !reflect.DeepEqual(d, kept) {
		t.Fatalf("pass %d with the last pass's reasons decided otherwise:\n%+v\n%+v", w.passes, kept, d)
	}
	w.reasons = reasons
	// A snapshot with its waiting sizes summed up (as the loop's are)
	// fails the same tasks without reading each.
	summed := cloneSnapshot(&w.s)
	summed.SumUpWaiting()
	if got := engine.Pass(summed); !reflect.DeepEqual(d, got) {
		t.Fatalf("pass %d over the summed-up snapshot decided otherwise:\n%+v\n%+v", w.passes, got, d)
	}
	w.apply(t, d)
	w.checkPass(t, before, d)
}

// apply does what the loop does with a pass's decisions: failures leave
// their queue, preemptions go back to it in the old order, then
// placements.
func (w *world) apply(t *rapid.T, d *engine.Decisions) {
	for _, f := range d.Failures {
		q := &w.s.Queues[f.Queue]
		at := -1
		for i := range q.Waiting {
			if q.Waiting[i].ID == f.TaskID {
				at = i
			}
		}
		if at < 0 {
			t.Fatalf("failed %s, which is not waiting in queue %s", f.TaskID, q.Name)
		}
		q.Waiting = append(q.Waiting[:at], q.Waiting[at+1:]...)
	}
	for _, p := range d.Preemptions {
		r := w.release(p.TaskID)
		if r.Queue != p.Queue || r.Pool != p.Pool {
			t.Fatalf("preemption %+v does not match the running task %+v", p, r)
		}
		q := &w.s.Queues[r.Queue]
		task := engine.Task{ID: r.TaskID, Size: w.taskSize[r.TaskID], Seq: r.Seq}
		at := sort.Search(len(q.Waiting), func(i int) bool { return q.Waiting[i].Seq > r.Seq })
		q.Waiting = append(q.Waiting[:at], append([]engine.Task{task}, q.Waiting[at:]...)...)
	}
	for _, p := range d.Placements {
		q := &w.s.Queues[p.Queue]
		at := -1
		for i := range q.Waiting {
			if q.Waiting[i].ID == p.TaskID {
				at = i
			}
		}
		if at < 0 {
			t.Fatalf("placed %s, which is not waiting in queue %s", p.TaskID, q.Name)
		}
		task := q.Waiting[at]
		q.Waiting = append(q.Waiting[:at], q.Waiting[at+1:]...)
		w.s.Running = append(w.s.Running, engine.Placement{TaskID: task.ID, Queue: p.Queue, Pool: p.Pool, Size: task.Size.Total(), Shape: task.Size, PlacedAt: w.s.Now, Seq: task.Seq})
		w.open[task.ID] = len(w.intervals)
		w.intervals = append(w.intervals, interval{task: task.ID, size: task.Size.Total(), start: w.s.Now})
	}
}

// sizeOf parses one of sizeChoices.
func sizeOf(text string) model.Size {
	size, err := model.ParseSize(text)
	if err != nil {
		panic(err)
	}
	return size
}

// cloneSnapshot returns a deep copy of s, keeping nil and empty slices
// apart so that reflect.DeepEqual compares it with s exactly.
func cloneSnapshot(s *engine.Snapshot) *engine.Snapshot {
	c := *s
	c.Pools = cloneSlice(s.Pools)
	for i := range c.Pools {
		c.Pools[i].Profiles = cloneSlice(s.Pools[i].Profiles)
	}
	c.Profiles = cloneSlice(s.Profiles)
	for i := range c.Profiles {
		c.Profiles[i].Pools = cloneSlice(s.Profiles[i].Pools)
		c.Profiles[i].Queues = cloneSlice(s.Profiles[i].Queues)
	}
	c.Groups = cloneSlice(s.Groups)
	for i := range c.Groups {
		if b := s.Groups[i].Budget; b != nil {
			bb := *b
			c.Groups[i].Budget = &bb
		}
	}
	c.Queues = cloneSlice(s.Queues)
	for i := range c.Queues {
		c.Queues[i].Waiting = cloneSlice(s.Queues[i].Waiting)
	}
	c.Running = cloneSlice(s.Running)
	return &c
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
