package pipelines_test

import (
	"context"
	"errors"
	"fmt"
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

// The world of the controller's property tests (controller_property_test.go):
// the graph drawn, the store and identities the cases share, and the test's
// enqueue path, which checks every enqueue as it happens.

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
	w.p = pipelines.New(w.k, pipelines.Deps{Tasks: pipelines.TaskPath{Check: w.check, Enqueue: w.enqueue, Abort: w.abort, AbortAsSystem: w.abortAsSystem}})
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
