package studies

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// RerunStudy starts, as the caller, a new study with the definition of one
// they see: its base task, search space, strategy, objective, limits,
// project and compute resource, with params set over the base task's
// fixed parameters (the earlier study's StudySpec.Parameters, then
// params). It is what a schedule of a study starts; key is the firing's
// idempotency key, so a firing tried twice starts one study.
func (s *Studies) RerunStudy(ctx context.Context, id string, params map[string]string, key string) (*model.Study, error) {
	old, err := s.Study(ctx, id)
	if err != nil {
		return nil, err
	}
	in := rerunInput(old, params)
	in.IdempotencyKey = key
	return s.StartStudy(ctx, in)
}

// CheckRerunStudy checks, as the caller, what RerunStudy would refuse
// before anything runs: the study and its base task must be theirs to
// see, its project and compute resource open to them, and params must not
// name a parameter the study searches. It starts nothing.
func (s *Studies) CheckRerunStudy(ctx context.Context, id string, params map[string]string) (*model.Study, error) {
	old, err := s.Study(ctx, id)
	if err != nil {
		return nil, err
	}
	if ps := fixedProblems(rerunInput(old, params).Spec); len(ps) > 0 {
		return nil, &kernel.Error{Code: kernel.CodeInvalid, Message: "study " + kernel.Quote(old.Name) + ": " + strings.Join(ps, "; "), Problems: ps}
	}
	if _, err := s.k.Task(ctx, old.BaseTaskID); err != nil {
		return nil, err
	}
	if _, _, err := s.d.Target(ctx, old.ProjectID, old.ComputeResourceID, ""); err != nil {
		return nil, err
	}
	return old, nil
}

// rerunInput is the start of a study like old, with params over its fixed
// parameters.
func rerunInput(old *model.Study, params map[string]string) StartInput {
	spec := old.Spec
	spec.Space = slices.Clone(old.Spec.Space)
	fixed := maps.Clone(old.Spec.Parameters)
	if len(params) > 0 && fixed == nil {
		fixed = map[string]string{}
	}
	maps.Copy(fixed, params)
	spec.Parameters = fixed
	return StartInput{Name: old.Name, BaseTask: old.BaseTaskID, Project: old.ProjectID, ComputeResource: old.ComputeResourceID, Spec: spec}
}

// fixedProblems refuses fixed parameters that the search sets on every
// trial (a dimension of the space, or successive halving's resource): the
// search would override them silently.
func fixedProblems(spec model.StudySpec) []string {
	searched := map[string]bool{}
	for _, p := range spec.Space {
		searched[p.Name] = true
	}
	if spec.Halving != nil {
		searched[spec.Halving.Resource] = true
	}
	var ps []string
	for _, name := range slices.Sorted(maps.Keys(spec.Parameters)) {
		if strings.TrimSpace(name) == "" {
			ps = append(ps, "a fixed parameter has no name: give NAME=VALUE")
		} else if searched[name] {
			ps = append(ps, fmt.Sprintf("parameter %s is searched by the study, so it cannot be fixed: set only the base task's other parameters", name))
		}
	}
	return ps
}

// trialParams are what a trial's task is cloned with: the study's fixed
// parameters, then the trial's searched ones.
func trialParams(st *model.Study, tr *model.StudyTrial) map[string]string {
	if len(st.Spec.Parameters) == 0 {
		return tr.Params
	}
	out := maps.Clone(st.Spec.Parameters)
	maps.Copy(out, tr.Params)
	return out
}
