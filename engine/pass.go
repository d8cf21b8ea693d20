package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// Pass decides one pass over s. It does not change s.
func Pass(s *Snapshot) *Decisions {
	return newState(s).pass()
}

// PassReusing is Pass for a loop that keeps each pass's Reasons and gives
// them to the next (nil at first): a why-waiting sentence whose parts are
// the same as the one kept for its queue is not written again but shared.
// The decisions are those of Pass(s), sentence for sentence. It changes
// neither s nor prev.
func PassReusing(s *Snapshot, prev *Reasons) (*Decisions, *Reasons) {
	st := newState(s)
	st.prev = prev
	st.out = &Reasons{byQueue: make([]reasonEntry, len(s.Queues))}
	return st.pass(), st.out
}

func (st *state) pass() *Decisions {
	st.enforceBudgets()
	st.expireClaims()
	st.enforceCapacity()
	st.enforceLimits()
	// Reservations bottom up: a team's own first, then what a department
	// one level up guarantees, and so on (one round in a flat estate), so
	// that no team's guarantee waits behind a department's shared one.
	for st.upTo = 0; st.upTo < st.tree.depth; st.upTo++ {
		st.walk(PhaseReservation, false)
	}
	for st.upTo = 0; st.upTo < st.tree.depth; st.upTo++ {
		// In a tree, a sweep that placed something goes again: a claim
		// may free more than it needs (a 1-GPU task for an eighth), and
		// what is left serves claimants earlier in the order before the
		// lend step can give it away. (A flat estate keeps its one sweep,
		// and its decisions as they were.)
		for st.reclaim() && st.tree.nested {
		}
	}
	if st.tree.nested {
		// A department's idle reserve goes to its own teams first.
		st.walk(PhaseLend, true)
	}
	st.walk(PhaseLend, false)
	st.explain()
	return &st.dec
}

// state is the working state of one pass: capacity used per pool, GPUs held
// and budget burn rate per group, how far each queue has been placed.
type state struct {
	s *Snapshot
	// tree is the organisation tree's paths (tree.go).
	tree tree
	// upTo is how many levels above a team the reservation phase and
	// reclaim may find its guarantee at, in the current round.
	upTo int

	poolUsed []model.MilliGPU
	// groupUse is, per node of the tree, the GPUs its subtree holds (a
	// team's own, a department's teams'), groupRate the burn rate of that
	// work's budgeted part, in thousandths of a budget hour per hour, and
	// groupBudgeted counts that work.
	groupUse []model.MilliGPU
	// promised is, per department, what it promises its children: the
	// sum of what each has not used of its own reservation (tree.go).
	promised      []model.MilliGPU
	groupRate     []int64
	groupBudgeted []int
	// waiting is, per queue, the tasks of Waiting the pass may place: all
	// of them but those it fails as unplaceable (it shares Waiting when it
	// fails none).
	waiting [][]Task
	// next is, per queue, the index in waiting of the first task not placed.
	next []int
	// headSize is, per queue, the size of the task the pass would place
	// next (waiting[q][next[q]]), or noHead when it places none (nothing
	// left, or requeued). The walks reject most queues on it alone, without
	// reading the task.
	headSize []model.MilliGPU
	// requeued is, per queue, the placement this pass preempted from it
	// with the lowest queue order, or -1. That task is now the head of its
	// queue (it goes back in its old order) and the pass does not place it
	// again, so nothing behind it is placed either.
	requeued []int
	// placements are the running work, with alive false once preempted,
	// in the snapshot's order. What this pass places is only in its
	// decisions: the same pass never preempts it, nor counts it as a
	// victim.
	placements []live
	// byRank[r][p] lists the profiles whose r-th pool is pool p, in p's
	// execution priority.
	byRank [][][]int
	// victims[p] lists placements on pool p, newest first once
	// victimsSorted[p]; built on first use by reclaim.
	victims       [][]int
	victimsSorted []bool
	// chosen, touched and lowered are chooseVictims' scratch space.
	chosen  []int
	touched []int
	lowered []model.MilliGPU
	// unattended[p]: no work waits on pool p for want of a worker
	// (workers.go).
	unattended []bool

	// prev are the previous pass's reasons, if kept; out are this pass's,
	// if asked for (PassReusing). sentence is the writer of why-waiting
	// sentences, reused for each (sentence.go).
	prev     *Reasons
	out      *Reasons
	sentence sentence
	// heldAt is the node of the tree that why found holding a head (for
	// the budget's reset).
	heldAt int

	dec Decisions
}

// live is a running placement as the pass tracks it: what deciding needs,
// held small and without pointers (a pass tracks every running task; a
// slice of them the collector never scans is cheap to build). The rest is
// in the snapshot's Running at the same index.
type live struct {
	Queue  int32
	Pool   int32
	group  int32
	Size   model.MilliGPU
	Seq    int64
	weight int64
	alive  bool
}

// running is the snapshot's placement behind st.placements[i].
func (st *state) running(i int) *Placement { return &st.s.Running[i] }

// taskID is the task of st.placements[i].
func (st *state) taskID(i int) string { return st.s.Running[i].TaskID }

// placedAt is when st.placements[i] was placed.
func (st *state) placedAt(i int) time.Time { return st.s.Running[i].PlacedAt }

func newState(s *Snapshot) *state {
	st := &state{
		s:             s,
		poolUsed:      make([]model.MilliGPU, len(s.Pools)),
		groupUse:      make([]model.MilliGPU, len(s.Groups)),
		groupRate:     make([]int64, len(s.Groups)),
		groupBudgeted: make([]int, len(s.Groups)),
		next:          make([]int, len(s.Queues)),
		waiting:       make([][]Task, len(s.Queues)),
		requeued:      make([]int, len(s.Queues)),
		placements:    make([]live, 0, len(s.Running)),
	}
	for q := range st.requeued {
		st.requeued[q] = -1
	}
	st.tree = newTree(s.Groups)
	st.promised = make([]model.MilliGPU, len(s.Groups))
	for g := range s.Groups {
		if path := st.pathOf(g); len(path) > 1 {
			st.promised[path[1]] += max(0, s.Groups[g].Reservation)
		}
	}
	st.unattended = make([]bool, len(s.Pools))
	for p := range s.Pools {
		st.unattended[p] = s.Pools[p].unattended(s.Now)
	}
	st.failUnplaceable()
	st.headSize = make([]model.MilliGPU, len(s.Queues))
	for q := range st.headSize {
		st.setHead(q)
	}
	for i := range s.Running {
		r := &s.Running[i]
		q := &s.Queues[r.Queue]
		w := s.Profiles[q.Profile].WeightMilli
		st.placements = append(st.placements, live{Queue: int32(r.Queue), Pool: int32(r.Pool), Size: r.Size, Seq: r.Seq, group: int32(q.Group), weight: w, alive: true})
		st.poolUsed[r.Pool] += r.Size
		st.addUse(q.Group, r.Size, w)
	}
	maxRank := 0
	for _, pr := range s.Profiles {
		maxRank = max(maxRank, len(pr.Pools))
	}
	st.byRank = make([][][]int, maxRank)
	for r := range st.byRank {
		st.byRank[r] = make([][]int, len(s.Pools))
	}
	for p, pool := range s.Pools {
		for _, pr := range pool.Profiles {
			for r, linked := range s.Profiles[pr].Pools {
				if linked == p {
					st.byRank[r][p] = append(st.byRank[r][p], pr)
				}
			}
		}
	}
	return st
}

// noHead is the headSize of a queue the pass places nothing more of.
const noHead = model.MilliGPU(math.MaxInt64)

// setHead sets the headSize of queue q from next and requeued.
func (st *state) setHead(q int) {
	st.headSize[q] = noHead
	if st.requeued[q] < 0 && st.next[q] < len(st.waiting[q]) {
		st.headSize[q] = st.waiting[q][st.next[q]].Size.Total()
	}
}

// walk places work in priority order: at each pool rank (first pools, then
// second pools, ...), every pool, its profiles in execution priority, each
// profile's queues in queuing priority, each queue's tasks in order. In
// the lend phase of an estate with weights, the queues of a profile share
// the pool by weight instead (lendFair). inDepartment is the lend stage
// that lends only within departments' reservations.
func (st *state) walk(phase Phase, inDepartment bool) {
	fair := phase == PhaseLend && st.tree.fair
	for r := range st.byRank {
		for p := range st.s.Pools {
			for _, pr := range st.byRank[r][p] {
				if fair {
					st.lendFair(pr, p, inDepartment)
					continue
				}
				for _, q := range st.s.Profiles[pr].Queues {
					// fill would stop at once: the head does not fit.
					if st.headSize[q] > st.s.Pools[p].Capacity-st.poolUsed[p] {
						continue
					}
					st.fill(q, p, phase, inDepartment)
				}
			}
		}
	}
}

// lendFair lends pool p to the queues of profile pr one task at a time,
// each to the queue whose tree path uses the least per unit of weight
// (fairBefore), until no head fits.
func (st *state) lendFair(pr, p int, inDepartment bool) {
	queues := st.s.Profiles[pr].Queues
	for {
		best := -1
		for _, q := range queues {
			if st.headSize[q] > st.s.Pools[p].Capacity-st.poolUsed[p] || !st.fits(q, p, PhaseLend, inDepartment, true) {
				continue
			}
			if best < 0 || st.fairBefore(q, best, false) {
				best = q
			}
		}
		if best < 0 {
			return
		}
		st.place(best, p, PhaseLend)
	}
}

// fill places the queue's tasks on pool p while they fit, stopping at the
// first that does not: the head of a queue blocks the tasks behind it.
func (st *state) fill(q, p int, phase Phase, inDepartment bool) {
	for st.fits(q, p, phase, inDepartment, false) {
		st.place(q, p, phase)
	}
}

// fits reports whether the head of queue q can be placed on pool p in
// phase. At every level of the tree, from the team up, the task must keep
// the node within its limit (none paused); in the reservation phase some
// level must guarantee it (guaranteedAt); in the department lend stage,
// some department above the team must have room in its reservation.
// checkHead asks it to check the head's size against the pool first (the
// walk did already for fill).
func (st *state) fits(q, p int, phase Phase, inDepartment, checkHead bool) bool {
	if st.requeued[q] >= 0 || st.next[q] >= len(st.waiting[q]) {
		return false
	}
	queue := &st.s.Queues[q]
	g := queue.Group
	t := &st.waiting[q][st.next[q]]
	size := t.Size.Total()
	pool := &st.s.Pools[p]
	if !pool.Kind.CanRun(t.Size) || st.unattended[p] || st.poolUsed[p]+size > pool.Capacity {
		return false
	}
	groups := st.s.Groups
	if !st.withinLimits(g, size) {
		return false
	}
	if phase == PhaseReservation && st.groupUse[g]+size > groups[g].Reservation &&
		(st.upTo == 0 || st.guaranteedAt(g, size, st.upTo) < 0) {
		return false
	}
	if inDepartment && !st.withinDepartment(g, size) {
		return false
	}
	if w := st.s.Profiles[queue.Profile].WeightMilli; w > 0 {
		return st.budgetAllows(g, w)
	}
	return true
}

// reclaim gives groups below their reservation the capacity borrowed by
// groups above theirs, for waiting work that fits within the reservation.
// It reports whether it placed anything.
func (st *state) reclaim() bool {
	if len(st.byRank) == 0 {
		return false
	}
	placed := false
	// Claimants in priority order: a queue appears once at rank 0.
	for p := range st.s.Pools {
		for _, pr := range st.byRank[0][p] {
			for _, q := range st.s.Profiles[pr].Queues {
				for st.reclaimFor(q) {
					placed = true
				}
			}
		}
	}
	return placed
}

// reclaimFor tries to place the head of queue q within its group's
// reservation, preempting borrowed work if it must. It reports whether it
// placed the head.
func (st *state) reclaimFor(q int) bool {
	size := st.headSize[q]
	if size == noHead {
		return false
	}
	queue := &st.s.Queues[q]
	g := queue.Group
	// by is the level whose reservation guarantees the head; a claim
	// guaranteed lower down was made in an earlier round.
	by := st.guaranteedAt(g, size, st.upTo)
	if by < 0 || (st.upTo > 0 && !st.levelIs(g, by, st.upTo)) || !st.withinLimits(g, size) ||
		!st.budgetAllows(g, st.s.Profiles[queue.Profile].WeightMilli) {
		return false
	}
	t := &st.waiting[q][st.next[q]]
	pools := st.s.Profiles[queue.Profile].Pools
	// Capacity an earlier reclaim freed beyond its need goes first: no
	// preemption is needed for it.
	for _, p := range pools {
		if st.s.Pools[p].Kind.CanRun(t.Size) && !st.unattended[p] && st.poolUsed[p]+size <= st.s.Pools[p].Capacity {
			st.place(q, p, PhaseReservation)
			return true
		}
	}
	for _, p := range pools {
		capacity := st.s.Pools[p].Capacity
		if size > capacity || !st.s.Pools[p].Kind.CanRun(t.Size) || st.unattended[p] {
			continue
		}
		var victims []int
		if st.tree.nested {
			victims = st.chooseVictimsInTree(p, size-(capacity-st.poolUsed[p]), g, by)
		} else {
			victims = st.chooseVictims(p, size-(capacity-st.poolUsed[p]))
		}
		if victims == nil {
			continue
		}
		reason := fmt.Sprintf("reclaimed by group %s: its reservation is guaranteed", st.s.Groups[g].Name)
		if by != g {
			reason = fmt.Sprintf("reclaimed for %s's reservation, by its group %s: the department's reservation is guaranteed", st.level(by), st.s.Groups[g].Name)
		}
		for _, i := range victims {
			st.preempt(i, CauseReclaim, g, reason)
		}
		st.place(q, p, PhaseReclaim)
		return true
	}
	return false
}

// chooseVictims picks work on pool p to preempt so that need more GPUs are
// free: newest placed first, only from groups above their reservation and
// never taking a group below it. It returns nil when not enough can be
// freed, so that nothing is preempted for a task that would still not fit.
func (st *state) chooseVictims(p int, need model.MilliGPU) []int {
	st.sortVictims(p)
	// chosen, touched and lowered reuse the pass's scratch space: the
	// caller is done with the last choice before it asks again.
	chosen := st.chosen[:0]
	var freed model.MilliGPU
	// Tentative use per group, for the groups touched so far.
	touched, lowered := st.touched[:0], st.lowered[:0]
	defer func() { st.chosen, st.touched, st.lowered = chosen[:0], touched[:0], lowered[:0] }()
	useOf := func(g int) model.MilliGPU {
		for k, tg := range touched {
			if tg == g {
				return lowered[k]
			}
		}
		return st.groupUse[g]
	}
	lower := func(g int, by model.MilliGPU) {
		for k, tg := range touched {
			if tg == g {
				lowered[k] -= by
				return
			}
		}
		touched = append(touched, g)
		lowered = append(lowered, st.groupUse[g]-by)
	}
	for _, i := range st.victims[p] {
		v := &st.placements[i]
		if !v.alive {
			continue
		}
		res := st.s.Groups[v.group].Reservation
		if use := useOf(int(v.group)); use <= res || use-v.Size < res {
			continue
		}
		chosen = append(chosen, i)
		lower(int(v.group), v.Size)
		freed += v.Size
		if freed >= need {
			return chosen
		}
	}
	return st.fitVictims(p, need, -1, -1)
}

// sortVictims makes st.victims[p] the placements on pool p, newest first.
func (st *state) sortVictims(p int) {
	if st.victims == nil {
		// One walk over the placements buckets them by pool; each pool's
		// list is sorted when reclaim first looks at it.
		// The lists share one array, cut by a count per pool.
		st.victims = make([][]int, len(st.s.Pools))
		st.victimsSorted = make([]bool, len(st.s.Pools))
		end := make([]int, len(st.s.Pools))
		for i := range st.placements {
			end[st.placements[i].Pool]++
		}
		all := make([]int, len(st.placements))
		at := 0
		for p := range end {
			st.victims[p] = all[at : at : at+end[p]]
			at += end[p]
		}
		for i := range st.placements {
			st.victims[st.placements[i].Pool] = append(st.victims[st.placements[i].Pool], i)
		}
	}
	if !st.victimsSorted[p] {
		st.sortNewestFirst(st.victims[p])
		st.victimsSorted[p] = true
	}
}

// fitVictims is what chooseVictims falls back on when taking work newest
// first does not free enough: a newer small task can use up the room above
// its group's reservation that an older, larger one needed (a group 16 GPUs
// above its reservation, holding a 16-GPU task and a newer 1-GPU task, gives
// back only the 1 newest first, where the 16 alone would do). Groups give
// back independently of each other, so enough can be freed exactly when the
// most each group can give without going below its reservation adds up to
// need. A group's most is a subset sum over its work on the pool, built
// newest first so that newer work is preferred; the union is then trimmed,
// oldest first, of tasks not needed to free need. It returns nil when not
// enough can be freed.
//
// In a tree (claimant and by set: the claimant's group and the level that
// guarantees it), a group's most is bounded by the smallest surplus over
// the levels of its path the claimant does not share (surplus), and the
// choice is kept only if, taken together, it leaves every such level at
// or above its reservation: teams of one department share the
// department's surplus.
func (st *state) fitVictims(p int, need model.MilliGPU, claimant, by int) []int {
	var groups []int
	of := make(map[int][]int)
	unit := model.MilliGPU(0)
	for _, i := range st.victims[p] {
		v := &st.placements[i]
		if !v.alive || st.surplus(int(v.group), claimant, by) <= 0 {
			continue
		}
		if _, seen := of[int(v.group)]; !seen {
			groups = append(groups, int(v.group))
		}
		of[int(v.group)] = append(of[int(v.group)], i)
		unit = gcd(unit, v.Size)
	}
	if unit == 0 {
		return nil
	}
	needUnits := int((need + unit - 1) / unit)
	var chosen []int
	var freed model.MilliGPU
	for _, g := range groups {
		list := of[g]
		largest := 0
		for _, i := range list {
			largest = max(largest, int(st.placements[i].Size/unit))
		}
		// A smallest set that frees need is under need plus one task, so
		// sums beyond that bound are never needed.
		bound := min(int(st.surplus(g, claimant, by)/unit), needUnits+largest-1)
		// from[v] is the task that first reached sum v (-1: not reached).
		from := make([]int, bound+1)
		for v := range from {
			from[v] = -1
		}
		from[0] = len(st.placements)
		best := 0
		for _, i := range list {
			size := int(st.placements[i].Size / unit)
			for v := bound; v >= size; v-- {
				if from[v] < 0 && from[v-size] >= 0 {
					from[v] = i
					best = max(best, v)
				}
			}
		}
		for v := best; v > 0; v -= int(st.placements[from[v]].Size / unit) {
			chosen = append(chosen, from[v])
			freed += st.placements[from[v]].Size
		}
	}
	if freed < need {
		return nil
	}
	st.sortNewestFirst(chosen)
	keep := chosen[:0]
	for k := len(chosen) - 1; k >= 0; k-- {
		if size := st.placements[chosen[k]].Size; freed-size >= need {
			freed -= size
			chosen[k] = -1
		}
	}
	for _, i := range chosen {
		if i >= 0 {
			keep = append(keep, i)
		}
	}
	if claimant >= 0 && !st.keepsReservations(keep, claimant) {
		return nil
	}
	return keep
}

func gcd(a, b model.MilliGPU) model.MilliGPU {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (st *state) place(q, p int, phase Phase) {
	queue := &st.s.Queues[q]
	t := &st.waiting[q][st.next[q]]
	st.next[q]++
	st.setHead(q)
	g := queue.Group
	size := t.Size.Total()
	w := st.s.Profiles[queue.Profile].WeightMilli
	borrowed := !st.withinSomeReservation(g, size)
	st.poolUsed[p] += size
	st.addUse(g, size, w)
	st.dec.Placements = append(doubled(st.dec.Placements), Place{TaskID: t.ID, Queue: q, Pool: p, Phase: phase, Borrowed: borrowed})
}

// doubled returns d with room for one more, doubling it when full where
// append grows a large slice by a quarter: a pass that places a hundred
// thousand tasks copies its decisions about twice, not five times, and
// they hold strings the collector must scan as they are copied.
func doubled[T any](d []T) []T {
	if n := len(d); n == cap(d) {
		return slices.Grow(d, max(n, 256))
	}
	return d
}

func (st *state) preempt(i int, cause Cause, forGroup int, reason string) {
	v := &st.placements[i]
	v.alive = false
	if r := st.requeued[v.Queue]; r < 0 || v.Seq < st.placements[r].Seq {
		st.requeued[v.Queue] = i
		st.headSize[v.Queue] = noHead
	}
	st.poolUsed[v.Pool] -= v.Size
	st.removeUse(int(v.group), v.Size, v.weight)
	st.dec.Preemptions = append(doubled(st.dec.Preemptions), Preemption{TaskID: st.taskID(i), Queue: int(v.Queue), Pool: int(v.Pool), Cause: cause, ForGroup: forGroup, Reason: reason})
}

// sortNewestFirst orders placement indices by placement time, newest first,
// then by queue order, latest first: the order preemption takes them in.
func (st *state) sortNewestFirst(idx []int) {
	slices.SortStableFunc(idx, func(i, j int) int {
		if c := st.placedAt(j).Compare(st.placedAt(i)); c != 0 {
			return c
		}
		if c := cmp.Compare(st.placements[j].Seq, st.placements[i].Seq); c != 0 {
			return c
		}
		return strings.Compare(st.taskID(j), st.taskID(i))
	})
}
