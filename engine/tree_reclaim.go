package engine

import (
	"github.com/klique-ai/klique/internal/model"
)

// Reclaim in the organisation tree. A team below its guarantee (the level
// that guarantees its head, by: the team itself or a department above it)
// takes back borrowed work:
//
//   - only from outside by's subtree: within a department's reservation
//     its teams share the department's guarantee, and one does not take
//     from another what both hold by the same right;
//   - first from the borrowers farthest from it in the tree (outside its
//     department before its own department's teams), newest placed first
//     within each;
//   - never taking any level of the victim's path that the claimant does
//     not share below its reservation: a department's reservation protects
//     its teams' work from outsiders, a team's its own from everyone.
//     (The levels both share lose nothing: the GPUs stay in them.)

// chooseVictimsInTree is chooseVictims for an estate with departments:
// claimant is the claimant's group and by the level that guarantees it.
func (st *state) chooseVictimsInTree(p int, need model.MilliGPU, claimant, by int) []int {
	st.sortVictims(p)
	chosen := st.chosen[:0]
	touched, lowered := st.touched[:0], st.lowered[:0]
	defer func() { st.chosen, st.touched, st.lowered = chosen[:0], touched[:0], lowered[:0] }()
	useOf := func(n int) model.MilliGPU {
		for k, tn := range touched {
			if tn == n {
				return lowered[k]
			}
		}
		return st.groupUse[n]
	}
	lower := func(n int, by model.MilliGPU) {
		for k, tn := range touched {
			if tn == n {
				lowered[k] -= by
				return
			}
		}
		touched = append(touched, n)
		lowered = append(lowered, st.groupUse[n]-by)
	}
	if !st.anyTeamCanGive(p, by) {
		// Whatever else is checked, a victim's team must be able to give
		// it: when none can, neither the walk below nor fitVictims finds
		// anything.
		return nil
	}
	var freed model.MilliGPU
	// shared is how many levels a victim's path shares with the
	// claimant's: the fewer, the farther, the sooner.
	for shared := 0; shared <= len(st.pathOf(claimant)); shared++ {
		for _, i := range st.victims[p] {
			v := &st.placements[i]
			if !v.alive {
				continue
			}
			// The victim's team is never on the claimant's path (a team's
			// path holds no other team), so it is checked first, cheaply.
			if res := st.s.Groups[v.group].Reservation; useOf(int(v.group)) <= res || useOf(int(v.group))-v.Size < res || st.within(int(v.group), by) {
				continue
			}
			vp := st.pathOf(int(v.group))
			own := st.unshared(vp, claimant)
			if len(vp)-own != shared {
				continue
			}
			ok := true
			for _, n := range vp[:own] {
				res := st.s.Groups[n].Reservation
				if use := useOf(int(n)); use <= res || use-v.Size < res {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			chosen = append(chosen, i)
			for _, n := range vp[:own] {
				lower(int(n), v.Size)
			}
			freed += v.Size
			if freed >= need {
				return chosen
			}
		}
	}
	if chosen := st.fitVictims(p, need, claimant, by); chosen != nil {
		return chosen
	}
	return st.oneVictim(p, need, claimant, by)
}

// oneVictim is the last resort of chooseVictimsInTree: fitVictims bounds
// each team by its own surplus, and teams of one department share the
// department's, so the union it picks can take the department below its
// reservation where a single task alone would not. It returns the newest
// single placement that frees need and whose loss leaves every level the
// claimant does not share at or above its reservation, or nil.
func (st *state) oneVictim(p int, need model.MilliGPU, claimant, by int) []int {
	for _, i := range st.victims[p] {
		v := &st.placements[i]
		if !v.alive || v.Size < need || st.within(int(v.group), by) {
			continue
		}
		vp := st.pathOf(int(v.group))
		ok := true
		for _, n := range vp[:st.unshared(vp, claimant)] {
			if st.groupUse[n]-v.Size < st.s.Groups[n].Reservation {
				ok = false
				break
			}
		}
		if ok {
			return append(st.chosen[:0], i)
		}
	}
	return nil
}

// anyTeamCanGive reports whether some live placement on pool p, outside
// by's subtree, can be taken without taking its team below the team's
// reservation.
func (st *state) anyTeamCanGive(p, by int) bool {
	for _, i := range st.victims[p] {
		v := &st.placements[i]
		if !v.alive {
			continue
		}
		if use, res := st.groupUse[v.group], st.s.Groups[v.group].Reservation; use > res && use-v.Size >= res && !st.within(int(v.group), by) {
			return true
		}
	}
	return false
}

// unshared is how many levels of the path vp, from its bottom, are not on
// g's path: the levels a victim of vp would lose GPUs at were g to take
// them.
func (st *state) unshared(vp []int32, g int) int {
	for k, n := range vp {
		if st.within(g, int(n)) {
			return k
		}
	}
	return len(vp)
}

// surplus is how much group vg can give to claimant without going below
// its reservation at any level the claimant does not share: in a flat
// estate (claimant < 0) its use above its reservation. 0 when vg is in
// by's subtree.
func (st *state) surplus(vg, claimant, by int) model.MilliGPU {
	if claimant < 0 {
		return st.groupUse[vg] - st.s.Groups[vg].Reservation
	}
	if st.within(vg, by) {
		return 0
	}
	vp := st.pathOf(vg)
	most := model.MilliGPU(-1)
	for _, n := range vp[:st.unshared(vp, claimant)] {
		if s := st.groupUse[n] - st.s.Groups[n].Reservation; most < 0 || s < most {
			most = s
		}
	}
	return max(most, 0)
}

// keepsReservations reports whether preempting chosen together leaves
// every level the claimant does not share at or above its reservation.
func (st *state) keepsReservations(chosen []int, claimant int) bool {
	lost := map[int32]model.MilliGPU{}
	var levels []int32
	for _, i := range chosen {
		v := &st.placements[i]
		vp := st.pathOf(int(v.group))
		for _, n := range vp[:st.unshared(vp, claimant)] {
			if _, seen := lost[n]; !seen {
				levels = append(levels, n)
			}
			lost[n] += v.Size
		}
	}
	for _, n := range levels {
		if st.groupUse[n]-lost[n] < st.s.Groups[n].Reservation {
			return false
		}
	}
	return true
}
