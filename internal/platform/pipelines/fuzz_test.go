package pipelines

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/docbudget"
	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
	"github.com/klique-ai/klique/internal/model"
)

// FuzzParseDefinition feeds text to ParseDefinition and what it reads to
// Check, as runPipeline does. Nothing may panic; a definition over its
// budget is refused with a *docbudget.Error; one that is read is within
// the budget as a stored definition (what a schedule reruns), and written
// back as JSON (which is YAML) it reads as the same definition.
//
// Seeds live in testdata/fuzz/FuzzParseDefinition; run it with
//
//	go test -run '^$' -fuzz FuzzParseDefinition -fuzztime 60s ./internal/platform/pipelines
func FuzzParseDefinition(f *testing.F) {
	f.Add("name: p\nparams: {lr: 0.1}\nsteps:\n  - {name: a, computeResource: 1 GPU, command: [echo, \"{{params.lr}}\"]}\n  - {name: b, computeResource: 1 GPU, dependsOn: [a], command: [x], retry: 2, cache: false}\n")
	f.Add(docbudgettest.Pipeline(3, 3))
	f.Fuzz(func(t *testing.T, text string) {
		def, err := ParseDefinition(text)
		if err != nil {
			var over *docbudget.Error
			if def != nil || (errors.As(err, &over) && over.Document != "pipeline definition") {
				t.Fatalf("ParseDefinition = %+v, %v", def, err)
			}
			return
		}
		if err := Budget.Check(DefinitionUsage(def)); err != nil {
			t.Fatalf("a definition read is over the budget as stored: %v", err)
		}
		_, _ = Check(def, nil)
		if !validUTF8(def) {
			return // JSON would write U+FFFD for the bad bytes
		}
		out, err := json.Marshal(asFile(def))
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseDefinition(string(out))
		if err != nil {
			t.Fatalf("the definition written back does not read: %v\ninput: %q\nwritten: %s", err, text, out)
		}
		if !reflect.DeepEqual(again, def) {
			t.Fatalf("read back as\n%+v\nwant\n%+v\ninput: %q\nwritten: %s", again, def, text, out)
		}
	})
}

// asFile is a definition in the file's shape: a step's spec inline.
func asFile(def *model.PipelineDefinition) map[string]any {
	steps := []map[string]any{}
	for _, s := range def.Steps {
		m := map[string]any{"name": s.Name, "computeResource": s.ComputeResource, "group": s.Group, "dependsOn": s.DependsOn,
			"command": s.Spec.Command, "repository": s.Spec.Repository, "commit": s.Spec.Commit, "diff": s.Spec.Diff,
			"entryPoint": s.Spec.EntryPoint, "workingDir": s.Spec.WorkingDir, "packages": s.Spec.Packages, "image": s.Spec.Image,
			"parameters": s.Spec.Parameters, "env": s.Spec.Env, "secrets": s.Spec.Secrets, "inputs": s.Inputs,
			"onFailure": s.OnFailure, "retry": s.Retry}
		if s.Cache != nil {
			m["cache"] = *s.Cache
		}
		steps = append(steps, m)
	}
	return map[string]any{"name": def.Name, "project": def.Project, "params": def.Params, "steps": steps}
}

// validUTF8 reports whether every string of def is valid UTF-8.
func validUTF8(def *model.PipelineDefinition) bool {
	all := []string{def.Name, def.Project}
	kv := func(m map[string]string) {
		for k, v := range m {
			all = append(all, k, v)
		}
	}
	kv(def.Params)
	for _, s := range def.Steps {
		all = append(all, s.Name, s.ComputeResource, s.Group, s.OnFailure, s.Spec.Repository, s.Spec.Commit, s.Spec.Diff,
			s.Spec.EntryPoint, s.Spec.WorkingDir, s.Spec.Image)
		all = append(append(append(append(all, s.DependsOn...), s.Spec.Command...), s.Spec.Packages...), s.Spec.Secrets...)
		kv(s.Spec.Parameters)
		kv(s.Spec.Env)
		kv(s.Inputs)
	}
	for _, s := range all {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
