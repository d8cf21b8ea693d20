package agents_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/klique-ai/klique/internal/eventually"
)

const studyQuery = `query($id: ID!) { study(id: $id) { id name state reason strategy direction maxConcurrent gpuHours
	trials { number params state objective objectiveStep rung reason taskId }
	best { number params objective taskId } progress { at best trial } } }`

// studyExample reads an example study file as written, as startStudy's
// input, with its base task set.
func studyExample(t *testing.T, file, baseTask string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "examples", "studies", file))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(js, &in); err != nil {
		t.Fatal(err)
	}
	in["baseTask"] = baseTask
	return in
}

// baseRun enqueues examples/studies/train.py as alice, as the examples'
// comments say, and waits for it to complete.
func (e *e2e) baseRun(t *testing.T) string {
	t.Helper()
	return e.completedRun(t, filepath.Join("..", "examples", "studies", "train.py"),
		[]any{"--lr", "{lr}", "--layers", "{layers}", "--epochs", "{epochs}", "--sleep", "0.25"},
		map[string]any{"lr": "0.1", "layers": "2", "epochs": "4"})
}

// completedRun enqueues a Python script with args and parameters as
// alice on 1 GPU, and waits for it to complete: the base run of a study.
func (e *e2e) completedRun(t *testing.T, script string, args []any, params map[string]any) string {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	d := gql(t, e.url, e.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "train", "project": "fraud-models", "computeResource": "1 GPU",
		"command": append([]any{"python3", abs}, args...), "parameters": params,
	}})
	id := str(d, "enqueueTask", "id")
	e.waitTask(t, e.alice, id, "the base run to complete", func(d map[string]any) bool { return str(d, "task", "status") == "COMPLETED" })
	return id
}

// waitStudy polls a study as alice until it has ended, checking on every
// read that no more trials run at once than the study allows.
func (e *e2e) waitStudy(t *testing.T, id string, most int) map[string]any {
	t.Helper()
	var d map[string]any
	if !eventually.Poll(90*time.Second, func() bool {
		d = gql(t, e.url, e.alice, studyQuery, map[string]any{"id": id})
		active := 0
		for _, tr := range get(d, "study", "trials").([]any) {
			if s := str(tr, "state"); s == "PENDING" || s == "RUNNING" {
				active++
			}
		}
		if active > most {
			t.Fatalf("%d trials at once, the most is %d: %v", active, most, d)
		}
		return str(d, "study", "state") != "RUNNING"
	}) {
		t.Fatalf("the study did not end: %v", d)
	}
	return d
}

// TestGridStudyEndToEnd runs examples/studies/study.yaml as written on a
// real control plane and a process-mode worker: every point of the grid
// runs as a clone of the base run, at most two at once, and the best
// trial is the one the script's known objective says (lr 0.1, 3 layers).
func TestGridStudyEndToEnd(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, estate)
	e.startWorker(t, "w1", "0,1")
	base := e.baseRun(t)

	d := gql(t, e.url, e.alice, `mutation($in: StartStudyInput!) { startStudy(input: $in) { id state strategy direction } }`,
		map[string]any{"in": studyExample(t, "study.yaml", base)})
	id := str(d, "startStudy", "id")
	if str(d, "startStudy", "direction") != "MAX" || str(d, "startStudy", "strategy") != "grid" {
		t.Fatalf("started %v", d)
	}
	d = e.waitStudy(t, id, 2)
	if str(d, "study", "state") != "COMPLETED" || str(d, "study", "reason") != "all 6 points of its grid have run" {
		t.Fatalf("study %v", d)
	}
	trials := get(d, "study", "trials").([]any)
	if len(trials) != 6 {
		t.Fatalf("%d trials, want 6", len(trials))
	}
	for _, tr := range trials {
		if str(tr, "state") != "COMPLETED" || get(tr, "objective") == nil || get(tr, "objectiveStep").(float64) != 4 {
			t.Fatalf("trial %v", tr)
		}
	}
	best := get(d, "study", "best")
	if str(best, "params", "lr") != "0.1" || str(best, "params", "layers") != "3" || str(trials[0], "taskId") != str(best, "taskId") {
		t.Fatalf("best %v; ranked first %v", best, trials[0])
	}
	if p := get(d, "study", "progress").([]any); len(p) != 6 || get(p[5], "best") != get(best, "objective") {
		t.Fatalf("progress %v", p)
	}
	// Each trial is an ordinary task of alice's, which says which trial
	// made it.
	task := gql(t, e.url, e.alice, `query($id: ID!) { task(id: $id) { name owner { name } studyTrial { studyId studyName number } } }`,
		map[string]any{"id": str(best, "taskId")})
	if str(task, "task", "owner", "name") != "alice" || str(task, "task", "studyTrial", "studyId") != id ||
		!strings.Contains(str(task, "task", "name"), "lr-layers-grid-") {
		t.Fatalf("the best trial's task %v", task)
	}
}

// TestHalvingStudyEndToEnd runs examples/studies/halving.yaml as written:
// successive halving stops some trials early, with the reason on the
// trial and on its aborted task.
func TestHalvingStudyEndToEnd(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, estate)
	e.startWorker(t, "w1", "0,1")
	base := e.baseRun(t)

	d := gql(t, e.url, e.alice, `mutation($in: StartStudyInput!) { startStudy(input: $in) { id } }`,
		map[string]any{"in": studyExample(t, "halving.yaml", base)})
	id := str(d, "startStudy", "id")
	d = e.waitStudy(t, id, 1)
	if str(d, "study", "state") != "COMPLETED" {
		t.Fatalf("study %v", d)
	}
	best := get(d, "study", "best")
	if best == nil {
		t.Fatalf("no best trial: %v", d)
	}
	stopped := 0
	for _, tr := range get(d, "study", "trials").([]any) {
		if str(tr, "params", "epochs") != "8" {
			t.Fatalf("trial %v does not run at the maximum resource", tr)
		}
		if str(tr, "state") == "COMPLETED" && trainQuality(t, tr) > trainQuality(t, best) {
			t.Fatalf("trial %v is better than the best %v", tr, best)
		}
		if str(tr, "state") != "STOPPED_EARLY" {
			continue
		}
		stopped++
		// Stopped early, at a rung below the 8 epochs it was given (1, 2
		// or 4), and poor: train.py's accuracy at any epoch follows its
		// quality, and the best trial's is higher.
		if !earlyRung.MatchString(str(tr, "reason")) {
			t.Fatalf("trial %v was not stopped at a rung before its 8 epochs", tr)
		}
		if trainQuality(t, tr) >= trainQuality(t, best) {
			t.Fatalf("trial %v was stopped early, but is no worse than the best %v", tr, best)
		}
		why := str(tr, "reason")
		if !strings.HasPrefix(why, "stopped early by study lr-layers-halving at rung ") || !strings.Contains(why, "was below the rung's cut") {
			t.Fatalf("reason %q", why)
		}
		task := e.waitTask(t, e.alice, str(tr, "taskId"), "the stopped trial's task to end", func(d map[string]any) bool {
			return str(d, "task", "status") == "ABORTED"
		})
		if str(task, "task", "reason") != why {
			t.Fatalf("the task's reason %q, the trial's %q", str(task, "task", "reason"), why)
		}
	}
	if stopped == 0 {
		t.Fatalf("no trial was stopped early: %v", d)
	}
}

var earlyRung = regexp.MustCompile(`at rung [1-3] \(epochs [124]\)`)

// trainQuality is examples/studies/train.py's quality for a trial's (or
// the best's) lr and layers: the accuracy it tends to, which orders its
// accuracies at every epoch.
func trainQuality(t *testing.T, trial any) float64 {
	t.Helper()
	lr, err1 := strconv.ParseFloat(str(trial, "params", "lr"), 64)
	layers, err2 := strconv.ParseFloat(str(trial, "params", "layers"), 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("trial %v: lr and layers are not numbers", trial)
	}
	return 0.95 - 0.2*math.Pow(math.Log10(lr)+1, 2) - 0.03*math.Pow(layers-3, 2)
}

// knownScore is testdata/objective.py's score, worked out again from a
// trial's parameters in the same order of operations, so that it is the
// same double the script reported.
func knownScore(t *testing.T, params map[string]any) float64 {
	t.Helper()
	x, err1 := strconv.ParseFloat(str(params, "x"), 64)
	lr, err2 := strconv.ParseFloat(str(params, "lr"), 64)
	n, err3 := strconv.Atoi(str(params, "n"))
	bonus, ok := map[string]float64{"relu": 0, "tanh": -0.05, "gelu": 0.02}[str(params, "act")]
	if err1 != nil || err2 != nil || err3 != nil || !ok {
		t.Fatalf("parameters %v are not the space's", params)
	}
	// Within the space it was drawn from.
	if x < 0 || x > 1 || lr < 0.001 || lr > 0.1 || n < 1 || n > 4 {
		t.Fatalf("parameters %v are outside the space", params)
	}
	return -(x-0.3)*(x-0.3) - 1000.0*(lr-0.01)*(lr-0.01) - 0.01*float64(n-2)*float64(n-2) + bonus
}

// maxOverlap is the most of the intervals [from, to) that hold at one
// instant.
func maxOverlap(from, to []time.Time) int {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for i := range from {
		edges = append(edges, edge{from[i], 1}, edge{to[i], -1})
	}
	// An end before a start at the same instant: [from, to) intervals.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d
	})
	most, n := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	return most
}

// TestRandomStudyEndToEnd runs a random search of 8 trials, 2 at once,
// over testdata/objective.py, whose score is a known function of a
// uniform, a log-uniform, an integer and a choice parameter: all 8 trials
// run and complete within the space, never more than 2 at once (sampled
// while it runs, and from the trials' tasks' times), each reports the
// score its parameters give, and the study's best trial is the one with
// the highest score, the ranking best first.
func TestRandomStudyEndToEnd(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, estate)
	e.startWorker(t, "w1", "0,1")
	base := e.completedRun(t, filepath.Join("testdata", "objective.py"),
		[]any{"x={x}", "lr={lr}", "n={n}", "act={act}"}, map[string]any{"x": "0.5", "lr": "0.05", "n": "1", "act": "relu"})

	d := gql(t, e.url, e.alice, `mutation($in: StartStudyInput!) { startStudy(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "random-search", "baseTask": base, "strategy": "random", "seed": 11,
		"objective": "score", "direction": "MAX", "maxConcurrent": 2, "budget": map[string]any{"trials": 8},
		"space": []any{
			map[string]any{"name": "x", "kind": "uniform", "lo": 0, "hi": 1},
			map[string]any{"name": "lr", "kind": "loguniform", "lo": 0.001, "hi": 0.1},
			map[string]any{"name": "n", "kind": "int", "lo": 1, "hi": 4},
			map[string]any{"name": "act", "kind": "choice", "values": []any{"relu", "tanh", "gelu"}},
		},
	}})
	id := str(d, "startStudy", "id")
	d = e.waitStudy(t, id, 2)
	if str(d, "study", "state") != "COMPLETED" {
		t.Fatalf("study %v", d)
	}
	trials := get(d, "study", "trials").([]any)
	if len(trials) != 8 {
		t.Fatalf("%d trials, want 8: %v", len(trials), d)
	}
	var from, to []time.Time
	xs := map[string]bool{}
	bestNumber, bestScore := -1, math.Inf(-1)
	for i, tr := range trials {
		if str(tr, "state") != "COMPLETED" {
			t.Fatalf("trial %v did not complete", tr)
		}
		params := get(tr, "params").(map[string]any)
		want := knownScore(t, params)
		if got, ok := get(tr, "objective").(float64); !ok || got != want {
			t.Fatalf("trial %v reports %v, its parameters give %v", tr, get(tr, "objective"), want)
		}
		if i > 0 && get(trials[i-1], "objective").(float64) < want {
			t.Fatalf("the ranking is not best first: %v before %v", trials[i-1], tr)
		}
		if want > bestScore {
			bestNumber, bestScore = int(get(tr, "number").(float64)), want
		}
		xs[str(params, "x")] = true

		task := gql(t, e.url, e.alice, `query($id: ID!) { task(id: $id) { status createdAt finishedAt studyTrial { studyId } } }`,
			map[string]any{"id": str(tr, "taskId")})
		created, err1 := time.Parse(time.RFC3339Nano, str(task, "task", "createdAt"))
		finished, err2 := time.Parse(time.RFC3339Nano, str(task, "task", "finishedAt"))
		if err1 != nil || err2 != nil || str(task, "task", "status") != "COMPLETED" || str(task, "task", "studyTrial", "studyId") != id {
			t.Fatalf("trial %v's task %v", tr, task)
		}
		from, to = append(from, created), append(to, finished)
	}
	if len(xs) < 2 {
		t.Fatalf("8 random trials drew one x: %v", trials)
	}
	// A trial's task is enqueued only after the study saw another end, so
	// the tasks' lives, from enqueue to end, overlap two at a time at most.
	if n := maxOverlap(from, to); n != 2 {
		t.Fatalf("at most %d trials' tasks at once, want 2 (the study's maximum, reached by its first two)", n)
	}
	best := get(d, "study", "best")
	if int(get(best, "number").(float64)) != bestNumber || get(best, "objective").(float64) != bestScore ||
		str(trials[0], "taskId") != str(best, "taskId") {
		t.Fatalf("best %v, want trial %d (score %v); ranked first %v", best, bestNumber, bestScore, trials[0])
	}
}
