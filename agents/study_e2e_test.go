package agents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
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
	script, err := filepath.Abs(filepath.Join("..", "examples", "studies", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	d := gql(t, e.url, e.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "train", "project": "fraud-models", "computeResource": "1 GPU",
		"command":    []any{"python3", script, "--lr", "{lr}", "--layers", "{layers}", "--epochs", "{epochs}", "--sleep", "0.25"},
		"parameters": map[string]any{"lr": "0.1", "layers": "2", "epochs": "4"},
	}})
	id := str(d, "enqueueTask", "id")
	e.waitTask(t, e.alice, id, "the base run to complete", func(d map[string]any) bool { return str(d, "task", "status") == "COMPLETED" })
	return id
}

// waitStudy polls a study as alice until it has ended, checking on every
// read that no more trials run at once than the study allows.
func (e *e2e) waitStudy(t *testing.T, id string, most int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		d := gql(t, e.url, e.alice, studyQuery, map[string]any{"id": id})
		active := 0
		for _, tr := range get(d, "study", "trials").([]any) {
			if s := str(tr, "state"); s == "PENDING" || s == "RUNNING" {
				active++
			}
		}
		if active > most {
			t.Fatalf("%d trials at once, the most is %d: %v", active, most, d)
		}
		if s := str(d, "study", "state"); s != "RUNNING" {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the study did not end: %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	stopped := 0
	for _, tr := range get(d, "study", "trials").([]any) {
		if str(tr, "params", "epochs") != "8" {
			t.Fatalf("trial %v does not run at the maximum resource", tr)
		}
		if str(tr, "state") != "STOPPED_EARLY" {
			continue
		}
		stopped++
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
	if get(d, "study", "best") == nil {
		t.Fatalf("no best trial: %v", d)
	}
}
