package appconf

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzLaunchForm feeds an app's launch form (a JSON Schema, as an admin
// writes it) to CompileForm and a launch's values (as a member sends them)
// to the compiled form's Check, then renders a template with what Check
// gives, as LaunchApp does. Nothing may panic. A form over FormBudget is
// refused, CanonicalForm is idempotent, and values Check accepts carry
// every default, are accepted again as they are, and render.
//
// Seeds live in testdata/fuzz/FuzzLaunchForm; run it with
//
//	go test -run '^$' -fuzz FuzzLaunchForm -fuzztime 60s ./internal/estate/appconf
func FuzzLaunchForm(f *testing.F) {
	f.Add(`{"type":"object","properties":{"model":{"type":"string","default":"llama"},"gpus":{"type":"integer","minimum":1,"maximum":8,"default":1}},"required":["model"]}`,
		[]byte(`{"model":"qwen","gpus":2}`))
	f.Add(`{"type":"object","additionalProperties":false,"properties":{"tags":{"type":"array","items":{"type":"string","maxLength":5}}}}`,
		[]byte(`{"tags":["a","bb"],"extra":1}`))
	f.Add(``, []byte(`{}`))
	f.Fuzz(func(t *testing.T, form string, raw []byte) {
		if c := CanonicalForm(form); CanonicalForm(c) != c {
			t.Fatalf("CanonicalForm(%q) = %q, and again %q", form, c, CanonicalForm(c))
		}
		fm, err := CompileForm(form)
		if err != nil {
			if fm != nil {
				t.Fatalf("CompileForm returned a form with its error %v", err)
			}
			return
		}
		if FormBudget.JSON([]byte(form)) != nil {
			t.Fatalf("a form over its budget compiled: %q", form)
		}
		var values map[string]any
		if json.Unmarshal(raw, &values) != nil {
			return
		}
		got, problems := fm.Check(values)
		if len(problems) > 0 {
			if got != nil {
				t.Fatalf("Check gave values %v with problems %v", got, problems)
			}
			return
		}
		for k := range fm.Defaults {
			if _, ok := got[k]; !ok {
				t.Fatalf("default %q missing from %v", k, got)
			}
		}
		again, problems := fm.Check(got)
		if len(problems) > 0 || !reflect.DeepEqual(again, got) {
			t.Fatalf("accepted values %v checked again: %v, %v", got, again, problems)
		}
		strs := map[string]string{}
		var tmpl strings.Builder
		for k, v := range got {
			strs[k] = String(v)
			tmpl.WriteString("{" + k + "} ")
		}
		_ = Render(tmpl.String(), strs)
	})
}
