package pipelines_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

// The controller's property test (issue 21). The controller under test is
// production's: StartRun, AdvancePipelines and every step move go through
// the domain and a real store (a private in-memory SQLite database per
// case, migrated as in production). What stands in is the tasks domain's
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

// graph is a pipeline as the test drew it.
type graph struct {
	def *model.PipelineDefinition
	// deps are each step's dependencies, as drawn (dependsOn and
	// templates).
	deps map[string][]string
	// metricDeps and artifactDeps are the dependencies a step reaches
	// through a {{steps.D.metrics.loss}} or {{steps.D.artifacts.model}}
	// template.
	metricDeps, artifactDeps map[string][]string
	usesLR                   map[string]bool
	lr                       string
	steps                    map[string]*model.PipelineStepDef
}

func (g *graph) stops(step string) bool { return g.steps[step].OnFailure != model.FailureContinue }

// drawGraph draws 1 to 8 steps (with the step cache off, or on for
// some when cache is true) with random edges that all point back in a
// random topological order, each step with a random failure policy and
// retry count, its dependencies named by dependsOn or by templates, and
// the definition's order shuffled.
func drawGraph(t *rapid.T, name string, cache bool) *graph {
	n := rapid.IntRange(1, 8).Draw(t, "steps")
	names := rapid.Permutation([]string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}).Draw(t, "names")[:n]
	g := &graph{def: &model.PipelineDefinition{Name: name, Params: map[string]string{"lr": "0.1"}},
		deps: map[string][]string{}, metricDeps: map[string][]string{}, artifactDeps: map[string][]string{},
		usesLR: map[string]bool{}, lr: "0.1", steps: map[string]*model.PipelineStepDef{}}
	off := false
	for i, name := range names {
		st := model.PipelineStepDef{Name: name, ComputeResource: rapid.SampledFrom([]string{"small", "big"}).Draw(t, name+" resource"),
			OnFailure: rapid.SampledFrom([]string{"", model.FailureStop, model.FailureContinue}).Draw(t, name+" onFailure"),
			Retry:     rapid.IntRange(0, 2).Draw(t, name+" retry"), Cache: &off,
			Spec: model.TaskSpec{Command: []string{"python", "train.py"}, Parameters: map[string]string{}}}
		if cache && rapid.Bool().Draw(t, name+" cache") {
			st.Cache = nil // on
		}
		if rapid.Bool().Draw(t, name+" uses lr") {
			st.Spec.Parameters["lr"] = "{{params.lr}}"
			g.usesLR[name] = true
		}
		for _, d := range names[:i] {
			switch rapid.IntRange(0, 5).Draw(t, "edge "+d+"→"+name) {
			case 3:
				st.DependsOn = append(st.DependsOn, d)
			case 4:
				st.Spec.Parameters["loss_"+d] = "{{steps." + d + ".metrics.loss}}"
				g.metricDeps[name] = append(g.metricDeps[name], d)
			case 5:
				if st.Inputs == nil {
					st.Inputs = map[string]string{}
				}
				st.Inputs["in_"+d] = "{{steps." + d + ".artifacts.model}}"
				g.artifactDeps[name] = append(g.artifactDeps[name], d)
			default:
				continue
			}
			g.deps[name] = append(g.deps[name], d)
		}
		g.def.Steps = append(g.def.Steps, st)
	}
	g.def.Steps = rapid.Permutation(g.def.Steps).Draw(t, "definition order")
	for i := range g.def.Steps {
		g.steps[g.def.Steps[i].Name] = &g.def.Steps[i]
	}
	return g
}

// taskRec is what the test knows of a task the controller enqueued.
type taskRec struct {
	id, step, key string
	attempt       int
	pass          int
	// loss is the metric the task reported when it completed.
	loss float64
}

// enqueueRec is one call of the enqueue path.
type enqueueRec struct {
	pass    int
	step    string
	attempt int
	key     string
	taskID  string
	replay  bool
	refused bool
}

// fixture is what every case shares: one store (a private in-memory SQLite
// database, migrated as in production; opening one takes longer than a
// case) with a tenant, the runs' owner, their group and project.
type fixture struct {
	st                            store.Store
	tenant, owner, group, project string
	// ownerCtx acts as the owner, as their credential would.
	ownerCtx  context.Context
	resources map[string]string
	// cases numbers the cases, for a pipeline name of each: runs of one
	// name in one project share a step cache.
	cases int
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
	e := &fixture{st: st, resources: map[string]string{"small": model.NewID(), "big": model.NewID()}}
	tn := &model.Tenant{ID: model.NewID(), Name: "default", CreatedAt: now}
	check(st.CreateTenant(ctx, tn))
	u := &model.User{ID: model.NewID(), TenantID: tn.ID, Name: "rita", Role: model.RoleMember, CreatedAt: now, UpdatedAt: now}
	check(st.CreateUser(ctx, u))
	gr := &model.Group{ID: model.NewID(), TenantID: tn.ID, Name: "research", CreatedAt: now, UpdatedAt: now}
	check(st.CreateGroup(ctx, gr))
	check(st.PutMembership(ctx, &model.Membership{TenantID: tn.ID, GroupID: gr.ID, UserID: u.ID, Role: model.GroupRoleMember, CreatedAt: now}))
	pr := &model.Project{ID: model.NewID(), TenantID: tn.ID, Name: "fraud", GroupID: gr.ID, CreatedAt: now, UpdatedAt: now}
	check(st.CreateProject(ctx, pr))
	p, err := identity.LoadPrincipal(ctx, st, tn.ID, u.ID)
	check(err)
	e.tenant, e.owner, e.group, e.project, e.ownerCtx = tn.ID, u.ID, gr.ID, pr.ID, identity.WithPrincipal(ctx, p)
	return e
}

// world is one case: the domain over the shared store, with its own
// clock, and the test's enqueue path.
type world struct {
	*fixture
	t     *rapid.T
	ctx   context.Context
	k     *kernel.Kernel
	p     *pipelines.Pipelines
	g     *graph
	now   time.Time
	runID string

	// pass counts the controller's passes; stopAt is the first pass that
	// must see a step that failed for good under the stop policy (0:
	// none yet).
	pass, stopAt int
	enqueues     []enqueueRec
	byKey        map[string]*taskRec
	tasks        map[string]*taskRec
	stepTasks    map[string][]string
	// refused is, for a step whose enqueue was refused, the attempt
	// refused.
	refused map[string]int
	// aborts are the tasks the controller aborted, with the pass.
	aborts map[string]int
	checks int
	// specs are the specs the steps' tasks were enqueued with; earlier
	// is the case's run before this one (nil for its first), and
	// earlierSpecs its specs, for the step cache.
	specs        map[string]model.TaskSpec
	earlier      *model.PipelineRun
	earlierSpecs map[string]model.TaskSpec
}

func newWorld(t *rapid.T, e *fixture, g *graph) *world {
	w := &world{fixture: e, t: t, ctx: context.Background(), g: g, now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		byKey: map[string]*taskRec{}, tasks: map[string]*taskRec{}, stepTasks: map[string][]string{},
		refused: map[string]int{}, aborts: map[string]int{}, specs: map[string]model.TaskSpec{}}
	// A case that failed (rapid then shrinks it) can leave its run
	// active; end it, so this case's passes see only this case's run.
	ids, err := e.st.ListActivePipelineRuns(w.ctx, e.tenant)
	must(t, err)
	for _, id := range ids {
		_, err := e.st.SetPipelineRunState(w.ctx, e.tenant, id, []model.PipelineRunState{model.PipelineRunPending, model.PipelineRunRunning},
			model.PipelineRunAborted, "an earlier case failed", w.now)
		must(t, err)
	}
	w.k = kernel.New(kernel.Options{Store: e.st, Now: func() time.Time { return w.now }})
	w.p = pipelines.New(w.k)
	w.p.SetTasks(pipelines.TaskPath{Check: w.check, Enqueue: w.enqueue, Abort: w.abort, AbortAsSystem: w.abortAsSystem})
	return w
}

func must(t *rapid.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// asOwner fails the case when ctx does not act as the run's owner.
func (w *world) asOwner(ctx context.Context, what string) {
	p, ok := identity.PrincipalFrom(ctx)
	if !ok || p.UserID != w.owner || p.TenantID != w.tenant {
		w.t.Errorf("%s not as the run's owner: %+v", what, p)
	}
}

func (w *world) check(ctx context.Context, t pipelines.StepTask) (*model.Task, error) {
	w.asOwner(ctx, "a step checked")
	w.checks++
	id, ok := w.resources[t.ComputeResource]
	if !ok {
		return nil, kernel.Invalid("no compute resource %q", t.ComputeResource)
	}
	return &model.Task{TenantID: w.tenant, ProjectID: w.project, GroupID: w.group, ComputeResourceID: id, Name: t.Name, Spec: t.Spec}, nil
}

// enqueue is the test's enqueue path: it checks the call against the
// graph and what the tasks did (the properties that hold at the moment of
// an enqueue), keeps the idempotency key as the tasks domain does, refuses
// one enqueue in ten as the tasks domain would a compute resource the
// owner lost, and writes the task's row.
func (w *world) enqueue(ctx context.Context, t pipelines.StepTask) (*model.Task, error) {
	w.asOwner(ctx, "a step enqueued")
	step, ok := strings.CutPrefix(t.Name, w.g.def.Name+"/")
	def := w.g.steps[step]
	prefix := "pipeline-" + w.runID + "-" + step + "-"
	attempt, err := strconv.Atoi(strings.TrimPrefix(t.IdempotencyKey, prefix))
	if !ok || def == nil || !strings.HasPrefix(t.IdempotencyKey, prefix) || err != nil {
		w.t.Fatalf("enqueue of task %q with key %q: not a step attempt of run %s", t.Name, t.IdempotencyKey, w.runID)
	}
	rec := enqueueRec{pass: w.pass, step: step, attempt: attempt, key: t.IdempotencyKey}
	if prev := w.byKey[t.IdempotencyKey]; prev != nil {
		rec.replay, rec.taskID = true, prev.id
		w.enqueues = append(w.enqueues, rec)
		return w.st.GetTask(ctx, w.tenant, prev.id)
	}
	// (1) Every dependency's task completed before the step's is enqueued.
	for _, d := range w.g.deps[step] {
		if id := w.depTask(d); id == "" || w.status(id) != model.TaskCompleted {
			w.t.Fatalf("pass %d enqueued %s (attempt %d) before its dependency %s completed (its tasks %v)", w.pass, step, attempt, d, w.statuses(d))
		}
	}
	// (2) One attempt after another, the next only once the last failed,
	// and no more than 1 + retry.
	prev := w.stepTasks[step]
	switch {
	case attempt != len(prev)+1:
		w.t.Fatalf("pass %d enqueued attempt %d of %s, which has %d tasks", w.pass, attempt, step, len(prev))
	case attempt > 1+def.Retry:
		w.t.Fatalf("pass %d enqueued attempt %d of %s, whose retry is %d", w.pass, attempt, step, def.Retry)
	case len(prev) > 0 && w.status(prev[len(prev)-1]) != model.TaskFailed:
		w.t.Fatalf("pass %d enqueued attempt %d of %s while its last task is %s", w.pass, attempt, step, w.status(prev[len(prev)-1]))
	}
	// (3) Nothing new after a stop-policy failure the pass has seen.
	if w.stopAt != 0 && w.pass >= w.stopAt {
		w.t.Fatalf("pass %d enqueued %s (attempt %d) after a step failed for good under the stop policy (seen from pass %d)", w.pass, step, attempt, w.stopAt)
	}
	if p := w.specProblem(step, t); p != "" {
		w.t.Fatalf("pass %d enqueued %s: %s", w.pass, step, p)
	}
	// The step cache: a first attempt is not enqueued when the earlier
	// run's step completed with the spec this one has.
	if attempt == 1 && w.reusable(step) {
		w.t.Fatalf("pass %d enqueued %s, which could reuse run %s's task %s", w.pass, step, w.earlier.ID, w.earlier.Step(step).TaskID)
	}
	if rapid.IntRange(0, 9).Draw(w.t, "refuse "+t.IdempotencyKey) == 0 {
		rec.refused = true
		w.enqueues = append(w.enqueues, rec)
		w.refused[step] = attempt
		if w.g.stops(step) && w.stopAt == 0 {
			w.stopAt = w.pass
		}
		return nil, kernel.Forbidden("compute resource %q is not open to rita any more", t.ComputeResource)
	}
	task := &model.Task{ID: model.NewID(), TenantID: w.tenant, ProjectID: w.project, OwnerID: w.owner, ComputeResourceID: t.ComputeResource,
		GroupID: w.group, Name: t.Name, Spec: t.Spec, Status: model.TaskQueued, Reason: "waiting for a pool", CreatedAt: w.now, UpdatedAt: w.now}
	if err := w.st.CreateTask(ctx, task); err != nil {
		return nil, fmt.Errorf("create the task: %w", err)
	}
	tr := &taskRec{id: task.ID, step: step, key: t.IdempotencyKey, attempt: attempt, pass: w.pass}
	w.byKey[t.IdempotencyKey], w.tasks[task.ID] = tr, tr
	w.stepTasks[step] = append(w.stepTasks[step], task.ID)
	w.specs[step] = t.Spec
	rec.taskID = task.ID
	w.enqueues = append(w.enqueues, rec)
	return task, nil
}

// specProblem says what is wrong with a step's task, "" when it goes to
// the step's compute resource with its templates filled from the run's
// parameter and its dependencies' tasks (their metric, their artifacts by
// reference).
func (w *world) specProblem(step string, t pipelines.StepTask) string {
	def := w.g.steps[step]
	if t.ComputeResource != w.resources[def.ComputeResource] || t.Project != w.project {
		return fmt.Sprintf("on %q in project %q, want %s's %q in %q", t.ComputeResource, t.Project, def.ComputeResource, w.resources[def.ComputeResource], w.project)
	}
	if w.g.usesLR[step] && t.Spec.Parameters["lr"] != w.g.lr {
		return fmt.Sprintf("lr %q, want the run's %q", t.Spec.Parameters["lr"], w.g.lr)
	}
	for _, d := range w.g.deps[step] {
		if w.depTask(d) == "" {
			return "its dependency " + d + " has no task"
		}
	}
	for _, d := range w.g.metricDeps[step] {
		want := strconv.FormatFloat(w.tasks[w.depTask(d)].loss, 'g', -1, 64)
		if got := t.Spec.Parameters["loss_"+d]; got != want {
			return fmt.Sprintf("loss_%s %q, want %s's loss %s", d, got, d, want)
		}
	}
	var want []model.ArtifactInput
	for _, d := range w.g.artifactDeps[step] {
		want = append(want, model.ArtifactInput{Name: "in_" + d, TaskID: w.depTask(d), Artifact: "model"})
	}
	slices.SortFunc(want, func(a, b model.ArtifactInput) int { return strings.Compare(a.Name, b.Name) })
	if !slices.Equal(t.Spec.Inputs, want) {
		return fmt.Sprintf("inputs %+v, want %+v", t.Spec.Inputs, want)
	}
	return ""
}

// depTask is the task whose outputs a dependency gives its dependants:
// its last task, or the earlier run's task it reuses ("" for none).
func (w *world) depTask(d string) string {
	if ts := w.stepTasks[d]; len(ts) > 0 {
		return ts[len(ts)-1]
	}
	if st := w.run().Step(d); st.State == model.StepCached {
		return st.TaskID
	}
	return ""
}

// reusable reports whether a step of this run may reuse the earlier
// run's: its cache is on, and the earlier run's step completed with the
// spec this one's task would have now.
func (w *world) reusable(step string) bool {
	if w.earlier == nil || !w.g.steps[step].CacheOn() || w.earlier.Step(step).State != model.StepCompleted {
		return false
	}
	def := w.g.steps[step]
	return w.specProblem(step, pipelines.StepTask{ComputeResource: w.resources[def.ComputeResource], Project: w.project, Spec: w.earlierSpecs[step]}) == ""
}

// abort is the abort path as a caller: only the owner's controller calls
// it here, on a task that has not ended.
func (w *world) abort(ctx context.Context, id, reason string) (*model.Task, error) {
	w.asOwner(ctx, "a task aborted")
	if w.tasks[id] == nil {
		w.t.Fatalf("pass %d aborted task %s, which no step of the run enqueued", w.pass, id)
	}
	task, err := w.st.GetTask(ctx, w.tenant, id)
	if err != nil {
		return nil, err
	}
	if task.Status.Final() {
		return nil, kernel.Conflict("task %s has already ended (%s)", id, task.Status)
	}
	if _, dup := w.aborts[id]; dup {
		w.t.Fatalf("task %s aborted twice", id)
	}
	w.aborts[id] = w.pass
	task.Status, task.Reason, task.FinishedAt, task.UpdatedAt = model.TaskAborted, "aborted by rita: "+reason, ptr(w.now), w.now
	return task, w.st.UpdateTask(ctx, task)
}

func (w *world) abortAsSystem(_ context.Context, _, id, _, _ string) (*model.Task, error) {
	w.t.Fatalf("task %s aborted on the system's authority while the owner can act", id)
	return nil, errors.New("unreachable")
}

func ptr[T any](v T) *T { return &v }

func (w *world) status(taskID string) model.TaskStatus {
	task, err := w.st.GetTask(w.ctx, w.tenant, taskID)
	must(w.t, err)
	return task.Status
}

func (w *world) statuses(step string) []model.TaskStatus {
	var out []model.TaskStatus
	for _, id := range w.stepTasks[step] {
		out = append(out, w.status(id))
	}
	return out
}

func (w *world) run() *model.PipelineRun {
	r, err := w.st.GetPipelineRun(w.ctx, w.tenant, w.runID)
	must(w.t, err)
	return r
}

// advance runs one controller pass.
func (w *world) advance() {
	w.pass++
	if err := w.p.AdvancePipelines(w.ctx); err != nil {
		w.t.Fatalf("pass %d: %v", w.pass, err)
	}
}

// TestControllerOverRandomRuns (issue 21): over random graphs and random
// task outcomes, the controller never enqueues a step before its
// dependencies completed, enqueues each step at most 1 + retry times (one
// task, one idempotency key per attempt, the next only after the last
// failed), skips what follows a failure, stops everything at once after a
// stop-policy failure, and ends the run as its steps say, every step
// ended.
func TestControllerOverRandomRuns(t *testing.T) {
	lowerChecksUnderRace(t)
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
	lowerChecksUnderRace(t)
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

// lowerChecksUnderRace has rapid try 25 cases instead of its default 100
// under the race detector, unless -rapid.checks says how many: a case
// runs on one goroutine, so the detector finds nothing the 100 cases of
// the ordinary run would not, and it makes each case some ten times
// slower.
func lowerChecksUnderRace(t *testing.T) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	f := flag.Lookup("rapid.checks")
	if !raceDetector || given || f == nil {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set("25"); err != nil {
		t.Fatalf("set rapid.checks: %v", err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
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
