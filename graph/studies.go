package graph

import (
	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/studies"
)

// startStudyIn is a startStudy input as the studies domain takes it; the
// domain checks it.
func startStudyIn(in gqlmodel.StartStudyInput) studies.StartInput {
	spec := model.StudySpec{Strategy: in.Strategy, Objective: in.Objective, Summary: deref(in.Summary),
		MaxConcurrent: deref(in.MaxConcurrent), Space: []model.SearchParam{}}
	if in.Seed != nil {
		spec.Seed = int64(*in.Seed)
	}
	if in.Direction != nil {
		spec.Direction = "max"
		if *in.Direction == gqlmodel.MetricDirectionMin {
			spec.Direction = "min"
		}
	}
	if in.Budget != nil {
		spec.Budget = model.StudyBudget{Trials: deref(in.Budget.Trials), GPUHours: deref(in.Budget.GpuHours)}
	}
	for _, p := range in.Space {
		if p == nil {
			continue
		}
		spec.Space = append(spec.Space, model.SearchParam{Name: p.Name, Kind: p.Kind, Values: p.Values, Lo: deref(p.Lo), Hi: deref(p.Hi), Step: deref(p.Step)})
	}
	if h := in.Halving; h != nil {
		spec.Halving = &model.Halving{Resource: h.Resource, MinResource: h.MinResource, MaxResource: h.MaxResource, Eta: deref(h.Eta)}
	}
	return studies.StartInput{Name: in.Name, BaseTask: in.BaseTask, Project: deref(in.Project), ComputeResource: deref(in.ComputeResource),
		Group: deref(in.Group), Spec: spec}
}
