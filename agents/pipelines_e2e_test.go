package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

// pipelineEstate has two compute resources of group ml-research on one
// pool (process-mode workers run whole GPUs only): 1 GPU and 1 A100, as examples/estate.yaml names them,
// and a second group whose member must not see ml-research's runs.
var pipelineEstate = newEstate().profile("one-gpu", "bare-metal").profile("one-a100", "bare-metal").
	policy("ml-research", 2, 2, "1 GPU=one-gpu", "1 A100=one-a100").policy("vision", 0, 1, "vision GPU=one-gpu").
	project("{name: fraud-models, group: ml-research}").project("{name: vision-detect, group: vision}").String()

const runFields = `id name state reason steps { name state reason attempts taskId taskIds cachedFromRunId computeResourceName dependsOn level onFailure retry }`

func runPipeline(t *testing.T, e *e2e, cred, def string, params map[string]any) map[string]any {
	t.Helper()
	d := gql(t, e.url, cred, `mutation($in: RunPipelineInput!) { runPipeline(input: $in) { `+runFields+` } }`,
		map[string]any{"in": map[string]any{"definition": def, "params": params}})
	return get(d, "runPipeline").(map[string]any)
}

// waitRun polls a run until it is in state, and returns it.
func waitRun(t *testing.T, e *e2e, cred, id, state string) map[string]any {
	t.Helper()
	return waitRunFor(t, e, cred, id, state, func(map[string]any) bool { return true })
}

// waitRunFor polls a run until it is in state and cond holds of it, and
// returns it.
func waitRunFor(t *testing.T, e *e2e, cred, id, state string, cond func(run map[string]any) bool) map[string]any {
	t.Helper()
	var run map[string]any
	if !eventually.Poll(60*time.Second, func() bool {
		run = get(gql(t, e.url, cred, `query($id: ID!) { pipelineRun(id: $id) { `+runFields+` } }`, map[string]any{"id": id}), "pipelineRun").(map[string]any)
		return str(run, "state") == state && cond(run)
	}) {
		for _, st := range steps(run) {
			if tid := str(st, "taskId"); tid != "" {
				t.Logf("step %s: %v", str(st, "name"), gql(t, e.url, cred, `query($id: ID!) { task(id: $id) { status reason } }`, map[string]any{"id": tid}))
			}
		}
		t.Fatalf("waiting for pipeline run %s to be %s: %v", id, state, run)
	}
	return run
}

func steps(run map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	ss, _ := run["steps"].([]any)
	for _, s := range ss {
		m := s.(map[string]any)
		out[str(m, "name")] = m
	}
	return out
}

// TestPipelineEndToEnd runs examples/pipelines/pipeline.yaml as written on
// a real control plane and a process-mode worker: prepare on 1 GPU,
// train on 1 A100 with prepare's artifact (by reference: the worker
// fetches it, and train reads it) and metric,
// evaluate with train's metric; then the same run again, all of it from
// the step cache.
func TestPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, pipelineEstate)
	_, logs := e.startWorker(t, "pipeline-host", "0,1")
	def, err := os.ReadFile(filepath.Join("..", "examples", "pipelines", "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run := runPipeline(t, e, e.alice, string(def), nil)
	if str(run, "state") != "PENDING" || len(steps(run)) != 3 {
		t.Fatalf("a new run: %v", run)
	}
	run = waitRun(t, e, e.alice, str(run, "id"), "COMPLETED")
	ss := steps(run)
	for _, n := range []string{"prepare", "train", "evaluate"} {
		if str(ss[n], "state") != "COMPLETED" || get(ss[n], "attempts") != 1.0 {
			t.Fatalf("step %s: %v\nworker log:\n%s", n, ss[n], logs)
		}
	}
	if str(ss["prepare"], "computeResourceName") != "1 GPU" || str(ss["train"], "computeResourceName") != "1 A100" ||
		get(ss["evaluate"], "level") != 2.0 {
		t.Fatalf("steps %v", ss)
	}
	ctx := context.Background()
	train, err := e.app.Store.GetTask(ctx, e.tenant, str(ss["train"], "taskId"))
	if err != nil {
		t.Fatal(err)
	}
	// The artifact by reference, the metric by its final value, the
	// parameter from the pipeline's default.
	if in := train.Spec.Inputs; len(in) != 1 || in[0].Name != "dataset" || in[0].TaskID != str(ss["prepare"], "taskId") || in[0].Artifact != "dataset" {
		t.Fatalf("train's inputs %+v", in)
	}
	if p := train.Spec.Parameters; p["rows"] != "1000" || p["lr"] != "0.1" || p["epochs"] != "3" {
		t.Fatalf("train's parameters %v", p)
	}
	// The worker fetched the artifact prepare published for train, which
	// read it at $KLIQUE_INPUT_DATASET.
	e.waitTask(t, e.alice, train.ID, "train's log", func(d map[string]any) bool {
		return strings.Contains(logText(d), "training on 1000 rows for 3 epochs at lr 0.1, header id,amount,label")
	})
	evaluate, err := e.app.Store.GetTask(ctx, e.tenant, str(ss["evaluate"], "taskId"))
	if err != nil || evaluate.Spec.Parameters["accuracy"] != "0.93" || evaluate.Name != "fraud-train/evaluate" {
		t.Fatalf("evaluate %+v, %v", evaluate, err)
	}
	d := e.waitTask(t, e.alice, evaluate.ID, "evaluate's log", func(d map[string]any) bool {
		return strings.Contains(logText(d), "evaluated: accuracy 0.93")
	})
	_ = d
	link := gql(t, e.url, e.alice, `query($id: ID!) { task(id: $id) { pipelineStep { runId step attempt } } }`, map[string]any{"id": train.ID})
	if str(link, "task", "pipelineStep", "runId") != str(run, "id") || str(link, "task", "pipelineStep", "step") != "train" {
		t.Fatalf("train's task says %v", link)
	}

	// The same pipeline again: every step's code, parameters and inputs
	// match, so every step reuses the first run's task.
	again := waitRun(t, e, e.alice, str(runPipeline(t, e, e.alice, string(def), nil), "id"), "COMPLETED")
	for n, s := range steps(again) {
		if str(s, "state") != "CACHED" || str(s, "taskId") != str(ss[n], "taskId") || str(s, "cachedFromRunId") != str(run, "id") ||
			!strings.Contains(str(s, "reason"), "cached") {
			t.Fatalf("step %s of the rerun: %v", n, s)
		}
	}
	// A new learning rate: prepare is reused, train runs again, and so
	// does nothing else that changed (evaluate's parameters are the same).
	lr := waitRun(t, e, e.alice, str(runPipeline(t, e, e.alice, string(def), map[string]any{"lr": "0.05"}), "id"), "COMPLETED")
	ls := steps(lr)
	if str(ls["prepare"], "state") != "CACHED" || str(ls["train"], "state") != "COMPLETED" || str(ls["train"], "taskId") == str(ss["train"], "taskId") {
		t.Fatalf("a rerun with another lr: %v", ls)
	}

	// Runs of the project, newest first.
	list := gql(t, e.url, e.alice, `{ pipelineRuns(project: "fraud-models") { id state } }`, nil)
	if rs, _ := get(list, "pipelineRuns").([]any); len(rs) != 3 || str(rs[0], "id") != str(lr, "id") {
		t.Fatalf("runs %v", list)
	}
}

// TestPipelineFailurePolicies: a step that fails once and is retried, a
// failing step whose policy is continue (its dependant skipped, an
// independent branch going on), and a failing step under the default
// stop policy aborting its running sibling.
func TestPipelineFailurePolicies(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, pipelineEstate)
	_, logs := e.startWorker(t, "pipeline-host", "0,1")
	marker := filepath.Join(t.TempDir(), "tried")
	def := `name: policies
project: fraud-models
steps:
  - name: flaky
    computeResource: 1 GPU
    retry: 2
    command: [sh, -c, 'if [ -f ` + marker + ` ]; then echo second; else touch ` + marker + `; exit 1; fi']
  - name: after-flaky
    computeResource: 1 GPU
    dependsOn: [flaky]
    command: [sh, -c, 'echo done']
  - name: broken
    computeResource: 1 GPU
    onFailure: continue
    command: [sh, -c, 'exit 3']
  - name: after-broken
    computeResource: 1 GPU
    dependsOn: [broken]
    command: [sh, -c, 'echo never']
  - name: independent
    computeResource: 1 A100
    command: [sh, -c, 'echo on its own']
`
	run := waitRun(t, e, e.alice, str(runPipeline(t, e, e.alice, def, nil), "id"), "FAILED")
	ss := steps(run)
	want := map[string]string{"flaky": "COMPLETED", "after-flaky": "COMPLETED", "broken": "FAILED", "after-broken": "SKIPPED", "independent": "COMPLETED"}
	for n, st := range want {
		if str(ss[n], "state") != st {
			t.Fatalf("step %s is %s, want %s: %v\nworker log:\n%s", n, str(ss[n], "state"), st, ss, logs)
		}
	}
	if get(ss["flaky"], "attempts") != 2.0 || len(ss["flaky"]["taskIds"].([]any)) != 2 {
		t.Fatalf("the retried step: %v", ss["flaky"])
	}
	if get(ss["after-broken"], "taskId") != nil || !strings.Contains(str(ss["after-broken"], "reason"), "broken") ||
		!strings.Contains(str(run, "reason"), "broken") {
		t.Fatalf("the skipped step %v, the run %v", ss["after-broken"], run)
	}

	// stop: the failing step aborts its running sibling and fails the run.
	stop := `name: stopper
project: fraud-models
steps:
  - name: fails
    computeResource: 1 GPU
    command: [sh, -c, 'sleep 1; exit 1']
  - name: long
    computeResource: 1 GPU
    command: [sh, -c, 'while true; do sleep 0.05; done']
  - name: later
    computeResource: 1 GPU
    dependsOn: [long]
    command: [sh, -c, 'echo never']
`
	run = waitRun(t, e, e.alice, str(runPipeline(t, e, e.alice, stop, nil), "id"), "FAILED")
	ss = steps(run)
	if str(ss["fails"], "state") != "FAILED" || str(ss["long"], "state") != "ABORTED" || str(ss["later"], "state") != "SKIPPED" {
		t.Fatalf("under stop: %v", ss)
	}
	e.waitTask(t, e.alice, str(ss["long"], "taskId"), "the sibling's task aborted", func(d map[string]any) bool {
		return str(d, "task", "status") == "ABORTED"
	})
}

// TestPipelineAbort aborts a run while a step runs: its task is aborted
// through the abort path, the pending step skipped, the run aborted.
func TestPipelineAbort(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, pipelineEstate)
	e.startWorker(t, "pipeline-host", "0,1")
	def := `name: to-abort
project: fraud-models
steps:
  - name: long
    computeResource: 1 GPU
    command: [sh, -c, 'echo started; while true; do sleep 0.05; done']
  - name: next
    computeResource: 1 GPU
    dependsOn: [long]
    command: [sh, -c, 'echo never']
`
	id := str(runPipeline(t, e, e.alice, def, nil), "id")
	waitRunFor(t, e, e.alice, id, "RUNNING", func(run map[string]any) bool { return str(steps(run)["long"], "state") == "RUNNING" })
	d := gql(t, e.url, e.alice, `mutation($id: ID!) { abortPipelineRun(id: $id, reason: "wrong data") { `+runFields+` } }`, map[string]any{"id": id})
	run := get(d, "abortPipelineRun").(map[string]any)
	ss := steps(run)
	if str(run, "state") != "ABORTED" || str(ss["long"], "state") != "ABORTED" || str(ss["next"], "state") != "SKIPPED" ||
		!strings.Contains(str(run, "reason"), "wrong data") {
		t.Fatalf("aborted run %v", run)
	}
	e.waitTask(t, e.alice, str(ss["long"], "taskId"), "the step's task aborted", func(d map[string]any) bool {
		return str(d, "task", "status") == "ABORTED"
	})
	if msg, code := gqlErr(t, e.url, e.alice, `mutation($id: ID!) { abortPipelineRun(id: $id) { id } }`, map[string]any{"id": id}); code != "CONFLICT" {
		t.Fatalf("aborting again: %s %s", code, msg)
	}
}

// TestPipelineRefusalsAndIsolation: a cycle, an unknown parameter
// reference and a compute resource not open to the caller are refused,
// each named, with nothing created; another group's member and another
// tenant's admin see no run and cannot abort one.
func TestPipelineRefusalsAndIsolation(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, pipelineEstate)
	cases := []struct {
		name, def string
		want      []string
	}{
		{"a cycle", `name: cyc
project: fraud-models
steps:
  - {name: a, computeResource: 1 GPU, dependsOn: [c], command: [echo]}
  - {name: b, computeResource: 1 GPU, dependsOn: [a], command: [echo]}
  - {name: c, computeResource: 1 GPU, command: [echo, "{{steps.b.metrics.loss}}"]}
`, []string{"cycle", "a → c → b → a"}},
		{"an unknown parameter and step", `name: refs
project: fraud-models
params: {lr: 0.1}
steps:
  - {name: a, computeResource: 1 GPU, parameters: {x: "{{params.epochs}}", y: "{{steps.nope.metrics.m}}"}, command: [echo]}
`, []string{"{{params.epochs}}", "declared: lr", `step "nope"`}},
		{"a bad template", `name: tpl
project: fraud-models
steps:
  - {name: a, computeResource: 1 GPU, command: [echo, "{{steps.a}}", "{{params.x"]}
`, []string{"{{steps.a}}", "unclosed"}},
		{"a compute resource of another group", `name: cr
project: fraud-models
steps:
  - {name: a, computeResource: vision GPU, command: [echo]}
`, []string{`step "a"`, "vision GPU", "not open"}},
		{"an unknown field", `name: f
project: fraud-models
steps:
  - {name: a, computeResource: 1 GPU, comand: [echo]}
`, []string{"comand"}},
	}
	for _, c := range cases {
		msg, code := gqlErr(t, e.url, e.alice, `mutation($in: RunPipelineInput!) { runPipeline(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"definition": c.def}})
		for _, w := range c.want {
			if code != "BAD_USER_INPUT" || !strings.Contains(msg, w) {
				t.Errorf("%s: %s %q, want BAD_USER_INPUT naming %q", c.name, code, msg, w)
			}
		}
	}
	if rs, _ := get(gql(t, e.url, e.alice, `{ pipelineRuns { id } }`, nil), "pipelineRuns").([]any); len(rs) != 0 {
		t.Fatalf("refused runs were created: %v", rs)
	}

	// Isolation: a run of alice's, seen by neither vision's member nor
	// another tenant's admin.
	id := str(runPipeline(t, e, e.alice, `name: mine
project: fraud-models
steps:
  - {name: a, computeResource: 1 GPU, command: [sh, -c, 'sleep 30']}
`, nil), "id")
	bob := e.member(t, "bob", "vision")
	other := str(gql(t, e.url, adminKey, `mutation { createTenant(input: {name: "other"}) { secret } }`, nil), "createTenant", "secret")
	for who, cred := range map[string]string{"another group's member": bob, "another tenant's admin": other} {
		if _, code := gqlErr(t, e.url, cred, `query($id: ID!) { pipelineRun(id: $id) { id } }`, map[string]any{"id": id}); code != "NOT_FOUND" {
			t.Errorf("%s reads the run: %s", who, code)
		}
		if _, code := gqlErr(t, e.url, cred, `mutation($id: ID!) { abortPipelineRun(id: $id) { id } }`, map[string]any{"id": id}); code != "NOT_FOUND" {
			t.Errorf("%s aborts the run: %s", who, code)
		}
		if _, code := gqlErr(t, e.url, cred, `subscription($id: ID!) { pipelineRunChanged(id: $id) { id } }`, map[string]any{"id": id}); code != "NOT_FOUND" {
			t.Errorf("%s subscribes to the run: %s", who, code)
		}
		if rs, _ := get(gql(t, e.url, cred, `{ pipelineRuns { id } }`, nil), "pipelineRuns").([]any); len(rs) != 0 {
			t.Errorf("%s lists %v", who, rs)
		}
	}
	if str(gql(t, e.url, adminKey, `query($id: ID!) { pipelineRun(id: $id) { id } }`, map[string]any{"id": id}), "pipelineRun", "id") != id {
		t.Fatal("the tenant's admin does not see the run")
	}
}
