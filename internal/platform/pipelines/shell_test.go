package pipelines

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/citest"
)

// TestShellScriptTemplatesAreRefusedUnlessQuoted: a template put into the
// script a shell runs as text would be read as shell, so Check refuses it
// and says how to fix it; |shell anywhere but a script is refused too.
func TestShellScriptTemplatesAreRefusedUnlessQuoted(t *testing.T) {
	for _, tc := range []struct{ step, want string }{
		{`command: [sh, -c, "python train.py --lr {{params.lr}}"]`,
			`command argument 3 is the script sh -c runs: {{params.lr}} would be read as shell there; give the value to the step as a parameter (parameters: {lr: "{{params.lr}}"}) and read "$KLIQUE_PARAM_LR", or write {{params.lr|shell}} to insert it quoted`},
		{`command: [bash, -e, -o, pipefail, -c, "echo {{steps.prep.metrics.rows}}"]`,
			`command argument 6 is the script bash -e -o pipefail -c runs: {{steps.prep.metrics.rows}} would be read as shell there; give the value to the step as a parameter (parameters: {rows: "{{steps.prep.metrics.rows}}"}) and read "$KLIQUE_PARAM_ROWS"`},
		{`command: [sh, -c, "head {{steps.prep.artifacts.data}}"]`,
			`name the artifact under inputs: (data: "{{steps.prep.artifacts.data}}") and read "$KLIQUE_INPUT_DATA"`},
		{`command: [sh, -c, "echo \"lr {{params.lr|shell}}\""]`,
			`{{params.lr|shell}} stands inside quotes, a here-document, backquotes, an expansion or a comment`},
		{`command: [python, train.py, "--lr={{params.lr|shell}}"]`,
			`command argument 3: {{params.lr|shell}} quotes the value for a shell script, and this is not one (a script is what sh -c and the like run): it would pass the quote marks on; write {{params.lr}}`},
		{`parameters: {lr: "{{params.lr|shell}}"}`, `parameter lr: {{params.lr|shell}} quotes the value for a shell script`},
		{`command: [echo, "{{params.lr|json}}"]`, `has the filter "json": the only filter is |shell`},
	} {
		def := parse(t, "name: p\nparams: {lr: 0.1}\nsteps:\n  - {name: prep, computeResource: c, command: [x]}\n  - name: s\n    computeResource: c\n    "+tc.step+"\n")
		_, ps := Check(def, nil)
		if len(ps) != 1 || !strings.Contains(ps[0], tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.step, ps, tc.want)
		}
	}
	def := parse(t, "name: p\nparams: {lr: 0.1}\nsteps:\n  - {name: s, computeResource: c, command: [sh, -c, \"echo {{ params.lr | shell }} {{params.lr|shell}}\", \"{{params.lr}}\"]}\n")
	if _, ps := Check(def, nil); len(ps) > 0 {
		t.Fatalf("quoted templates, and one after the script (a positional parameter), refused: %q", ps)
	}
}

// TestQuotedParametersRunAsLiterals fills a step the way the controller
// does, with values that are shell, checks the exact argument vector the
// task is given, and runs it: the script prints each value exactly and
// runs nothing of it. A template outside a script stays one argument. And
// a stored definition from before the rule (a schedule reruns one) is
// refused when filled, not run.
func TestQuotedParametersRunAsLiterals(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		citest.Missing(t, "no sh here")
	}
	marker := filepath.Join(t.TempDir(), "pwned-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	def := parse(t, "name: p\nparams: {lr: 0.1}\nsteps:\n  - {name: s, computeResource: c, command: [sh, -c, \"printf '%s' {{params.lr|shell}}\"]}\n"+
		"  - {name: argv, computeResource: c, command: [python, train.py, --lr, \"{{params.lr}}\"]}\n")
	for _, v := range []string{"x; touch " + marker, "$(touch " + marker + ")", "`touch " + marker + "`", "x\ntouch " + marker, "it's", ""} {
		plan, ps := Check(def, map[string]string{"lr": v})
		if len(ps) > 0 {
			t.Fatal(ps)
		}
		spec, err := FillStep(def.Steps[0], Outputs{Params: plan.Params})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"sh", "-c", "printf '%s' '" + strings.ReplaceAll(v, "'", `'\''`) + "'"}
		if !slices.Equal(spec.Command, want) {
			t.Fatalf("command %q, want %q", spec.Command, want)
		}
		out, err := exec.Command(sh, spec.Command[1:]...).Output()
		if err != nil || string(out) != v {
			t.Fatalf("the step printed %q (%v), want %q", out, err, v)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the value %q ran as shell", v)
		}
		spec, err = FillStep(def.Steps[1], Outputs{Params: plan.Params})
		if err != nil || !slices.Equal(spec.Command, []string{"python", "train.py", "--lr", v}) {
			t.Fatalf("argv step: %q, %v", spec.Command, err)
		}
	}
	old := parse(t, "name: p\nparams: {lr: 0.1}\nsteps:\n  - {name: s, computeResource: c, command: [sh, -c, \"echo {{params.lr}}\"]}\n")
	if _, err := FillStep(old.Steps[0], Outputs{Params: map[string]string{"lr": "x; touch " + marker}}); err == nil || !strings.Contains(err.Error(), "would be read as shell") {
		t.Fatalf("filling a stored step with a bare template in its script: %v", err)
	}
}
