package pipelines

import (
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

func parse(t *testing.T, text string) *model.PipelineDefinition {
	t.Helper()
	d, err := ParseDefinition(text)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return d
}

func TestParseDefinitionReadsScalarsAndRefusesUnknownFields(t *testing.T) {
	d := parse(t, `
name: p
params: {lr: 0.1, epochs: 3, fast: true}
steps:
  - name: a
    computeResource: 1 GPU
    command: [echo, "{{params.lr}}"]
    parameters: {n: 5}
    cache: false
`)
	if d.Params["lr"] != "0.1" || d.Params["epochs"] != "3" || d.Params["fast"] != "true" || d.Steps[0].Spec.Parameters["n"] != "5" || d.Steps[0].CacheOn() {
		t.Fatalf("definition %+v", d)
	}
	for text, want := range map[string]string{
		"name: p\nsteps: [{name: a, comand: [x]}]":             "comand",
		"name: p\nsteps: [{name: a, parameters: {x: [1, 2]}}]": "must be a string, number or boolean",
		"  ": "empty",
		"name: p\nsteps: [{name: a, computeResource: x}]\nextra: 1": "extra",
	} {
		if _, err := ParseDefinition(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", text, err, want)
		}
	}
}

func TestCheckOrdersStepsAndAddsTemplateDependencies(t *testing.T) {
	d := parse(t, `
name: p
params: {lr: 0.1}
steps:
  - {name: evaluate, computeResource: c, parameters: {acc: "{{steps.train.metrics.accuracy}}"}, command: [x]}
  - {name: train, computeResource: c, inputs: {data: "{{steps.prepare.artifacts.dataset}}"}, parameters: {lr: "{{params.lr}}"}, command: [x]}
  - {name: prepare, computeResource: c, command: [x]}
  - {name: report, computeResource: c, dependsOn: [prepare, evaluate], command: [x]}
`)
	plan, ps := Check(d, map[string]string{"lr": "0.2"})
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	var order []string
	for _, i := range plan.Order {
		order = append(order, d.Steps[i].Name)
	}
	if !slices.Equal(order, []string{"prepare", "train", "evaluate", "report"}) {
		t.Fatalf("order %v", order)
	}
	if !slices.Equal(plan.Deps["evaluate"], []string{"train"}) || !slices.Equal(plan.Deps["train"], []string{"prepare"}) {
		t.Fatalf("deps %v", plan.Deps)
	}
	if lv := plan.Levels(); lv["prepare"] != 0 || lv["evaluate"] != 2 || lv["report"] != 3 {
		t.Fatalf("levels %v", lv)
	}
	if got := plan.Dependants("train"); !slices.Equal(got, []string{"evaluate", "report"}) {
		t.Fatalf("dependants of train %v", got)
	}
	if plan.Params["lr"] != "0.2" {
		t.Fatalf("params %v", plan.Params)
	}
}

func TestCheckRefusals(t *testing.T) {
	for _, c := range []struct {
		name, def string
		params    map[string]string
		want      []string
	}{
		{"a cycle, named", `name: p
steps:
  - {name: a, computeResource: c, dependsOn: [b], command: [x]}
  - {name: b, computeResource: c, command: [x, "{{steps.a.metrics.m}}"]}`, nil, []string{"cycle: a → b → a"}},
		{"a step depending on itself", `name: p
steps: [{name: a, computeResource: c, dependsOn: [a], command: [x]}]`, nil, []string{"depends on itself"}},
		{"an unknown step", `name: p
steps: [{name: a, computeResource: c, dependsOn: [z], command: [x]}]`, nil, []string{`depends on "z"`}},
		{"an unknown parameter reference", `name: p
params: {lr: 1}
steps: [{name: a, computeResource: c, command: [x, "{{params.epochs}}"]}]`, nil, []string{"{{params.epochs}}", "declared: lr"}},
		{"a parameter the pipeline does not declare", `name: p
steps: [{name: a, computeResource: c, command: [x]}]`, map[string]string{"lr": "1"}, []string{"unknown parameter lr"}},
		{"bad templates", `name: p
steps: [{name: a, computeResource: c, command: [x, "{{steps.a}}", "{{ params.x", "{{foo.bar}}"]}]`, nil,
			[]string{"{{steps.a}}", "unclosed", "{{foo.bar}}"}},
		{"an input that is not one artifact", `name: p
steps:
  - {name: a, computeResource: c, command: [x]}
  - {name: b, computeResource: c, inputs: {d: "{{steps.a.metrics.m}}"}, command: [x]}`, nil, []string{"input d"}},
		{"duplicate names, a bad name, policies", `name: "bad name"
steps:
  - {name: a, computeResource: c, command: [x], onFailure: ignore, retry: 99}
  - {name: a, command: [x]}
  - {name: "-x", computeResource: c, command: [x]}`, nil,
			[]string{"the pipeline's name", "two steps are named", `step 3's name "-x"`, `onFailure "ignore"`, "retry 99", "computeResource:"}},
		{"no steps", `name: p`, nil, []string{"no steps"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, ps := Check(parse(t, c.def), c.params)
			all := strings.Join(ps, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q do not name %q", all, w)
				}
			}
		})
	}
}

func TestFillStep(t *testing.T) {
	d := parse(t, `
name: p
params: {lr: 0.1}
steps:
  - name: s
    computeResource: c
    command: [python, train.py, "--data", "{{steps.prep.artifacts.ds}}", "--lr", "{{params.lr}}", "{epochs}"]
    parameters: {acc: "{{ steps.train.metrics.val/acc }}"}
    env: {LR: "lr={{params.lr}}"}
    inputs: {data: "{{steps.prep.artifacts.ds}}", model: "{{steps.train.artifacts.ds}}"}
`)
	spec, err := FillStep(d.Steps[0], Outputs{Params: map[string]string{"lr": "0.1"}, TaskIDs: map[string]string{"prep": "t1", "train": "t2"},
		Metrics: func(step, name string) (float64, bool, error) {
			return 0.875, step == "train" && name == "val/acc", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(spec.Command, " "); got != "python train.py --data ds --lr 0.1 {epochs}" {
		t.Fatalf("command %q", got)
	}
	if spec.Parameters["acc"] != "0.875" || spec.Env["LR"] != "lr=0.1" {
		t.Fatalf("parameters %v env %v", spec.Parameters, spec.Env)
	}
	want := []model.ArtifactInput{{Name: "data", TaskID: "t1", Artifact: "ds"}, {Name: "ds", TaskID: "t1", Artifact: "ds"}, {Name: "model", TaskID: "t2", Artifact: "ds"}}
	if !slices.Equal(spec.Inputs, want) {
		t.Fatalf("inputs %+v", spec.Inputs)
	}
	if d.Steps[0].Spec.Command[3] != "{{steps.prep.artifacts.ds}}" {
		t.Fatal("filling changed the definition")
	}
	_, err = FillStep(d.Steps[0], Outputs{Params: map[string]string{"lr": "0.1"}, TaskIDs: map[string]string{"prep": "t1", "train": "t2"},
		Metrics: func(string, string) (float64, bool, error) { return 0, false, nil }})
	if err == nil || !strings.Contains(err.Error(), `reported no metric "val/acc"`) {
		t.Fatalf("a metric not reported: %v", err)
	}
}
