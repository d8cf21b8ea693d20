package appconf

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

// Every built-in passes the checks an admin's entry passes, and renders
// with its form's defaults and a model.
func TestBuiltInsAreValid(t *testing.T) {
	all := BuiltIns()
	if len(all) != 8 {
		t.Fatalf("%d built-ins, want 8", len(all))
	}
	for _, a := range all {
		if ps := ValidateApp(a); len(ps) > 0 {
			t.Errorf("built-in %s: %v", a.Name, ps)
		}
		if a.Kind == model.AppServing && !strings.Contains(a.Form, `"model"`) && !strings.Contains(a.Form, `"image"`) {
			t.Errorf("serving app %s has no model field", a.Name)
		}
	}
}

func TestTemplatesReferToKnownValuesOnly(t *testing.T) {
	a := &model.App{Name: "x", Kind: model.AppSession, Port: 80, Run: model.AppRun{Process: "run {gpus} {a} ${HOME} {\"json\": 1} {b}"},
		Form: `{"type":"object","properties":{"a":{"type":"string"}}}`}
	ps := ValidateApp(a)
	if len(ps) != 1 || !strings.Contains(ps[0], "run.process refers to {b}") {
		t.Fatalf("problems %v, want one about {b}", ps)
	}
	got := Render(a.Run.Process, map[string]string{"gpus": "4", "a": "x"})
	if got != `run 4 x ${HOME} {"json": 1} ` {
		t.Fatalf("rendered %q", got)
	}
}

func TestFormCheckNamesTheField(t *testing.T) {
	f, err := CompileForm(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":2,"default":4}},"additionalProperties":false}`)
	if err != nil {
		t.Fatal(err)
	}
	if v, ps := f.Check(nil); len(ps) > 0 || String(v["n"]) != "4" {
		t.Fatalf("defaults: %v %v", v, ps)
	}
	if _, ps := f.Check(map[string]any{"n": 1}); len(ps) != 1 || !strings.Contains(ps[0], `field "n"`) {
		t.Fatalf("a value under the minimum: %v", ps)
	}
	if _, ps := f.Check(map[string]any{"m": 1}); len(ps) == 0 || !strings.Contains(ps[0], "m") {
		t.Fatalf("an unknown field: %v", ps)
	}
	for _, bad := range []string{`[]`, `{"type":"string"}`, `{"type":"object","properties":{"a":{"type":"nope"}}}`, `{`} {
		if _, err := CompileForm(bad); err == nil {
			t.Errorf("form %s compiled", bad)
		}
	}
}
