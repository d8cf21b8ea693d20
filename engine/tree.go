package engine

import (
	"github.com/klique-ai/klique/internal/model"
)

// The organisation tree (docs/engine.md, "The organisation tree"). Groups
// form a tree under the tenant: departments (Group.Department) above teams,
// each node with its own reservation, limit, time budget and weight. A
// flat estate is the tree of depth one, every group directly under the
// tenant, and the rules below then reduce to the rules of a flat pass
// exactly.
//
// The pass reads the tree through paths: for every node, the node itself
// and its ancestors up to the top, bottom up, precomputed once in newState
// as slices of one array. Whatever the pass checks of a node it checks
// along the path, in a loop over a few int32s with no allocation.

// tree is the organisation tree as the pass reads it.
type tree struct {
	// path[at[g]:at[g+1]] is g's path: g, its parent, ..., its top-level
	// ancestor.
	path []int32
	at   []int32
	// nested: some node has a parent (the estate is not flat).
	nested bool
	// depth is the length of the longest path (1 in a flat estate).
	depth int
	// fair: some node's weight differs from a sibling's, so that lending
	// among siblings is shared by weight (lendFair).
	fair bool
}

// newTree lays out the groups' tree. A parent out of range, or one that
// would close a cycle, is read as the tenant: the pass never loops, and a
// malformed snapshot decides as if the node were at the top.
func newTree(groups []Group) tree {
	n := len(groups)
	parent := make([]int32, n)
	for g := range groups {
		parent[g] = -1
		if p, ok := groups[g].ParentIndex(); ok && p >= 0 && p < n && p != g {
			parent[g] = int32(p)
		}
	}
	// Break cycles: walking up from any node must reach the top within n
	// steps; the node where a walk exceeds it is cut from its parent.
	for g := range parent {
		steps := 0
		for a := int32(g); parent[a] >= 0; a = parent[a] {
			if steps++; steps > n {
				parent[a] = -1
				break
			}
		}
	}
	t := tree{at: make([]int32, n+1)}
	t.path = make([]int32, 0, n)
	for g := range groups {
		t.at[g] = int32(len(t.path))
		for a := int32(g); a >= 0; a = parent[a] {
			t.path = append(t.path, a)
		}
		if parent[g] >= 0 {
			t.nested = true
		}
	}
	t.at[n] = int32(len(t.path))
	t.depth = 1
	for g := 0; g < n; g++ {
		t.depth = max(t.depth, int(t.at[g+1]-t.at[g]))
	}
	// Siblings under the tenant are the top-level nodes; index n stands
	// for the tenant.
	first := make([]int64, n+1)
	for g := range groups {
		p := int(parent[g])
		if p < 0 {
			p = n
		}
		w := weightOf(&groups[g])
		if first[p] == 0 {
			first[p] = w
		} else if first[p] != w {
			t.fair = true
		}
	}
	return t
}

// weightOf is a node's weight among its siblings: 0 counts as 1.
func weightOf(g *Group) int64 {
	if g.Weight <= 0 {
		return 1
	}
	return g.Weight
}

// pathOf is g's path, g first.
func (st *state) pathOf(g int) []int32 { return st.tree.path[st.tree.at[g]:st.tree.at[g+1]] }

// within reports whether node a is on g's path (g itself or an ancestor).
func (st *state) within(g, a int) bool {
	for _, n := range st.pathOf(g) {
		if int(n) == a {
			return true
		}
	}
	return false
}

// level writes "group ml" or "department Research": the node's level of
// the tree and its name, the way every sentence names it.
func (st *state) level(n int) string {
	if st.s.Groups[n].Department {
		return "department " + st.s.Groups[n].Name
	}
	return "group " + st.s.Groups[n].Name
}

// levelWord is "department " or "group ", for sentences built of parts.
func (st *state) levelWord(n int) string {
	if st.s.Groups[n].Department {
		return "department "
	}
	return "group "
}

// pausedAt is the highest node on g's path whose limit is 0 (it pauses
// its whole subtree), or -1.
func (st *state) pausedAt(g int) int {
	at := -1
	for _, n := range st.pathOf(g) {
		if st.s.Groups[n].Limit == 0 {
			at = int(n)
		}
	}
	return at
}

// overLimitAt is the highest node on g's path that a task of size would
// take above its limit, or -1 when it fits at every level.
func (st *state) overLimitAt(g int, size model.MilliGPU) int {
	at := -1
	for _, n := range st.pathOf(g) {
		if st.groupUse[n]+size > st.s.Groups[n].Limit {
			at = int(n)
		}
	}
	return at
}

// withinLimits reports whether a task of size keeps every level of g's
// path within its limit, none of them paused (a limit of 0 pauses the
// node's subtree).
func (st *state) withinLimits(g int, size model.MilliGPU) bool {
	for _, n := range st.pathOf(g) {
		if lim := st.s.Groups[n].Limit; lim == 0 || st.groupUse[n]+size > lim {
			return false
		}
	}
	return true
}

// tightestLimit is the node on g's path with the smallest limit (the
// lowest among equals): g's effective limit.
func (st *state) tightestLimit(g int) int {
	best := g
	for _, n := range st.pathOf(g) {
		if st.s.Groups[n].Limit < st.s.Groups[best].Limit {
			best = int(n)
		}
	}
	return best
}

// guaranteedAt is the lowest node on g's path whose reservation guarantees
// a new task of size, at most upTo levels above g, or -1. The team guarantees it when it stays within
// its own reservation; a department above it when the department's
// reservation still has room for it after what the department promised
// its other children: each child on another branch is promised what it
// has not yet used of its own reservation. So a department's unsplit
// reserve goes first to its own teams, and a team's reservation stays its
// own.
func (st *state) guaranteedAt(g int, size model.MilliGPU, upTo int) int {
	path := st.pathOf(g)
	if st.groupUse[g]+size <= st.s.Groups[g].Reservation {
		return g
	}
	for k := 1; k < len(path) && k <= upTo; k++ {
		a, branch := int(path[k]), int(path[k-1])
		// What a promised its other children: all it promised, less the
		// branch's own promise.
		others := st.promised[a] - st.unused(branch)
		if st.groupUse[a]+size+others <= st.s.Groups[a].Reservation {
			return a
		}
	}
	return -1
}

// levelIs reports whether node n is k levels above g on g's path.
func (st *state) levelIs(g, n, k int) bool {
	path := st.pathOf(g)
	return k < len(path) && int(path[k]) == n
}

// withinSomeReservation reports whether a task of size keeps some node on
// g's path within its reservation, promises aside: such a placement is not
// borrowed (Place.Borrowed).
func (st *state) withinSomeReservation(g int, size model.MilliGPU) bool {
	for _, n := range st.pathOf(g) {
		if st.groupUse[n]+size <= st.s.Groups[n].Reservation {
			return true
		}
	}
	return false
}

// withinDepartment reports whether a task of size keeps some department
// above g within its reservation: the lend stage that lends a department's
// idle reserve to its own teams before the rest of the tenant.
func (st *state) withinDepartment(g int, size model.MilliGPU) bool {
	path := st.pathOf(g)
	for _, n := range path[1:] {
		if st.groupUse[n]+size <= st.s.Groups[n].Reservation {
			return true
		}
	}
	return false
}

// unused is what node n has not used of its own reservation: what its
// parent promises it.
func (st *state) unused(n int) model.MilliGPU {
	return max(0, st.s.Groups[n].Reservation-st.groupUse[n])
}

// addUse adds size to the use, and w to the budget rate, of every node on
// g's path (size is negative to take it away), keeping each parent's
// promised up to date.
func (st *state) addUse(g int, size model.MilliGPU, w int64) {
	path := st.pathOf(g)
	for k, n := range path {
		before := st.unused(int(n))
		st.groupUse[n] += size
		if k+1 < len(path) {
			st.promised[path[k+1]] += st.unused(int(n)) - before
		}
		if w > 0 {
			st.groupRate[n] += w
			st.groupBudgeted[n]++
		}
	}
}

// removeUse undoes addUse.
func (st *state) removeUse(g int, size model.MilliGPU, w int64) {
	path := st.pathOf(g)
	for k, n := range path {
		before := st.unused(int(n))
		st.groupUse[n] -= size
		if k+1 < len(path) {
			st.promised[path[k+1]] += st.unused(int(n)) - before
		}
		if w > 0 {
			st.groupRate[n] -= w
			st.groupBudgeted[n]--
		}
	}
}

// fairBefore reports whether queue q1 goes before queue q2 when they
// compete for the same idle GPUs in a lend step of an estate with weights
// (tree.fair): from the top of the tree down, the first level where their
// paths differ gives the next GPU to the node using the least per unit of
// weight (Kueue's fair sharing); where those are equal, the next level
// down decides, and at the end the queuing priority (q1 comes first in it
// when earlier is set).
func (st *state) fairBefore(q1, q2 int, earlier bool) bool {
	p1 := st.pathOf(st.s.Queues[q1].Group)
	p2 := st.pathOf(st.s.Queues[q2].Group)
	i, j := len(p1)-1, len(p2)-1
	for ; i >= 0 && j >= 0; i, j = i-1, j-1 {
		a, b := int(p1[i]), int(p2[j])
		if a == b {
			continue
		}
		ua := int64(st.groupUse[a]) * weightOf(&st.s.Groups[b])
		ub := int64(st.groupUse[b]) * weightOf(&st.s.Groups[a])
		if ua != ub {
			return ua < ub
		}
	}
	return earlier
}
