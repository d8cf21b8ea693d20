package engine

// The pass's time budget rules: enforcing a budget used up, and the check
// before work starts. budget.go has the periods and the arithmetic.

// enforceBudgets preempts, newest first, the running budgeted work of every
// node whose time budget is used up: a team's own, a department's its
// teams'.
func (st *state) enforceBudgets() {
	for g := range st.s.Groups {
		b := st.s.Groups[g].Budget
		if b == nil || b.Remaining() > 0 || st.groupBudgeted[g] == 0 {
			continue
		}
		var mine []int
		for i := range st.placements {
			if pl := &st.placements[i]; pl.alive && pl.weight > 0 && st.within(int(pl.group), g) {
				mine = append(mine, i)
			}
		}
		st.sortNewestFirst(mine)
		reason := "time budget used up: " + st.budgetSentence(g)
		if st.s.Groups[g].Department {
			reason = "time budget used up: " + st.level(g) + "'s " + st.budgetSentence(g)
		}
		for _, i := range mine {
			st.preempt(i, CauseBudgetUsed, -1, reason)
		}
	}
}

// budgetAllows is the start check of time budgets: work on an exempt
// profile always starts; otherwise, at every level of g's path with a
// budget, the budget must not be used up, and the remaining budget must
// last the low watermark at the level's rate with the new task, unless
// none of the level's budgeted work is running.
func (st *state) budgetAllows(g int, weight int64) bool {
	if weight == 0 {
		return true
	}
	for _, n := range st.pathOf(g) {
		if !st.budgetAllowsAt(int(n), weight) {
			return false
		}
	}
	return true
}

// budgetAllowsAt is budgetAllows at one level.
func (st *state) budgetAllowsAt(n int, weight int64) bool {
	b := st.s.Groups[n].Budget
	if b == nil {
		return true
	}
	rem := b.Remaining()
	if rem == 0 {
		return false
	}
	if st.groupBudgeted[n] == 0 {
		return true
	}
	return lastsHours(rem, st.groupRate[n]+weight) >= b.LowWatermark.Hours()
}

// lastsHours is how long rem micro budget-hours last at rateMilli
// thousandths of a budget hour per hour.
func lastsHours(rem, rateMilli int64) float64 {
	return (float64(rem) / 1e6) / (float64(rateMilli) / 1000)
}
