package appconf

import (
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

func TestShellProblems(t *testing.T) {
	for _, tc := range []struct {
		run  model.AppRun
		want string
	}{
		{model.AppRun{Process: "serve --dir {dir} --port {port}", Batch: "serve --dir {dir|shell} --port {port} --tp {gpus}"}, ""},
		{model.AppRun{Image: "serve", Args: []string{"sh", "-c", "serve {dir|shell}"}}, ""},
		{model.AppRun{Batch: "serve {dir}"}, "run.batch is a shell script (an HPC job runs it with /bin/sh -c): {dir} would put a launch value into it as shell; write {dir|shell}"},
		{model.AppRun{Image: "serve", Args: []string{"bash", "-lc", "serve {dir}"}}, "run.args[2] is the script bash -lc runs: {dir} would put a launch value into it as shell"},
		{model.AppRun{Process: "serve {dir|shell}"}, "run.process word 2: {dir|shell} quotes the value for a shell script, and this is not one"},
		{model.AppRun{Image: "{dir|shell}"}, "run.image: {dir|shell} quotes the value"},
		{model.AppRun{Batch: "cat <<EOF\n{dir|shell}\nEOF"}, "{dir|shell} stands inside quotes, a here-document"},
	} {
		a := &model.App{Name: "x", Kind: model.AppSession, Port: 80, Run: tc.run, Form: `{"type":"object","properties":{"dir":{"type":"string"}}}`}
		ps := ValidateApp(a)
		if tc.want == "" && len(ps) > 0 || tc.want != "" && (len(ps) != 1 || !strings.Contains(ps[0], tc.want)) {
			t.Errorf("%+v: problems %q, want %q", tc.run, ps, tc.want)
		}
	}
}

// TestRenderKeepsAValueOneArgument: a process line is split into words
// before values fill them, so a value with spaces is one argument; an
// optional field left empty adds no argument, in a process line and as a
// word of a script alike.
func TestRenderKeepsAValueOneArgument(t *testing.T) {
	a := &model.App{Run: model.AppRun{Process: "jupyter lab --port {port} --notebook-dir={dir} {open}", Batch: "jupyter lab {open|shell} --dir={dir|shell}"}}
	got := ProcessArgv(a, map[string]string{"port": "8888", "dir": "/home/me/my notebooks", "open": ""})
	if want := []string{"jupyter", "lab", "--port", "8888", "--notebook-dir=/home/me/my notebooks"}; !slices.Equal(got, want) {
		t.Fatalf("ProcessArgv = %q, want %q", got, want)
	}
	got = ProcessArgv(a, map[string]string{"open": "a b.ipynb"})
	if got[len(got)-1] != "a b.ipynb" {
		t.Fatalf("ProcessArgv = %q, want the last argument %q", got, "a b.ipynb")
	}
	run := RenderRun(a, map[string]string{"dir": "it's here", "open": ""})
	if want := `jupyter lab  --dir='it'\''s here'`; run.Batch != want {
		t.Fatalf("batch %q, want %q", run.Batch, want)
	}
}
