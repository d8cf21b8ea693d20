package studies

import (
	"fmt"
	"strconv"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// observation is what a pass read of one trial's task: its status and
// the points of the objective metric it reported.
type observation struct {
	// Status is "" while the trial has no task.
	Status     model.TaskStatus
	Reason     string
	FinishedAt *time.Time
	Points     []model.MetricPoint
}

// stopOrder is a task the pass stops, and why.
type stopOrder struct {
	Trial  *model.StudyTrial
	Reason string
}

// plan is what one pass decided: the trials it changed and added, the
// tasks to stop, and the study's new state.
type plan struct {
	Changed []*model.StudyTrial
	Added   []*model.StudyTrial
	Stop    []stopOrder
	Study   model.Study
}

// decider is a pass's pure core: from a study, its trials, what their
// tasks reported and the GPU-hours they used, what to change. It keeps no
// state; the controller around it reads and writes.
type decider struct {
	summarize func(points []model.MetricPoint, direction string) (final, best Value, ok bool)
}

// decide plans one pass. trials are changed in place; obs is by trial
// number.
func (d decider) decide(st model.Study, trials []*model.StudyTrial, obs map[int]observation, gpuHours float64, now time.Time) plan {
	p := plan{Study: st}
	spec := st.Spec
	changed := map[int]bool{}
	var rungs []int
	if spec.Strategy == model.StrategyHalving {
		rungs = Rungs(spec.Halving)
	}
	for _, tr := range trials {
		if tr.State.Final() || tr.TaskID == "" {
			continue
		}
		ob := obs[tr.Number]
		if ob.Status.Final() {
			d.finish(spec, tr, ob, now)
			changed[tr.Number] = true
			continue
		}
		for tr.Rung < len(rungs) && !tr.State.Final() {
			step := rungs[tr.Rung]
			v, ok := d.rungValue(spec, ob.Points, step)
			if !ok {
				break
			}
			var values []float64
			for _, o := range trials {
				if o.State == model.TrialStoppedEarly && o.Rung < tr.Rung {
					continue // stopped at an earlier rung: it never reached this one
				}
				if ov, ok := d.rungValue(spec, obs[o.Number].Points, step); ok {
					values = append(values, ov.Value)
				}
			}
			promoted, cut := Promote(spec.Direction, spec.Halving.Eta, values, v.Value)
			changed[tr.Number] = true
			if promoted {
				tr.Rung++
				continue
			}
			word := "below"
			if spec.Direction == "min" {
				word = "above"
			}
			why := fmt.Sprintf("stopped early by study %s at rung %d (%s %d): %s %s was %s the rung's cut %s",
				st.Name, tr.Rung+1, spec.Halving.Resource, step, spec.Objective, num(v.Value), word, num(cut))
			val := v.Value
			tr.State, tr.Reason, tr.Objective, tr.ObjectiveStep, tr.EndedAt = model.TrialStoppedEarly, why, &val, v.Step, &now
			p.Stop = append(p.Stop, stopOrder{tr, why})
		}
	}
	active := 0
	for _, tr := range trials {
		if !tr.State.Final() {
			active++
		}
	}
	gpuSpent := spec.Budget.GPUHours > 0 && gpuHours >= spec.Budget.GPUHours
	if gpuSpent && active > 0 {
		why := fmt.Sprintf("aborted by study %s: its budget of %s GPU-hours is spent (%s used)", st.Name, num(spec.Budget.GPUHours), num(gpuHours))
		for _, tr := range trials {
			if tr.State.Final() {
				continue
			}
			tr.State, tr.Reason, tr.EndedAt = model.TrialAborted, why, &now
			changed[tr.Number] = true
			if tr.TaskID != "" {
				p.Stop = append(p.Stop, stopOrder{tr, why})
			}
		}
		active = 0
	}
	next, exhausted := len(trials), false
	for !gpuSpent && active < spec.MaxConcurrent && (spec.Budget.Trials == 0 || next < spec.Budget.Trials) && next < MaxTrials {
		params, ok := Suggest(spec, next)
		if !ok {
			exhausted = true
			break
		}
		p.Added = append(p.Added, &model.StudyTrial{TenantID: st.TenantID, StudyID: st.ID, Number: next, Params: params,
			State: model.TrialPending, CreatedAt: now})
		next++
		active++
	}
	if !exhausted && spec.Strategy == model.StrategyGrid && next >= GridSize(spec.Space) {
		exhausted = true
	}
	for _, tr := range trials {
		if changed[tr.Number] {
			p.Changed = append(p.Changed, tr)
		}
	}
	p.Study.BestTaskID = best(spec.Direction, trials)
	if active == 0 {
		p.Study.State, p.Study.FinishedAt = model.StudyCompleted, &now
		switch {
		case gpuSpent:
			p.Study.Reason = fmt.Sprintf("its budget of %s GPU-hours is spent (%s used) after %d trials", num(spec.Budget.GPUHours), num(gpuHours), len(trials))
		case exhausted:
			p.Study.Reason = fmt.Sprintf("all %d points of its grid have run", len(trials))
		case spec.Budget.Trials > 0 && next >= spec.Budget.Trials:
			p.Study.Reason = fmt.Sprintf("its budget of %d trials is spent", spec.Budget.Trials)
		default:
			p.Study.Reason = fmt.Sprintf("it ran the most trials a study may (%d)", MaxTrials)
		}
	}
	return p
}

// finish records a trial whose task ended: its state, and its objective
// by the study's summary.
func (d decider) finish(spec model.StudySpec, tr *model.StudyTrial, ob observation, now time.Time) {
	switch ob.Status {
	case model.TaskCompleted:
		tr.State = model.TrialCompleted
	case model.TaskFailed:
		tr.State, tr.Reason = model.TrialFailed, ob.Reason
	default:
		tr.State, tr.Reason = model.TrialAborted, ob.Reason
	}
	tr.EndedAt = ob.FinishedAt
	if tr.EndedAt == nil {
		tr.EndedAt = &now
	}
	if final, bestV, ok := d.summarize(ob.Points, spec.Direction); ok {
		v := final
		if spec.Summary == "best" {
			v = bestV
		}
		val := v.Value
		tr.Objective, tr.ObjectiveStep = &val, v.Step
	}
	if tr.State == model.TrialCompleted && tr.Objective == nil {
		tr.Reason = "it reported no " + spec.Objective
	}
}

// rungValue is a trial's objective at a rung: the summary of the points up
// to the rung's step, once it has reported a point at or past it.
func (d decider) rungValue(spec model.StudySpec, points []model.MetricPoint, step int) (Value, bool) {
	var upTo []model.MetricPoint
	reached := false
	for _, pt := range points {
		if pt.Step <= int64(step) {
			upTo = append(upTo, pt)
		}
		if pt.Step >= int64(step) {
			reached = true
		}
	}
	if !reached {
		return Value{}, false
	}
	final, bestV, ok := d.summarize(upTo, spec.Direction)
	if spec.Summary == "best" {
		return bestV, ok
	}
	return final, ok
}

// best is the task of the best completed trial with an objective (the
// lower number on a tie), "" when none.
func best(direction string, trials []*model.StudyTrial) string {
	var b *model.StudyTrial
	for _, tr := range trials {
		if tr.State != model.TrialCompleted || tr.Objective == nil {
			continue
		}
		if b == nil || isBetter(direction, *tr.Objective, *b.Objective) {
			b = tr
		}
	}
	if b == nil {
		return ""
	}
	return b.TaskID
}

// num formats a number for a reason: short, without trailing zeros.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
