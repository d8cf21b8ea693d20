package pipelines

import (
	"errors"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/docbudget"
	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
	"github.com/klique-ai/klique/internal/model"
)

// The probe of issue 39, a definition of about 560 bytes nesting anchors 8
// levels deep with 10 aliases a level, is refused by the budget before it
// is decoded; a definition's anchors within the budget still read.
func TestParseDefinitionHoldsTheBudget(t *testing.T) {
	probe := docbudgettest.Pipeline(8, 10)
	_, err := ParseDefinition(probe)
	var over *docbudget.Error
	if !errors.As(err, &over) || over.Measure != "aliases expanded" {
		t.Fatalf("the probe (%d bytes): %v, want a budget refusal", len(probe), err)
	}
	if !strings.HasPrefix(err.Error(), "pipeline definition: ") || !strings.Contains(err.Error(), "; the limit is 1,000: use fewer anchors and aliases (write the values out), or split the pipeline into smaller ones") {
		t.Fatalf("message %q", err)
	}
	d := parse(t, "name: p\nsteps:\n  - {name: a, computeResource: x, command: &c [echo, hi]}\n  - {name: b, computeResource: x, command: *c}\n")
	if strings.Join(d.Steps[1].Spec.Command, " ") != "echo hi" {
		t.Fatalf("an alias within the budget read as %q", d.Steps[1].Spec.Command)
	}
	if _, err := ParseDefinition(strings.Repeat("#", MaxDefinitionSize+1)); err == nil || !strings.Contains(err.Error(), "bytes; the limit is 1,048,576") {
		t.Fatalf("a definition over the size: %v", err)
	}
}

// A definition already read (a stored run's, which a schedule reruns) is
// measured as its text would be: the same definition counts alike.
func TestDefinitionUsageCountsAsTheText(t *testing.T) {
	text := "name: p\nproject: pr\nparams: {lr: \"0.1\"}\nsteps:\n  - name: a\n    computeResource: x\n    command: [echo, hi]\n    env: {A: b}\n"
	u := DefinitionUsage(parse(t, text))
	// 1 root, name, project, params map + key + value, 1 step, its name
	// and compute resource, the command list and its 2 items, the env map
	// + key + value.
	if u.Nodes != 1+2+3+1+2+3+3 || u.Bytes != int64(len("p"+"pr"+"lr"+"0.1"+"a"+"x"+"echo"+"hi"+"A"+"b")) {
		t.Fatalf("usage %+v", u)
	}
	big := &model.PipelineDefinition{Name: "p", Steps: []model.PipelineStepDef{{Name: "a", Spec: model.TaskSpec{Command: make([]string, 200_000)}}}}
	if err := Budget.Check(DefinitionUsage(big)); err == nil || !strings.Contains(err.Error(), "values; the limit is 100,000") {
		t.Fatalf("a stored definition of 200,000 values: %v", err)
	}
}
