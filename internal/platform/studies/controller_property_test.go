package studies_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/studies"
	"github.com/klique-ai/klique/internal/platform/tasks"
	"github.com/klique-ai/klique/internal/racetest"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

// The studies controller's property test (issue 21). The controller under
// test is production's (ReconcileStudies over a real store: a private
// in-memory SQLite database, migrated as in production, shared by the
// cases). The study is written to the store as StartStudy writes it:
// StartStudy's checks need the allocation model (the compute resource's
// policy), which the tasks domain's and the platform's tests cover, and
// past them it only runs the same pass. What stands in is the tasks
// domain (Deps.Clone and Deps.Stop): the test's clone checks each call,
// keeps the idempotency keys and writes a real task row; the test then
// plays the workers between passes. Direction and Summarize are the tasks
// domain's own.

const (
	forceFinalRound = 10
	maxRounds       = 60
)

type fixture struct {
	st                                  store.Store
	tenant, owner, group, project, base string
	resource                            string
}

func newFixture(t *testing.T) *fixture {
	ctx, now := context.Background(), time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st, err := sqlite.Open(ctx, sqlite.Memory)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{st: st, resource: model.NewID()}
	tn := &model.Tenant{ID: model.NewID(), Name: "default", CreatedAt: now}
	check(st.CreateTenant(ctx, tn))
	u := &model.User{ID: model.NewID(), TenantID: tn.ID, Name: "rita", Role: model.RoleMember, CreatedAt: now, UpdatedAt: now}
	check(st.CreateUser(ctx, u))
	gr := &model.Group{ID: model.NewID(), TenantID: tn.ID, Name: "research", CreatedAt: now, UpdatedAt: now}
	check(st.CreateGroup(ctx, gr))
	check(st.PutMembership(ctx, &model.Membership{TenantID: tn.ID, GroupID: gr.ID, UserID: u.ID, Role: model.GroupRoleMember, CreatedAt: now}))
	pr := &model.Project{ID: model.NewID(), TenantID: tn.ID, Name: "fraud", GroupID: gr.ID, CreatedAt: now, UpdatedAt: now}
	check(st.CreateProject(ctx, pr))
	base := &model.Task{ID: model.NewID(), TenantID: tn.ID, ProjectID: pr.ID, OwnerID: u.ID, ComputeResourceID: f.resource, GroupID: gr.ID,
		Name: "base", Spec: model.TaskSpec{Command: []string{"python", "train.py"}, Parameters: map[string]string{"lr": "0.1"}},
		Status: model.TaskCompleted, Reason: "exit 0", CreatedAt: now, UpdatedAt: now, FinishedAt: &now}
	check(st.CreateTask(ctx, base))
	f.tenant, f.owner, f.group, f.project, f.base = tn.ID, u.ID, gr.ID, pr.ID, base.ID
	return f
}

// world is one case.
type world struct {
	*fixture
	t     *rapid.T
	ctx   context.Context
	s     *studies.Studies
	now   time.Time
	study *model.Study
	// limit is the most trials the study may make: its budget, or its
	// grid's size when smaller.
	limit int
	pass  int
	// tasks are the trials' tasks by trial number; keys the idempotency
	// keys seen, with their task; refused the trials whose enqueue was
	// refused; stopped the tasks the controller stopped.
	tasks   map[int]string
	keys    map[string]string
	refused map[int]bool
	stopped map[string]int
	clones  int
	// refusedIn is the last pass that had an enqueue refused.
	refusedIn int
	// steps is the last step each trial reported the objective at.
	steps map[int]int64
}

func newWorld(t *rapid.T, f *fixture) *world {
	w := &world{fixture: f, t: t, ctx: context.Background(), now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		tasks: map[int]string{}, keys: map[string]string{}, refused: map[int]bool{}, stopped: map[string]int{}, steps: map[int]int64{}}
	// A case that failed (rapid then shrinks it) can leave its study
	// running; end it, so this case's passes see only this case's study.
	running, err := f.st.ListRunningStudies(w.ctx)
	must(t, err)
	for _, st := range running {
		st.State, st.Reason, st.FinishedAt = model.StudyStopped, "an earlier case failed", &w.now
		must(t, f.st.UpdateStudy(w.ctx, st))
	}
	k := kernel.New(kernel.Options{Store: f.st, Now: func() time.Time { return w.now }})
	w.s = studies.New(k, studies.Deps{Clone: w.clone, Stop: w.stop,
		Target: func(context.Context, string, string, string) (*model.Project, *model.ComputeResource, error) {
			t.Fatalf("a pass checked a target")
			return nil, nil, nil
		},
		Direction: tasks.Direction,
		Summarize: func(points []model.MetricPoint, direction string) (studies.Value, studies.Value, bool) {
			f, b, ok := tasks.Summarize(points, direction)
			return studies.Value(f), studies.Value(b), ok
		}})
	return w
}

func must(t *rapid.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func (w *world) status(id string) model.TaskStatus {
	task, err := w.st.GetTask(w.ctx, w.tenant, id)
	must(w.t, err)
	return task.Status
}

// open counts the study's tasks that have not ended.
func (w *world) open() int {
	n := 0
	for _, id := range w.tasks {
		if !w.status(id).Final() {
			n++
		}
	}
	return n
}

// clone is the test's enqueue of a trial: as the owner, at most one task
// per trial (its idempotency key), never past the study's concurrency
// nor its budget; one in eight is refused, as the tasks domain refuses a
// compute resource closed to the owner.
func (w *world) clone(ctx context.Context, baseID, name string, params map[string]string, project, cr, key string) (*model.Task, error) {
	if p, ok := identity.PrincipalFrom(ctx); !ok || p.UserID != w.owner {
		w.t.Fatalf("trial %s enqueued not as the study's owner", name)
	}
	var n int
	if _, err := fmt.Sscanf(strings.TrimPrefix(key, "study-"+w.study.ID+"-trial-"), "%d", &n); err != nil || baseID != w.base || project != w.project || cr != w.resource {
		w.t.Fatalf("trial %q enqueued with key %q, base %s, project %s, compute resource %s", name, key, baseID, project, cr)
	}
	if id, ok := w.keys[key]; ok {
		return w.st.GetTask(ctx, w.tenant, id)
	}
	if n >= w.limit || n != len(w.keys)+countTrue(w.refused) {
		w.t.Fatalf("pass %d enqueued trial %d; the study may make %d, and %d were enqueued or refused", w.pass, n, w.limit, len(w.keys)+countTrue(w.refused))
	}
	if open := w.open(); open >= w.study.Spec.MaxConcurrent {
		w.t.Fatalf("pass %d enqueued trial %d with %d trials' tasks open, at most %d at once", w.pass, n, open, w.study.Spec.MaxConcurrent)
	}
	if rapid.IntRange(0, 7).Draw(w.t, fmt.Sprintf("refuse trial %d", n)) == 0 {
		w.refused[n], w.refusedIn = true, w.pass
		return nil, kernel.Forbidden("compute resource is not open to rita any more")
	}
	task := &model.Task{ID: model.NewID(), TenantID: w.tenant, ProjectID: project, OwnerID: w.owner, ComputeResourceID: cr, GroupID: w.group,
		Name: name, Spec: model.TaskSpec{Command: []string{"python", "train.py"}, Parameters: params}, Status: model.TaskQueued,
		Reason: "waiting for a pool", CreatedAt: w.now, UpdatedAt: w.now}
	must(w.t, w.st.CreateTask(ctx, task))
	w.keys[key], w.tasks[n] = task.ID, task.ID
	w.clones++
	return task, nil
}

// stop is the abort path on the study's authority.
func (w *world) stop(_ context.Context, tenantID, taskID, _, reason string) (*model.Task, error) {
	task, err := w.st.GetTask(w.ctx, tenantID, taskID)
	if err != nil {
		return nil, err
	}
	if task.Status.Final() {
		return nil, kernel.Conflict("task %s has already ended", taskID)
	}
	w.stopped[taskID] = w.pass
	task.Status, task.Reason, task.FinishedAt, task.UpdatedAt = model.TaskAborted, reason, ptr(w.now), w.now
	return task, w.st.UpdateTask(w.ctx, task)
}

func countTrue(m map[int]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// TestStudyControllerOverRandomOutcomes (issue 21): over random studies
// (grid, random or successive-halving search, 1 to 4 trials at once, a budget of 1 to 10
// trials) and random task outcomes, the controller never has more than
// the study's concurrency of trials' tasks open, never makes more trials
// than its budget (or its grid) allows, one task per trial; after each
// pass it has filled the concurrency while the budget lasts, each trial
// follows its task; and the study completes once the budget is spent and
// every trial ended, with every task ended.
func TestStudyControllerOverRandomOutcomes(t *testing.T) {
	// Under -race the pure-Go SQLite below is some ten times slower.
	racetest.LowerRapidChecks(t, 25)
	f := newFixture(t)
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t, f)
		spec := model.StudySpec{Objective: "loss", MaxConcurrent: rapid.IntRange(1, 4).Draw(t, "max concurrent"),
			Budget: model.StudyBudget{Trials: rapid.IntRange(1, 10).Draw(t, "budget")}}
		w.limit = spec.Budget.Trials
		switch rapid.SampledFrom([]string{model.StrategyGrid, model.StrategyRandom, model.StrategyHalving}).Draw(t, "strategy") {
		case model.StrategyGrid:
			n := rapid.IntRange(1, 6).Draw(t, "grid size")
			var values []string
			for i := range n {
				values = append(values, fmt.Sprint(i))
			}
			spec.Strategy, spec.Space = model.StrategyGrid, []model.SearchParam{{Name: "lr", Kind: model.ParamChoice, Values: values}}
			w.limit = min(w.limit, n)
		case model.StrategyRandom:
			spec.Strategy, spec.Space = model.StrategyRandom, []model.SearchParam{{Name: "lr", Kind: model.ParamUniform, Lo: 0.001, Hi: 0.1}}
		default:
			// Successive halving over epochs 1 to 9 (rungs at 1 and 3):
			// the controller stops the trials below a rung's cut.
			spec.Strategy, spec.Space = model.StrategyHalving, []model.SearchParam{{Name: "lr", Kind: model.ParamUniform, Lo: 0.001, Hi: 0.1}}
			spec.Halving = &model.Halving{Resource: "epochs", MinResource: 1, MaxResource: 9, Eta: 3}
		}
		if ps := studies.Normalize(&spec, tasks.Direction); len(ps) > 0 {
			t.Fatalf("the study drawn is refused: %v", ps)
		}
		w.study = &model.Study{ID: model.NewID(), TenantID: w.tenant, ProjectID: w.project, OwnerID: w.owner, GroupID: w.group,
			ComputeResourceID: w.resource, Name: "sweep", BaseTaskID: w.base, Spec: spec, State: model.StudyRunning, CreatedAt: w.now, UpdatedAt: w.now}
		must(t, w.st.CreateStudy(w.ctx, w.study))
		for round := 0; ; round++ {
			if round == maxRounds {
				t.Fatalf("the study is still running after %d rounds", round)
			}
			w.now = w.now.Add(time.Minute)
			w.advance()
			if w.refusedIn == w.pass || rapid.Bool().Draw(t, "second pass") {
				// Another replica's pass right after changes nothing,
				// unless the first had an enqueue refused: the trial
				// failed after the pass had decided, so the next pass
				// fills its place (or ends the study).
				refused := w.refusedIn == w.pass
				clones, stops := w.clones, len(w.stopped)
				w.advance()
				if !refused && (w.clones != clones || len(w.stopped) != stops) {
					t.Fatalf("a second pass with nothing changed enqueued %d and stopped %d", w.clones-clones, len(w.stopped)-stops)
				}
			}
			st, err := w.st.GetStudy(w.ctx, w.tenant, w.study.ID)
			must(t, err)
			if st.State.Final() {
				w.checkEnd(st)
				return
			}
			w.moveTasks(round >= forceFinalRound)
		}
	})
}

func (w *world) advance() {
	w.pass++
	if err := w.s.ReconcileStudies(w.ctx); err != nil {
		w.t.Fatalf("pass %d: %v", w.pass, err)
	}
	w.checkPass()
}

// checkPass checks what holds after every pass.
func (w *world) checkPass() {
	t := w.t
	st, err := w.st.GetStudy(w.ctx, w.tenant, w.study.ID)
	must(t, err)
	trials, err := w.st.ListStudyTrials(w.ctx, w.tenant, w.study.ID)
	must(t, err)
	if len(trials) > w.limit {
		t.Fatalf("after pass %d the study has %d trials, more than the %d it may make", w.pass, len(trials), w.limit)
	}
	active := 0
	for i, tr := range trials {
		if tr.Number != i || tr.TaskID != w.tasks[i] {
			t.Fatalf("after pass %d trial %d (number %d) has task %q, enqueued %q", w.pass, i, tr.Number, tr.TaskID, w.tasks[i])
		}
		// The trial follows its task.
		var want model.TrialState
		switch {
		case w.refused[i]:
			want = model.TrialFailed
		case w.stopped[tr.TaskID] != 0:
			// The controller stopped its task: successive halving
			// stopped the trial early.
			want = model.TrialStoppedEarly
		case tr.TaskID == "":
			t.Fatalf("after pass %d trial %d is %s with no task and no refusal", w.pass, i, tr.State)
		default:
			switch s := w.status(tr.TaskID); s {
			case model.TaskCompleted:
				want = model.TrialCompleted
			case model.TaskFailed:
				want = model.TrialFailed
			case model.TaskAborted:
				want = model.TrialAborted
			default:
				want = model.TrialRunning
			}
		}
		if tr.State != want {
			t.Fatalf("after pass %d trial %d is %s, want %s (task %s)", w.pass, i, tr.State, want, tr.TaskID)
		}
		if !tr.State.Final() {
			active++
		}
	}
	if open := w.open(); open != active || active > st.Spec.MaxConcurrent {
		t.Fatalf("after pass %d %d trials are active and %d of their tasks open, at most %d at once", w.pass, active, open, st.Spec.MaxConcurrent)
	}
	// The pass filled the concurrency while the budget lasts, and the
	// study ends when nothing is active; but a trial refused as it was
	// enqueued failed after the pass had decided, so the next pass does.
	if w.refusedIn == w.pass {
		return
	}
	if active != min(st.Spec.MaxConcurrent, active+w.limit-len(trials)) {
		t.Fatalf("after pass %d %d trials are active of %d at once, with %d of %d made", w.pass, active, st.Spec.MaxConcurrent, len(trials), w.limit)
	}
	if (active == 0) != (st.State == model.StudyCompleted) || (st.State != model.StudyCompleted && st.State != model.StudyRunning) {
		t.Fatalf("after pass %d the study is %s (%s) with %d trials active", w.pass, st.State, st.Reason, active)
	}
}

// checkEnd: a study that ended made every trial it may, ended them all,
// and stopped no task unless successive halving stopped its trial (checkPass).
func (w *world) checkEnd(st *model.Study) {
	trials, err := w.st.ListStudyTrials(w.ctx, w.tenant, st.ID)
	must(w.t, err)
	if st.State != model.StudyCompleted || len(trials) != w.limit || st.FinishedAt == nil {
		w.t.Fatalf("the study ended %s (%s) with %d trials, want completed with %d", st.State, st.Reason, len(trials), w.limit)
	}
	for _, tr := range trials {
		if !tr.State.Final() || (tr.TaskID != "" && !w.status(tr.TaskID).Final()) {
			w.t.Fatalf("the study ended with trial %d %s", tr.Number, tr.State)
		}
	}
	if len(w.stopped) != 0 && st.Spec.Strategy != model.StrategyHalving {
		w.t.Fatalf("a %s study stopped tasks %v", st.Spec.Strategy, w.stopped)
	}
}

// moveTasks plays the workers: each open trial task stays, runs, or ends
// (completed with a loss, failed, or aborted by someone), as rapid draws;
// force ends them all.
func (w *world) moveTasks(force bool) {
	for n := range len(w.tasks) + countTrue(w.refused) {
		id, ok := w.tasks[n]
		if !ok {
			continue
		}
		task, err := w.st.GetTask(w.ctx, w.tenant, id)
		must(w.t, err)
		if task.Status.Final() {
			continue
		}
		lo := 0
		if force {
			lo = 2
		}
		switch rapid.IntRange(lo, 4).Draw(w.t, fmt.Sprintf("move trial %d", n)) {
		case 0:
			continue
		case 1:
			// It runs, and reports the objective at its next epoch.
			task.Status, task.Reason = model.TaskRunning, "running"
			if w.steps[n] < 9 {
				w.steps[n]++
				loss := float64(rapid.IntRange(0, 100).Draw(w.t, fmt.Sprintf("loss of trial %d at %d", n, w.steps[n]))) / 10
				must(w.t, w.st.AppendMetrics(w.ctx, w.tenant, id, 1, []model.MetricPoint{{At: w.now, Name: "loss", Value: loss, Step: w.steps[n]}}))
			}
		case 2:
			task.Status, task.Reason, task.FinishedAt = model.TaskCompleted, "exit 0", ptr(w.now)
			loss := float64(rapid.IntRange(0, 100).Draw(w.t, fmt.Sprintf("loss of trial %d", n))) / 10
			must(w.t, w.st.AppendMetrics(w.ctx, w.tenant, id, 1, []model.MetricPoint{{At: w.now, Name: "loss", Value: loss, Step: w.steps[n] + 1}}))
		case 3:
			task.Status, task.Reason, task.FinishedAt = model.TaskFailed, "exit 1", ptr(w.now)
		case 4:
			task.Status, task.Reason, task.FinishedAt = model.TaskAborted, "aborted by ops", ptr(w.now)
		}
		task.UpdatedAt = w.now
		must(w.t, w.st.UpdateTask(w.ctx, task))
	}
}
