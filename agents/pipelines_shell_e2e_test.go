package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPipelineParametersNeverRunAsShell: a pipeline parameter whose value
// is shell (`;`, `$(…)`, backquotes, a line break) reaches a step's sh -c
// script only as data. runPipeline refuses a template put into the script
// as text, saying how to fix it; with |shell (a pipeline's template, and
// the task's own {name|shell}), or read from the environment, the step
// runs for real on a process-mode worker, prints each value exactly, and
// the file the values would create is never created.
func TestPipelineParametersNeverRunAsShell(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, pipelineEstate)
	_, logs := e.startWorker(t, "shell-host", "0")
	marker := filepath.Join(t.TempDir(), "pwned-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	values := map[string]any{
		"semi":  "x; touch " + marker,
		"subst": "$(touch " + marker + ")",
		"tick":  "`touch " + marker + "`",
		"line":  "y\ntouch " + marker,
	}

	for _, c := range []struct{ name, command, params string }{
		{"a pipeline template as text", `[sh, -c, "echo {{params.semi}}"]`, ""},
		{"a pipeline template in bash -lc", `[bash, -lc, "python train.py --lr={{params.subst}}"]`, ""},
		{"a quoted template inside double quotes", `[sh, -c, "echo \"{{params.tick|shell}}\""]`, ""},
		{"a task template as text", `[sh, -c, "echo {line}"]`, `{line: "{{params.line}}"}`},
	} {
		def := "name: refused\nproject: fraud-models\nparams: {semi: a, subst: a, tick: a, line: a}\nsteps:\n  - name: a\n    computeResource: 1 GPU\n    command: " + c.command + "\n"
		if c.params != "" {
			def += "    parameters: " + c.params + "\n"
		}
		msg, code := gqlErr(t, e.url, e.alice, `mutation($in: RunPipelineInput!) { runPipeline(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"definition": def, "params": values}})
		if code != "BAD_USER_INPUT" || !strings.Contains(msg, "is the script") || !strings.Contains(msg, "|shell") || !strings.Contains(msg, "$KLIQUE_") {
			t.Errorf("%s: %s %q, want it refused, saying to quote it with |shell or read the environment", c.name, code, msg)
		}
	}
	if rs, _ := get(gql(t, e.url, e.alice, `{ pipelineRuns { id } }`, nil), "pipelineRuns").([]any); len(rs) != 0 {
		t.Fatalf("refused runs were created: %v", rs)
	}

	def := `name: quoted
project: fraud-models
params: {semi: a, subst: a, tick: a, line: a}
steps:
  - name: a
    computeResource: 1 GPU
    parameters: {tick: "{{params.tick}}", line: "{{params.line}}"}
    command:
      - sh
      - -c
      - |
        printf 'semi=%s|\n' {{params.semi|shell}}
        printf 'subst=%s|\n' {{params.subst|shell}}
        printf 'tick=%s|\n' {tick|shell}
        printf 'line=%s|\n' "$KLIQUE_PARAM_LINE"
`
	run := waitRun(t, e, e.alice, str(runPipeline(t, e, e.alice, def, values), "id"), "COMPLETED")
	id := str(steps(run)["a"], "taskId")
	// The task is given the script with the pipeline's values quoted (its
	// own {tick|shell} is filled, quoted, when the worker claims it).
	task, err := e.app.Store.GetTask(context.Background(), e.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	if cmd := task.Spec.Command; len(cmd) != 3 || cmd[0] != "sh" || cmd[1] != "-c" ||
		!strings.Contains(cmd[2], "printf 'semi=%s|\\n' 'x; touch "+marker+"'\n") ||
		!strings.Contains(cmd[2], "printf 'subst=%s|\\n' '$(touch "+marker+")'\n") ||
		!strings.Contains(cmd[2], "printf 'tick=%s|\\n' {tick|shell}\n") {
		t.Fatalf("the step's command is %q", cmd)
	}
	e.waitTask(t, e.alice, id, "the step's log", func(d map[string]any) bool {
		l := logText(d)
		return strings.Contains(l, "semi=x; touch "+marker+"|") && strings.Contains(l, "subst=$(touch "+marker+")|") &&
			strings.Contains(l, "tick=`touch "+marker+"`|") && strings.Contains(l, "line=y\nstdout: touch "+marker+"|")
	})
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a parameter ran as shell: %s exists\nworker log:\n%s", marker, logs)
	}
}
