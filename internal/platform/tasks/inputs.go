package tasks

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// InputCheckFunc checks, inside the enqueue's transaction, that the
// enqueuer may read every input of a task (the artifacts domain's rule,
// wired by the facade).
type InputCheckFunc func(ctx context.Context, q store.Queries, p *identity.Principal, inputs []model.ArtifactInput) error

// checkInputs runs the wired check; without one, a task with inputs is
// refused rather than enqueued unchecked.
func (s *Tasks) checkInputs(t *kernel.Txn, task *model.Task) error {
	if len(task.Spec.Inputs) == 0 {
		return nil
	}
	if s.inputCheck == nil {
		return kernel.Unavailable("this control plane cannot check task inputs")
	}
	return s.inputCheck(t.Ctx, t.Q, t.P, task.Spec.Inputs)
}

// inputProblems checks the inputs' syntax: names the worker can make a
// variable of, each once, each naming a run and an artifact.
func inputProblems(inputs []model.ArtifactInput) []string {
	var ps []string
	if len(inputs) > model.MaxTaskInputs {
		ps = append(ps, fmt.Sprintf("%d inputs, more than %d", len(inputs), model.MaxTaskInputs))
	}
	seen := map[string]bool{}
	for _, in := range inputs {
		if msg := model.InputNameProblem(in.Name); msg != "" {
			ps = append(ps, msg)
			continue
		}
		// Names that differ only in case or punctuation would share a
		// variable.
		env := model.InputEnvName(in.Name)
		if seen[env] {
			ps = append(ps, fmt.Sprintf("input %s is named twice (or as another input but for case or '-', '.', '_'): give each input its own name", in.Name))
		}
		seen[env] = true
		if in.TaskID == "" || len(in.TaskID) > 64 {
			ps = append(ps, fmt.Sprintf("input %s: give the id of the run it comes from (RUN/ARTIFACT)", in.Name))
		}
		if msg := model.ArtifactNameProblem(in.Artifact); msg != "" {
			ps = append(ps, fmt.Sprintf("input %s: %s", in.Name, msg))
		}
	}
	return ps
}
