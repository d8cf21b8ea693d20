package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
)

// Options shape a simulation.
type Options struct {
	// Start is when the virtual clock starts. Zero: the earliest time a
	// workload line gives.
	Start time.Time
	// Until stops the simulation; zero runs until every task has finished
	// or nothing more can change (at most MaxHorizon after the start).
	Until time.Time
	// PassInterval is the time between passes (default 1s). Passes fall on
	// Start + k × PassInterval; when a pass decides nothing and nothing
	// changes, the clock jumps to the pass after the next event (an
	// arrival, a finish, a budget running out, a period reset that may
	// release held work), so long simulations stay fast.
	PassInterval time.Duration

	// everyPass runs every pass on the grid, skipping none (for tests).
	everyPass bool
}

// MaxHorizon bounds a simulation without Until.
const MaxHorizon = 366 * 24 * time.Hour

// Result is what a simulation measured.
type Result struct {
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	PassInterval string    `json:"passInterval"`
	// Passes counts the passes the engine ran.
	Passes  int           `json:"passes"`
	Groups  []GroupResult `json:"groups"`
	Pools   []PoolResult  `json:"pools"`
	RunOuts []RunOut      `json:"budgetRunOuts"`
}

// GroupResult is one group's figures over the run.
type GroupResult struct {
	Group string `json:"group"`
	// Tasks arrived; Finished, Running and Waiting at the end.
	Tasks    int `json:"tasks"`
	Finished int `json:"finished"`
	Running  int `json:"running"`
	Waiting  int `json:"waiting"`
	// Wait from arrival to first placement over the tasks placed at least
	// once (nearest-rank percentiles), in seconds; nil when none was.
	WaitP50 *float64 `json:"waitP50Seconds"`
	WaitP95 *float64 `json:"waitP95Seconds"`
	WaitMax *float64 `json:"waitMaxSeconds"`
	// Preemptions of the group's work, by cause.
	PreemptedReclaim int `json:"preemptedReclaim"`
	PreemptedBudget  int `json:"preemptedBudget"`
	// ReclaimedFor counts the preemptions made to fill this group's
	// reservation.
	ReclaimedFor  int     `json:"reclaimedFor"`
	BudgetRunOuts int     `json:"budgetRunOuts"`
	GPUHours      float64 `json:"gpuHours"`
	// BudgetHours charged during the run (not counting budgetUsed lines);
	// nil for a policy without a time budget.
	BudgetHours *float64 `json:"budgetHours"`
}

// PoolResult is one pool's use over the run.
type PoolResult struct {
	Pool         string  `json:"pool"`
	CapacityGPUs int     `json:"capacityGpus"`
	GPUHours     float64 `json:"gpuHours"`
	// Utilization is GPU-hours over capacity × the run's length, 0 to 1.
	Utilization float64 `json:"utilization"`
	// PeakGPUs is the most held at once.
	PeakGPUs float64 `json:"peakGpus"`
}

// RunOut is a group's budget used up: the first pass that saw it.
type RunOut struct {
	Group  string    `json:"group"`
	At     time.Time `json:"at"`
	Period string    `json:"period"`
	Hours  float64   `json:"budgetHours"`
	// ResetAt is when the period renews.
	ResetAt time.Time `json:"resetAt"`
}

// task is one task of the run.
type task struct {
	engine.TaskState
	arrival   time.Time
	remaining time.Duration
	queue     int
	group     int // policy index
	weight    int64
	placed    bool // placed at least once
	firstAt   time.Time
	finished  bool
}

// run is the state of one simulation.
type run struct {
	m     *engine.Model
	opt   Options
	now   time.Time
	tasks []*task
	// arrivals are the tasks not yet arrived, by arrival time.
	arrivals []*task
	next     int
	// waiting are, per queue, the arrived tasks waiting, in queue order:
	// the snapshot's Waiting slices themselves (a pass never changes
	// them). holding are the tasks holding capacity.
	waiting [][]engine.Task
	holding []*task
	byID    map[string]*task

	budget []policyBudget
	groups []GroupResult
	pools  []PoolResult
	// gpuTime per group and pool in milli-GPU × microseconds.
	groupTime, poolTime []int64
	runOuts             []RunOut
	passes              int
	// heldByBudget is true when the last pass held some head for a budget.
	heldByBudget bool
}

// policyBudget tracks a budgeted policy's use in its current period.
type policyBudget struct {
	on          bool
	period      model.BudgetPeriod
	periodStart time.Time
	// initial is budget used before the start, counted in the start's
	// period; closed is what closed placements charged in this period.
	initial, closed int64
	charged         int64 // charged during the run, all periods
	ranOut          bool  // a run-out was recorded in this period
}

// Run simulates the workload on the estate, which must be valid.
func Run(e *estate.Estate, w *Workload, opt Options) (*Result, error) {
	if opt.PassInterval <= 0 {
		opt.PassInterval = time.Second
	}
	m := engine.NewModel(e)
	r := &run{m: m, opt: opt, byID: map[string]*task{}}
	if err := r.load(w); err != nil {
		return nil, err
	}
	r.loop()
	return r.result(), nil
}

// load resolves the workload against the estate and sets the start.
func (r *run) load(w *Workload) error {
	start := r.opt.Start
	if start.IsZero() {
		for _, a := range w.Arrivals {
			if !a.At.IsZero() && (start.IsZero() || a.At.Before(start)) {
				start = a.At
			}
		}
		if start.IsZero() {
			return fmt.Errorf("every workload line gives at as seconds after the start: give the start (--start)")
		}
	}
	r.opt.Start = start.UTC()
	r.now = r.opt.Start
	if !r.opt.Until.IsZero() && !r.opt.Until.After(r.opt.Start) {
		return fmt.Errorf("until (%s) must be after the start (%s)", r.opt.Until.Format(time.RFC3339), r.opt.Start.Format(time.RFC3339))
	}

	m := r.m
	r.budget = make([]policyBudget, len(m.Policies))
	r.groups = make([]GroupResult, len(m.Policies))
	r.groupTime = make([]int64, len(m.Policies))
	for i, pol := range m.Policies {
		r.groups[i].Group = m.Estate.GroupName(pol.GroupID)
		if b := pol.Budget; b != nil {
			r.budget[i] = policyBudget{on: true, period: b.Period, periodStart: engine.PeriodStart(b.Period, r.opt.Start)}
		}
	}
	r.waiting = make([][]engine.Task, len(m.Queues))
	r.pools = make([]PoolResult, len(m.Pools))
	r.poolTime = make([]int64, len(m.Pools))
	for i, p := range m.Pools {
		r.pools[i] = PoolResult{Pool: p.Name, CapacityGPUs: p.CapacityGPUs}
	}

	policyOf := func(line int, group string) (int, error) {
		g := m.Estate.GroupByName(group)
		if g == nil {
			return 0, fmt.Errorf("workload line %d: group %q is not in the estate", line, group)
		}
		pol := m.Estate.PolicyOfGroup(g.ID)
		if pol == nil {
			return 0, fmt.Errorf("workload line %d: group %q has no resource policy", line, group)
		}
		return m.PolicyIndex[pol.ID], nil
	}
	for _, u := range w.BudgetUsed {
		gi, err := policyOf(u.Line, u.Group)
		if err != nil {
			return err
		}
		if !r.budget[gi].on {
			return fmt.Errorf("workload line %d: group %q has no time budget", u.Line, u.Group)
		}
		r.budget[gi].initial = u.MicroHours
	}

	var seq int64
	for _, a := range w.Arrivals {
		gi, err := policyOf(a.Line, a.Group)
		if err != nil {
			return err
		}
		pol := m.Policies[gi]
		var cr *model.ComputeResource
		var names []string
		for _, c := range m.Estate.ComputeResourcesOfPolicy(pol.ID) {
			names = append(names, fmt.Sprintf("%q", c.Name))
			if c.Name == a.ComputeResource {
				cr = c
			}
		}
		if cr == nil {
			return fmt.Errorf("workload line %d: group %q has no compute resource %q (it has %v)", a.Line, a.Group, a.ComputeResource, names)
		}
		q, ok := m.QueueIndex[cr.ID]
		if !ok {
			return fmt.Errorf("workload line %d: compute resource %q is not usable", a.Line, a.ComputeResource)
		}
		size, err := TaskSize(m.Estate, cr, a.Size)
		if err != nil {
			return fmt.Errorf("workload line %d: %w", a.Line, err)
		}
		at := a.At
		if at.IsZero() {
			at = r.opt.Start.Add(a.Offset)
		}
		if at.Before(r.opt.Start) {
			return fmt.Errorf("workload line %d: at %s is before the start %s", a.Line, at.Format(time.RFC3339), r.opt.Start.Format(time.RFC3339))
		}
		if !r.opt.Until.IsZero() && !at.Before(r.opt.Until) {
			continue // arrives after the simulation
		}
		weight := m.Profiles[m.ProfileIndex[cr.ProfileID]].TimeWeightMilli
		for k := 0; k < a.Count; k++ {
			seq++
			t := &task{TaskState: engine.TaskState{ID: fmt.Sprintf("L%d#%d", a.Line, k+1), ComputeResourceID: cr.ID, Size: size},
				arrival: at, remaining: a.Duration, queue: q, group: gi, weight: weight}
			r.tasks = append(r.tasks, t)
			r.byID[t.ID] = t
			r.groups[gi].Tasks++
		}
	}
	// Queue order is arrival order; lines arriving together keep file order.
	r.arrivals = append([]*task(nil), r.tasks...)
	sort.SliceStable(r.arrivals, func(i, j int) bool { return r.arrivals[i].arrival.Before(r.arrivals[j].arrival) })
	for i, t := range r.arrivals {
		t.Seq = int64(i + 1)
	}
	return nil
}

// loop runs passes on the virtual clock until the end.
func (r *run) loop() {
	horizon := r.opt.Start.Add(MaxHorizon)
	if !r.opt.Until.IsZero() {
		horizon = r.opt.Until
	}
	for {
		r.finishUpTo(r.now)
		r.arriveUpTo(r.now)
		used := r.budgetUsed()
		snap := r.snapshot(used)
		r.noteRunOuts(snap)
		d := engine.Pass(snap)
		r.passes++
		r.apply(d)

		next := r.now.Add(r.opt.PassInterval)
		if len(d.Placements) == 0 && len(d.Preemptions) == 0 && len(d.Failures) == 0 {
			at, ok := r.nextEvent(snap)
			if !ok {
				r.end(r.now)
				return
			}
			if !r.opt.everyPass {
				next = r.gridAtOrAfter(at)
			}
		}
		if next.After(horizon) {
			r.end(horizon)
			return
		}
		r.now = next
	}
}

// gridAtOrAfter is the first pass time at or after t.
func (r *run) gridAtOrAfter(t time.Time) time.Time {
	since := t.Sub(r.opt.Start)
	k := (since + r.opt.PassInterval - 1) / r.opt.PassInterval
	next := r.opt.Start.Add(k * r.opt.PassInterval)
	if !next.After(r.now) {
		next = r.now.Add(r.opt.PassInterval)
	}
	return next
}

// finishUpTo ends the tasks whose run time is over by t, at the exact time.
func (r *run) finishUpTo(t time.Time) {
	keep := r.holding[:0]
	for _, tk := range r.holding {
		end := tk.PlacedAt.Add(tk.remaining)
		if end.After(t) {
			keep = append(keep, tk)
			continue
		}
		r.release(tk, end)
		tk.remaining = 0
		tk.finished = true
	}
	r.holding = keep
}

func (r *run) arriveUpTo(t time.Time) {
	for r.next < len(r.arrivals) && !r.arrivals[r.next].arrival.After(t) {
		t := r.arrivals[r.next]
		r.waiting[t.queue] = append(r.waiting[t.queue], engine.Task{ID: t.ID, Size: t.Size, Seq: t.Seq})
		r.next++
	}
}

// release closes a placement interval at end: GPU time and budget.
func (r *run) release(tk *task, end time.Time) {
	held := end.Sub(tk.PlacedAt)
	mgu := int64(tk.Size.Total()) * held.Microseconds()
	r.groupTime[tk.group] += mgu
	p := r.m.PoolIndex[tk.PoolID]
	r.poolTime[p] += mgu
	if b := &r.budget[tk.group]; b.on && tk.weight > 0 {
		// Tasks finishing together may end in either of two periods: an
		// end before the current period charges nothing to it.
		r.rollPeriod(tk.group, end)
		b.closed += engine.MicroBudgetHours(engine.Overlap(tk.PlacedAt, end, b.periodStart, end), tk.weight)
		b.charged += engine.MicroBudgetHours(held, tk.weight)
	}
	tk.PoolID = ""
}

// rollPeriod moves a budget forward to the period that holds t (never
// back).
func (r *run) rollPeriod(g int, t time.Time) {
	b := &r.budget[g]
	if start := engine.PeriodStart(b.period, t); start.After(b.periodStart) {
		b.periodStart, b.closed, b.initial, b.ranOut = start, 0, 0, false
	}
}

// budgetUsed is each budgeted policy's use in its current period up to
// now, the way the ledger counts it: every placement interval's hours
// inside the period times its weight.
func (r *run) budgetUsed() map[string]int64 {
	used := map[string]int64{}
	for g := range r.budget {
		if r.budget[g].on {
			r.rollPeriod(g, r.now)
			used[r.m.Policies[g].ID] = r.budget[g].initial + r.budget[g].closed
		}
	}
	for _, tk := range r.holding {
		if b := &r.budget[tk.group]; b.on && tk.weight > 0 {
			used[r.m.Policies[tk.group].ID] += engine.MicroBudgetHours(engine.Overlap(tk.PlacedAt, time.Time{}, b.periodStart, r.now), tk.weight)
		}
	}
	return used
}

// noteRunOuts records each group whose budget a pass sees used up, once
// per period.
func (r *run) noteRunOuts(s *engine.Snapshot) {
	for g := range s.Groups {
		b := s.Groups[g].Budget
		if b == nil || b.Remaining() > 0 || r.budget[g].ranOut {
			continue
		}
		r.budget[g].ranOut = true
		r.groups[g].BudgetRunOuts++
		r.runOuts = append(r.runOuts, RunOut{Group: s.Groups[g].Name, At: r.now, Period: string(b.Period),
			Hours: float64(b.Total) / 1e6, ResetAt: b.ResetAt})
	}
}

// snapshot is the pass's view of the run: the estate, the waiting queues
// and the work holding capacity.
func (r *run) snapshot(used map[string]int64) *engine.Snapshot {
	s := r.m.Empty(r.now, used)
	for q := range s.Queues {
		s.Queues[q].Waiting = r.waiting[q]
	}
	s.Running = make([]engine.Placement, 0, len(r.holding))
	for _, tk := range r.holding {
		s.Running = append(s.Running, engine.Placement{TaskID: tk.ID, Queue: tk.queue, Pool: r.m.PoolIndex[tk.PoolID],
			Size: tk.Size.Total(), Shape: tk.Size, PlacedAt: tk.PlacedAt, Seq: tk.Seq})
	}
	return s
}

// apply does what the loop does with a pass's decisions: a preempted task
// goes back to its queue in its old order, keeping the run time it has
// left (as work that checkpoints does); a placed task starts running.
func (r *run) apply(d *engine.Decisions) {
	// A task no pool of its profile (or its group's limit) can hold fails:
	// it leaves its queue and never runs.
	for _, f := range d.Failures {
		w := r.waiting[f.Queue]
		for i := range w {
			if w[i].ID == f.TaskID {
				r.waiting[f.Queue] = append(w[:i:i], w[i+1:]...)
				break
			}
		}
	}
	preempted := map[string]bool{}
	for _, p := range d.Preemptions {
		tk := r.byID[p.TaskID]
		held := r.now.Sub(tk.PlacedAt)
		r.release(tk, r.now)
		tk.remaining -= held
		preempted[tk.ID] = true
		switch p.Cause {
		case engine.CauseReclaim:
			r.groups[tk.group].PreemptedReclaim++
			if p.ForGroup >= 0 {
				r.groups[p.ForGroup].ReclaimedFor++
			}
		case engine.CauseBudgetUsed:
			r.groups[tk.group].PreemptedBudget++
		}
	}
	// A pass places the first tasks of each queue, in order.
	placed := make([]int, len(r.waiting))
	for _, p := range d.Placements {
		if w := r.waiting[p.Queue]; placed[p.Queue] >= len(w) || w[placed[p.Queue]].ID != p.TaskID {
			panic(fmt.Sprintf("the pass placed %s out of queue order", p.TaskID))
		}
		placed[p.Queue]++
		tk := r.byID[p.TaskID]
		tk.PoolID = r.m.Pools[p.Pool].ID
		tk.PlacedAt = r.now
		if !tk.placed {
			tk.placed, tk.firstAt = true, r.now
		}
		r.holding = append(r.holding, tk)
	}
	for q, n := range placed {
		r.waiting[q] = r.waiting[q][n:]
	}
	if len(preempted) > 0 {
		keep := r.holding[:0]
		for _, tk := range r.holding {
			if !preempted[tk.ID] {
				keep = append(keep, tk)
			}
		}
		r.holding = keep
		for _, p := range d.Preemptions {
			tk := r.byID[p.TaskID]
			w := r.waiting[tk.queue]
			at := sort.Search(len(w), func(i int) bool { return w[i].Seq > tk.Seq })
			r.waiting[tk.queue] = append(w[:at:at], append([]engine.Task{{ID: tk.ID, Size: tk.Size, Seq: tk.Seq}}, w[at:]...)...)
		}
	}
	if len(d.Placements) > 0 {
		r.notePeaks()
	}
	r.heldByBudget = false
	for _, b := range d.Blocked {
		if b.Constraint == engine.HeldByBudgetUsed || b.Constraint == engine.HeldByLowWatermark {
			r.heldByBudget = true
		}
	}
}

func (r *run) notePeaks() {
	held := make([]model.MilliGPU, len(r.pools))
	for _, tk := range r.holding {
		held[r.m.PoolIndex[tk.PoolID]] += tk.Size.Total()
	}
	for p := range r.pools {
		r.pools[p].PeakGPUs = math.Max(r.pools[p].PeakGPUs, held[p].Float())
	}
}

// nextEvent is the earliest time after now at which a pass could decide
// something new: an arrival, a finish, a budget running out at its current
// burn rate, or, when a budget holds work, the period reset.
func (r *run) nextEvent(s *engine.Snapshot) (time.Time, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if t.After(r.now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	if r.next < len(r.arrivals) {
		consider(r.arrivals[r.next].arrival)
	}
	for _, tk := range r.holding {
		consider(tk.PlacedAt.Add(tk.remaining))
	}
	rate := make([]int64, len(s.Groups))
	open := make([]int64, len(s.Groups))
	for _, tk := range r.holding {
		if tk.weight > 0 {
			rate[tk.group] += tk.weight
			open[tk.group]++
		}
	}
	for g := range s.Groups {
		b := s.Groups[g].Budget
		if b == nil {
			continue
		}
		if rem := b.Remaining(); rem > 0 && rate[g] > 0 {
			// rem µh last rem/1e6 / (rate/1000) hours = rem × 3.6e9 / rate
			// ns. Each open interval's charge is rounded down to the µh, so
			// the true remainder may be up to one µh per interval less.
			// Rounded down too: a pass a little early decides nothing and
			// looks again, where one late would miss the run-out.
			// Within that margin, the next pass looks.
			consider(r.now.Add(max(time.Duration(math.Floor(float64(rem-open[g])*3.6e9/float64(rate[g]))), time.Nanosecond)))
		}
		if r.heldByBudget {
			consider(b.ResetAt)
		}
	}
	return best, !best.IsZero()
}

// end closes the run at t: running work is counted up to t.
func (r *run) end(t time.Time) {
	r.now = t
	r.finishUpTo(t)
	for _, tk := range r.holding {
		held := t.Sub(tk.PlacedAt)
		mgu := int64(tk.Size.Total()) * held.Microseconds()
		r.groupTime[tk.group] += mgu
		r.poolTime[r.m.PoolIndex[tk.PoolID]] += mgu
		if b := &r.budget[tk.group]; b.on && tk.weight > 0 {
			b.charged += engine.MicroBudgetHours(held, tk.weight)
		}
	}
}

func (r *run) result() *Result {
	const perHour = 3_600_000_000 * 1000 // mGPU·µs in one GPU-hour
	res := &Result{Start: r.opt.Start, End: r.now, PassInterval: r.opt.PassInterval.String(), Passes: r.passes, RunOuts: r.runOuts}
	if res.RunOuts == nil {
		res.RunOuts = []RunOut{}
	}
	waits := make([][]time.Duration, len(r.groups))
	for _, tk := range r.tasks {
		g := &r.groups[tk.group]
		switch {
		case tk.finished:
			g.Finished++
		case tk.PoolID != "":
			g.Running++
		case tk.arrival.Before(r.now) || tk.arrival.Equal(r.now):
			g.Waiting++
		}
		if tk.placed {
			waits[tk.group] = append(waits[tk.group], tk.firstAt.Sub(tk.arrival))
		}
	}
	for i := range r.groups {
		g := &r.groups[i]
		g.WaitP50, g.WaitP95, g.WaitMax = percentile(waits[i], 50), percentile(waits[i], 95), percentile(waits[i], 100)
		g.GPUHours = round2(float64(r.groupTime[i]) / perHour)
		if r.budget[i].on {
			h := round2(float64(r.budget[i].charged) / 1e6)
			g.BudgetHours = &h
		}
	}
	length := r.now.Sub(r.opt.Start).Hours()
	for p := range r.pools {
		pr := &r.pools[p]
		pr.GPUHours = round2(float64(r.poolTime[p]) / perHour)
		if pr.CapacityGPUs > 0 && length > 0 {
			pr.Utilization = math.Round(float64(r.poolTime[p])/perHour/(float64(pr.CapacityGPUs)*length)*1e4) / 1e4
		}
	}
	res.Groups, res.Pools = r.groups, r.pools
	return res
}

// percentile is the nearest-rank percentile in seconds, nil for no values.
func percentile(ds []time.Duration, p int) *float64 {
	if len(ds) == 0 {
		return nil
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := (p*len(s) + 99) / 100
	v := s[max(k, 1)-1].Seconds()
	return &v
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
