package graph

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/pipelines"
)

// PipelinesPlatform is what the pipeline resolvers ask of the platform.
type PipelinesPlatform interface {
	StartRun(ctx context.Context, in pipelines.RunInput) (*model.PipelineRun, error)
	PipelineRun(ctx context.Context, id string) (*model.PipelineRun, error)
	PipelineRuns(ctx context.Context, f pipelines.RunFilter, page model.Page) ([]*model.PipelineRun, error)
	AbortPipelineRun(ctx context.Context, id, reason string) (*model.PipelineRun, error)
	PipelineRunView(ctx context.Context, r *model.PipelineRun) (*pipelines.RunView, error)
	SubscribePipelineRun(ctx context.Context, id string) (<-chan *pipelines.RunView, error)
	PipelineStepOfTask(ctx context.Context, t *model.Task) (*model.PipelineTaskLink, error)
}

// pipelineRun describes a run the caller has read.
func (r *Resolver) pipelineRun(ctx context.Context, run *model.PipelineRun, err error) (*gqlmodel.PipelineRun, error) {
	if err != nil {
		return nil, err
	}
	v, err := r.Svc.Pipelines.PipelineRunView(ctx, run)
	if err != nil {
		return nil, err
	}
	return toPipelineRun(v), nil
}

func toPipelineRun(v *pipelines.RunView) *gqlmodel.PipelineRun {
	def, _ := json.Marshal(v.Definition)
	out := &gqlmodel.PipelineRun{ID: v.ID, Name: v.Name, ProjectID: v.ProjectID, OwnerName: v.OwnerName,
		State: gqlmodel.PipelineRunState(strings.ToUpper(string(v.State))), Reason: v.Reason, Params: v.Params,
		Definition: string(def), CreatedAt: v.CreatedAt, FinishedAt: v.FinishedAt, Steps: []*gqlmodel.PipelineStep{}}
	if out.Params == nil {
		out.Params = map[string]string{}
	}
	for _, s := range v.Steps {
		out.Steps = append(out.Steps, &gqlmodel.PipelineStep{Name: s.Name, State: gqlmodel.PipelineStepState(strings.ToUpper(string(s.State))),
			Reason: s.Reason, DependsOn: s.DependsOn, Level: s.Level, ComputeResourceID: s.ComputeResourceID,
			ComputeResourceName: s.ComputeResourceName, TaskID: optional(s.TaskID), TaskIds: s.TaskIDs, Attempts: s.Attempts,
			Retry: s.Retry, OnFailure: s.OnFailure, CachedFromRunID: optional(s.CachedFromRunID), StartedAt: s.StartedAt, FinishedAt: s.FinishedAt})
	}
	return out
}
