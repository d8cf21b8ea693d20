package pipelines_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/racetest"
)

// The controller's property test (issue 21). The controller under test is
// production's: StartRun, AdvancePipelines and every step move go through
// the domain and a real store (a private in-memory SQLite database,
// migrated as in production, shared by the cases: each case's pipeline
// has a name of its own, so no case reuses another's steps). What stands in is the tasks domain's
// enqueue path (pipelines.TaskPath, which the facade wires to the tasks
// domain): the test's own path checks each call against the graph as the
// test drew it, writes a real task row, and keeps the idempotency keys.
// The real tasks domain would need an estate, policies and the engine
// built for every case, and it would only add the enqueue's own checks,
// which the tasks domain's tests cover; this keeps a case to a few
// milliseconds, so rapid can try hundreds of graphs. The test then plays
// the engine and the workers: between passes it moves the step tasks to
// placed, running, completed (reporting a metric), failed or aborted, as
// rapid draws.

// maxRounds bounds a case: from forceFinalRound on every open task is
// ended each round, so a run that does not end by maxRounds is stuck.
const (
	forceFinalRound = 12
	maxRounds       = 40
)

// TestControllerOverRandomRuns (issue 21): over random graphs and random
// task outcomes, the controller never enqueues a step before its
// dependencies completed, enqueues each step at most 1 + retry times (one
// task, one idempotency key per attempt, the next only after the last
// failed), skips what follows a failure, stops everything at once after a
// stop-policy failure, and ends the run as its steps say, every step
// ended.
func TestControllerOverRandomRuns(t *testing.T) {
	// Under -race the pure-Go SQLite below is some ten times slower.
	racetest.LowerRapidChecks(t, 25)
	e := newFixture(t)
	rapid.Check(t, func(t *rapid.T) {
		e.cases++
		w := newWorld(t, e, drawGraph(t, fmt.Sprintf("train-%d", e.cases), false))
		w.drive()
	})
}

// TestControllerReusesCachedSteps (issue 21): with the step cache on for
// some steps, a second run of a pipeline reuses exactly the steps whose
// earlier run completed with the spec they would have now (the same
// parameter, their dependencies' same metric and artifacts), enqueues
// the others, and otherwise keeps every property of a first run; a
// reused step counts as succeeded for its dependants.
func TestControllerReusesCachedSteps(t *testing.T) {
	// Under -race the pure-Go SQLite below is some ten times slower.
	racetest.LowerRapidChecks(t, 25)
	e := newFixture(t)
	rapid.Check(t, func(t *rapid.T) {
		e.cases++
		w := newWorld(t, e, drawGraph(t, fmt.Sprintf("train-%d", e.cases), true))
		w.drive()
		w.nextRun()
		w.drive()
	})
}

// nextRun keeps the run that ended as the earlier one and readies the
// world for another run of the pipeline.
func (w *world) nextRun() {
	w.earlier, w.earlierSpecs = w.run(), w.specs
	w.runID, w.stopAt, w.checks, w.enqueues = "", 0, 0, nil
	w.stepTasks, w.refused, w.aborts, w.specs = map[string][]string{}, map[string]int{}, map[string]int{}, map[string]model.TaskSpec{}
}

// drive starts a run (with the pipeline's lr or its own, as drawn) and
// advances it, once or twice a round, moving its tasks between rounds,
// until it ends; then checks it.
func (w *world) drive() {
	t, g := w.t, w.g
	in := pipelines.RunInput{Def: g.def, Project: "fraud"}
	g.lr = "0.1"
	if rapid.Bool().Draw(t, "override lr") {
		in.Params, g.lr = map[string]string{"lr": "0.05"}, "0.05"
	}
	r, err := w.p.StartRun(w.ownerCtx, in)
	if err != nil {
		t.Fatalf("start the run: %v", err)
	}
	w.runID = r.ID
	if w.checks != len(g.def.Steps) || r.State != model.PipelineRunPending || len(w.enqueues) != 0 {
		t.Fatalf("started: %d steps checked of %d, state %s, %d enqueued", w.checks, len(g.def.Steps), r.State, len(w.enqueues))
	}
	for round := 0; ; round++ {
		if round == maxRounds {
			t.Fatalf("the run is still %s after %d rounds", w.run().State, round)
		}
		w.now = w.now.Add(time.Minute)
		w.advance()
		w.checkPass()
		if rapid.Bool().Draw(t, "second pass") {
			// Another replica's pass right after, with no task
			// changed in between, changes nothing.
			first, n, aborts := w.run(), len(w.enqueues), len(w.aborts)
			w.advance()
			w.checkPass()
			if again := w.run(); !sameRun(first, again) || len(w.enqueues) != n || len(w.aborts) != aborts {
				t.Fatalf("a second pass with nothing changed moved the run: %s", describe(first, again))
			}
		}
		if w.run().State.Final() {
			break
		}
		w.moveTasks(round >= forceFinalRound)
	}
	w.checkEnd()
}

// moveTasks plays the engine and the workers: each open task of the run
// stays, is placed, starts running, or ends (completed with a loss
// metric, failed, or aborted by someone), as rapid draws; force ends
// them all.
func (w *world) moveTasks(force bool) {
	for _, step := range slices.Sorted(maps.Keys(w.stepTasks)) {
		ids := w.stepTasks[step]
		id := ids[len(ids)-1]
		task, err := w.st.GetTask(w.ctx, w.tenant, id)
		must(w.t, err)
		if task.Status.Final() {
			continue
		}
		min := 0
		if force {
			min = 3
		}
		rec := w.tasks[id]
		switch rapid.IntRange(min, 5).Draw(w.t, "move "+rec.key) {
		case 0:
			continue
		case 1:
			if task.Status != model.TaskQueued {
				continue
			}
			task.Status, task.Reason = model.TaskPlaced, "placed on a pool"
		case 2:
			task.Status, task.Reason = model.TaskRunning, "running"
		case 3:
			task.Status, task.Reason, task.FinishedAt = model.TaskCompleted, "exit 0", ptr(w.now)
			rec.loss = float64(rapid.IntRange(0, 400).Draw(w.t, "loss "+rec.key)) / 4
			must(w.t, w.st.AppendMetrics(w.ctx, w.tenant, id, 1, []model.MetricPoint{{At: w.now, Name: "loss", Value: rec.loss}}))
		case 4:
			task.Status, task.Reason, task.FinishedAt = model.TaskFailed, "exit 1", ptr(w.now)
			if rec.attempt == 1+w.g.steps[step].Retry && w.g.stops(step) && w.stopAt == 0 {
				w.stopAt = w.pass + 1
			}
		case 5:
			task.Status, task.Reason, task.FinishedAt = model.TaskAborted, "aborted by ops", ptr(w.now)
			if w.g.stops(step) && w.stopAt == 0 {
				w.stopAt = w.pass + 1
			}
		}
		task.UpdatedAt = w.now
		must(w.t, w.st.UpdateTask(w.ctx, task))
	}
}

// checkPass checks what holds after every pass.
func (w *world) checkPass() {
	t, r := w.t, w.run()
	// (3) A pass that saw a stop-policy failure ended the run.
	if w.stopAt != 0 && w.pass >= w.stopAt && r.State != model.PipelineRunFailed {
		t.Fatalf("pass %d saw a step fail for good under the stop policy, and the run is %s (%s)", w.pass, r.State, r.Reason)
	}
	open := false
	for _, st := range r.Steps {
		def := w.g.steps[st.Name]
		tasks := w.stepTasks[st.Name]
		// (2) The step's tasks are the ones enqueued for it, one per
		// attempt, each linked to its run, step and attempt.
		if st.State == model.StepCached {
			// Cached: the earlier run's task, reused as the cache
			// allows, and nothing enqueued.
			if e := w.earlier; e == nil || len(tasks) != 0 || !w.reusable(st.Name) || st.TaskID != e.Step(st.Name).TaskID ||
				!slices.Equal(st.TaskIDs, []string{st.TaskID}) || st.CachedFromRunID != e.ID || st.Attempts != 0 {
				t.Fatalf("after pass %d step %s is cached from run %q's task %s (tasks %v, attempts %d); the run before: %s", w.pass, st.Name, st.CachedFromRunID, st.TaskID, tasks, st.Attempts, describe(e, e))
			}
			continue
		}
		if !slices.Equal(st.TaskIDs, tasks) || st.Attempts != len(tasks) || (len(tasks) > 0 && st.TaskID != tasks[len(tasks)-1]) {
			t.Fatalf("after pass %d step %s has tasks %v (attempts %d, current %s), the controller enqueued %v", w.pass, st.Name, st.TaskIDs, st.Attempts, st.TaskID, tasks)
		}
		last := model.TaskStatus("")
		if len(tasks) > 0 {
			last = w.status(tasks[len(tasks)-1])
		}
		switch st.State {
		case model.StepPending:
			// Pending: nothing enqueued yet, and (while the run goes
			// on) some dependency has not ended.
			waiting := false
			for _, d := range w.g.deps[st.Name] {
				waiting = waiting || !r.Step(d).State.Final()
			}
			if len(tasks) != 0 || (!r.State.Final() && !waiting) {
				t.Fatalf("after pass %d step %s is pending with tasks %v, its dependencies %s", w.pass, st.Name, tasks, depStates(r, w.g.deps[st.Name]))
			}
		case model.StepQueued, model.StepRunning:
			// It follows its task, which has not ended.
			want := model.StepQueued
			if last == model.TaskRunning {
				want = model.StepRunning
			}
			if st.State != want || last.Final() {
				t.Fatalf("after pass %d step %s is %s, its task %s", w.pass, st.Name, st.State, last)
			}
			open = true
		case model.StepCompleted:
			if last != model.TaskCompleted {
				t.Fatalf("after pass %d step %s is completed, its task %s", w.pass, st.Name, last)
			}
		case model.StepFailed:
			// Its last task failed with no retry left, or its next
			// enqueue was refused.
			if !(last == model.TaskFailed && len(tasks) == 1+def.Retry) && w.refused[st.Name] != len(tasks)+1 {
				t.Fatalf("after pass %d step %s is failed with tasks %v (%v), retry %d", w.pass, st.Name, tasks, w.statuses(st.Name), def.Retry)
			}
		case model.StepAborted:
			// Its task was aborted, by someone or by the stop; or it
			// failed with a retry left when the run stopped.
			stopped := w.stopAt != 0 && w.pass >= w.stopAt
			if last != model.TaskAborted && !(stopped && last == model.TaskFailed) {
				t.Fatalf("after pass %d step %s is aborted, its tasks %v", w.pass, st.Name, w.statuses(st.Name))
			}
		case model.StepSkipped:
			// Skipped: never enqueued, after a dependency that did not
			// succeed or the run's stop.
			failedDep := false
			for _, d := range w.g.deps[st.Name] {
				failedDep = failedDep || (r.Step(d).State.Final() && !r.Step(d).State.Succeeded())
			}
			if len(tasks) != 0 || (!failedDep && !(w.stopAt != 0 && w.pass >= w.stopAt)) {
				t.Fatalf("after pass %d step %s is skipped with tasks %v, its dependencies %s", w.pass, st.Name, tasks, depStates(r, w.g.deps[st.Name]))
			}
		default:
			t.Fatalf("after pass %d step %s is %s", w.pass, st.Name, st.State)
		}
	}
	switch {
	case !r.State.Final() && !open:
		t.Fatalf("after pass %d the run is %s with no step queued or running: %s", w.pass, r.State, describe(r, r))
	case r.State.Final():
		// (4) A run that ended has every step ended and every task of
		// it ended.
		for _, st := range r.Steps {
			if !st.State.Final() {
				t.Fatalf("after pass %d the run is %s and step %s is %s", w.pass, r.State, st.Name, st.State)
			}
		}
		for id, rec := range w.tasks {
			if s := w.status(id); !s.Final() {
				t.Fatalf("after pass %d the run is %s and task %s of step %s is %s", w.pass, r.State, id, rec.step, s)
			}
		}
	}
}

// checkEnd checks the ended run against what its steps' tasks did.
func (w *world) checkEnd() {
	t, r := w.t, w.run()
	stopped := w.stopAt != 0
	allOK := true
	for _, st := range r.Steps {
		def, tasks := w.g.steps[st.Name], w.stepTasks[st.Name]
		var want model.PipelineStepState
		switch {
		case w.refused[st.Name] == len(tasks)+1:
			want = model.StepFailed
		case len(tasks) == 0 && st.State == model.StepCached:
			// checkPass checked that the cache allowed it.
			want = model.StepCached
		case len(tasks) == 0:
			want = model.StepSkipped
		default:
			switch last := w.status(tasks[len(tasks)-1]); {
			case last == model.TaskCompleted:
				want = model.StepCompleted
			case last == model.TaskAborted:
				want = model.StepAborted
			case last == model.TaskFailed && len(tasks) == 1+def.Retry:
				want = model.StepFailed
			case last == model.TaskFailed && stopped:
				want = model.StepAborted
			default:
				t.Fatalf("step %s's last task ended %s with %d of %d attempts, and the run did not stop", st.Name, last, len(tasks), 1+def.Retry)
			}
		}
		if st.State != want {
			t.Fatalf("step %s ended %s, want %s (tasks %v, refused attempt %d, stop from pass %d)", st.Name, st.State, want, w.statuses(st.Name), w.refused[st.Name], w.stopAt)
		}
		allOK = allOK && want.Succeeded()
		// Each task is linked to its run, step and attempt.
		for i, id := range tasks {
			l, err := w.st.GetPipelineTaskLink(w.ctx, w.tenant, id)
			must(t, err)
			if l.RunID != r.ID || l.Step != st.Name || l.Attempt != i+1 {
				t.Fatalf("task %s (attempt %d of %s) is linked to %+v", id, i+1, st.Name, l)
			}
		}
	}
	// (3) The run completed when every step completed, else failed.
	if want := map[bool]model.PipelineRunState{true: model.PipelineRunCompleted, false: model.PipelineRunFailed}[allOK]; r.State != want {
		t.Fatalf("the run ended %s (%s), want %s", r.State, r.Reason, want)
	}
	// The controller aborts only to stop a run, and then every task still
	// open, in the pass that saw the failure.
	for id, pass := range w.aborts {
		if !stopped || pass != w.stopAt {
			t.Fatalf("task %s of step %s aborted by pass %d, the stop seen from pass %d", id, w.tasks[id].step, pass, w.stopAt)
		}
	}
	// Keys: one task per key, and replays only give back that task.
	seen := map[string]string{}
	for _, e := range w.enqueues {
		if e.refused {
			continue
		}
		if id, ok := seen[e.key]; ok && (id != e.taskID || !e.replay) {
			t.Fatalf("key %s made tasks %s and %s", e.key, id, e.taskID)
		}
		seen[e.key] = e.taskID
	}
}

// sameRun reports whether two reads of a run show the same states.
func sameRun(a, b *model.PipelineRun) bool {
	if a.State != b.State || a.Reason != b.Reason || len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		x, y := a.Steps[i], b.Steps[i]
		if x.State != y.State || x.Attempts != y.Attempts || x.TaskID != y.TaskID || x.Reason != y.Reason {
			return false
		}
	}
	return true
}

func describe(a, b *model.PipelineRun) string {
	if a == nil || b == nil {
		return "none"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "run %s → %s;", a.State, b.State)
	for i := range a.Steps {
		fmt.Fprintf(&sb, " %s %s/%d → %s/%d (%s);", a.Steps[i].Name, a.Steps[i].State, a.Steps[i].Attempts, b.Steps[i].State, b.Steps[i].Attempts, b.Steps[i].Reason)
	}
	return sb.String()
}

func depStates(r *model.PipelineRun, deps []string) string {
	var out []string
	for _, d := range deps {
		out = append(out, d+" "+string(r.Step(d).State))
	}
	return "[" + strings.Join(out, ", ") + "]"
}
