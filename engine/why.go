package engine

import (
	"github.com/klique-ai/klique/internal/model"
)

// explain says, for every queue with work still waiting, what holds its
// head, in the terms a developer can act on.
func (st *state) explain() {
	for q := range st.s.Queues {
		// The head is the first task not placed, or a task this pass sent
		// back to the front, whichever comes first in queue order.
		var id string
		var shape model.Size
		if st.next[q] < len(st.waiting[q]) {
			t := &st.waiting[q][st.next[q]]
			id, shape = t.ID, t.Size
		}
		if r := st.requeued[q]; r >= 0 && (id == "" || st.placements[r].Seq < st.waiting[q][st.next[q]].Seq) {
			id = st.taskID(r)
			shape = st.running(r).Shape
			if shape.IsZero() {
				// A placement given without its shape is one node.
				shape = model.Size{Nodes: 1, PerNode: st.placements[r].Size}
			}
		}
		if id == "" {
			continue
		}
		if st.dec.Blocked == nil {
			// At most one per queue: one allocation instead of a
			// doubling series on a large estate.
			st.dec.Blocked = make([]Blocked, 0, len(st.s.Queues)-q)
		}
		b := Blocked{Queue: q, TaskID: id}
		b.Constraint, b.Reason = st.reason(q, shape)
		if c := b.Constraint; c == HeldByBudgetUsed || c == HeldByLowWatermark {
			// For the low watermark the reset is the latest it lifts by
			// itself: the reason says it may start sooner.
			b.Until = st.s.Groups[st.heldAt].Budget.ResetAt
		}
		st.dec.Blocked = append(st.dec.Blocked, b)
	}
}

// why decides what holds the head of queue, of size shape, and gives w the
// parts of the sentence that says so. Everything the sentence shows goes
// through w, and nothing else: w's parts are what decides whether a kept
// sentence can be reused (sentence.go).
func (st *state) why(queue *Queue, shape model.Size, w *sentence) Constraint {
	g := &st.s.Groups[queue.Group]
	pr := &st.s.Profiles[queue.Profile]
	size := shape.Total()
	if len(pr.Pools) == 0 {
		w.text("profile ").text(pr.Name).text(" lists no pool, so nothing can be placed; ask an admin to add pools to it")
		return HeldByNoPool
	}
	if !st.kindCanRun(queue.Profile, shape) {
		w.kindOf(partNoPoolCanRun).text(pr.Name).shape(shape)
		for _, p := range pr.Pools {
			w.text(st.s.Pools[p].Name).text(string(st.s.Pools[p].Kind))
		}
		return HeldByPoolKind
	}
	largest := st.largestPool(queue.Profile, shape)
	if largest < 0 {
		w.text("every pool of profile ").text(pr.Name).text(" declares 0 GPUs, so nothing can be placed until an admin gives one of them capacity")
		return HeldByNoPool
	}
	if c := st.s.Pools[largest].Capacity; size > c {
		w.text("no pool of profile ").text(pr.Name).text(" declares ").gpusText(size).
			text(" (the largest, ").text(st.s.Pools[largest].Name).text(", has ").gpus(c).text(")")
		return HeldByTooLarge
	}
	// The level of the tree that holds the head is named: the team
	// ("group ml") or a department above it ("department Research").
	if n := st.pausedAt(queue.Group); n >= 0 {
		if n == queue.Group {
			w.text("group ").text(g.Name).text(" is paused: an admin set its limit to 0 GPUs, so its work waits (and its running work runs to its end) until the limit is raised")
		} else {
			w.text(st.levelWord(n)).text(st.s.Groups[n].Name).text(" is paused: an admin set its limit to 0 GPUs, so the work of group ").text(g.Name).
				text(" waits (and running work runs to its end) until the limit is raised")
		}
		return HeldByPaused
	}
	if pr.WeightMilli > 0 {
		for _, n := range st.pathOf(queue.Group) {
			b := st.s.Groups[n].Budget
			if b == nil {
				continue
			}
			st.heldAt = int(n)
			name := st.s.Groups[n].Name
			if b.Remaining() == 0 {
				w.text(st.levelWord(int(n))).text(name).text(" has used its ")
				budgetParts(w, b)
				return HeldByBudgetUsed
			}
			if !st.budgetAllowsAt(int(n), pr.WeightMilli) {
				w.text(st.levelWord(int(n))).text(name).text("'s remaining time budget (").hours(b.Remaining()).
					text(" h) would last less than the low watermark of ").duration(b.LowWatermark).
					text(" at its rate with this task; it can start once the ").text(levelNoun(st.s.Groups[n].Department)).text("'s running budgeted work ends (or sooner, once enough of it has), or when the budget resets ").
					reset(b.ResetAt)
				return HeldByLowWatermark
			}
		}
	}
	if n := st.overLimitAt(queue.Group, size); n == queue.Group {
		w.text("group ").text(g.Name).text(" is at its limit: it holds ").gpus(st.groupUse[queue.Group]).
			text(" of ").gpusText(g.Limit).text(" and this task needs ").gpus(size)
		return HeldByLimit
	} else if n >= 0 {
		w.text(st.levelWord(n)).text(st.s.Groups[n].Name).text(" is at its limit of ").gpusText(st.s.Groups[n].Limit).
			text(": it holds ").gpus(st.groupUse[n]).text(" and this task of group ").text(g.Name).text(" needs ").gpus(size)
		return HeldByLimit
	}
	if st.noWorker(pr, shape, w) {
		return HeldByNoWorker
	}
	w.text("every pool of profile ").text(pr.Name).text(" is full for ").gpusText(size).text(" (")
	first := true
	for _, p := range pr.Pools {
		if st.s.Pools[p].Kind.CanRun(shape) {
			if !first {
				w.text(", ")
			}
			first = false
			w.text(st.s.Pools[p].Name).text(" ").gpus(st.poolUsed[p]).text("/").gpus(st.s.Pools[p].Capacity)
		}
	}
	w.text(" GPUs used)")
	return HeldByPoolsFull
}

// levelNoun is "department" or "group".
func levelNoun(department bool) string {
	if department {
		return "department"
	}
	return "group"
}

// budgetParts gives w the parts of budgetSentence.
func budgetParts(w *sentence, b *Budget) {
	w.text(periodAdjective(b.Period)).text(" time budget of ").hours(b.Total).text(" h; it resets ").reset(b.ResetAt)
}

// periodAdjective is "daily", "weekly" or "monthly".
func periodAdjective(p model.BudgetPeriod) string {
	switch p {
	case model.PeriodDay:
		return "daily"
	case model.PeriodWeek:
		return "weekly"
	case model.PeriodMonth:
		return "monthly"
	}
	return ""
}

// budgetSentence says which budget is spent and when it resets:
// "weekly time budget of 2000 h; it resets Monday 2026-11-30 00:00 UTC".
func (st *state) budgetSentence(g int) string {
	var w sentence
	budgetParts(&w, st.s.Groups[g].Budget)
	return w.render()
}

func resetText(b *Budget) string {
	return b.ResetAt.UTC().Format(resetLayout)
}
