package mcp

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/pipelines"
)

// PipelinesPlatform is what the pipeline tools ask of the platform.
type PipelinesPlatform interface {
	StartRun(ctx context.Context, in pipelines.RunInput) (*model.PipelineRun, error)
	PipelineRun(ctx context.Context, id string) (*model.PipelineRun, error)
	PipelineRunView(ctx context.Context, r *model.PipelineRun) (*pipelines.RunView, error)
}

type runPipelineArgs struct {
	Definition string            `json:"definition" jsonschema:"the pipeline as YAML or JSON: name, project, params (with defaults) and steps, each a task spec (command or repository, parameters, env, inputs) on its computeResource, with dependsOn, onFailure (stop or continue), retry and cache; templates {{params.NAME}}, {{steps.STEP.artifacts.NAME}} and {{steps.STEP.metrics.NAME}} (see docs/pipelines.md)"`
	Params     map[string]string `json:"params,omitempty" jsonschema:"values of the pipeline's declared parameters"`
	Project    string            `json:"project,omitempty" jsonschema:"a project instead of the definition's"`
}

type pipelineRunArgs struct {
	ID string `json:"id" jsonschema:"the run's id, as run_pipeline gave it"`
}

type pipelineRunView struct {
	ID         string             `json:"id"`
	Name       string             `json:"name"`
	State      string             `json:"state" jsonschema:"pending, running, completed, failed or aborted"`
	Reason     string             `json:"reason"`
	Owner      string             `json:"owner"`
	Params     map[string]string  `json:"params"`
	CreatedAt  time.Time          `json:"createdAt"`
	FinishedAt *time.Time         `json:"finishedAt,omitempty"`
	Steps      []pipelineStepView `json:"steps"`
}

type pipelineStepView struct {
	Name            string     `json:"name"`
	State           string     `json:"state" jsonschema:"pending, queued, running, completed, failed, skipped, cached or aborted"`
	Reason          string     `json:"reason"`
	DependsOn       []string   `json:"dependsOn"`
	ComputeResource string     `json:"computeResource"`
	TaskID          string     `json:"taskId,omitempty" jsonschema:"its current task (get_task reads it); a cached step's is the earlier run's"`
	TaskIDs         []string   `json:"taskIds" jsonschema:"every task of the step, one per attempt"`
	Attempts        int        `json:"attempts"`
	CachedFromRun   string     `json:"cachedFromRun,omitempty"`
	StartedAt       *time.Time `json:"startedAt,omitempty"`
	FinishedAt      *time.Time `json:"finishedAt,omitempty"`
}

func (s *Server) addPipelineTools() {
	addTool(s, toolDef{name: "run_pipeline", title: "Run a pipeline", writes: true, audited: true,
		description: "Start a run of a pipeline: a graph of steps, each an ordinary task on its own compute resource, enqueued as you by the control plane once the steps it depends on completed. " +
			"The whole definition is checked first (unknown references, cycles, bad templates, compute resources not open to you), and nothing runs when it is refused."}, s.runPipeline)
	addTool(s, toolDef{name: "get_pipeline_run", title: "Get a pipeline run",
		description: "A pipeline run you may see, with each step's state, reason, compute resource, tasks and attempts (cached steps name the earlier run they reuse)."}, s.getPipelineRun)
}

func (s *Server) runPipeline(ctx context.Context, in *runPipelineArgs) (*pipelineRunView, string, error) {
	if strings.TrimSpace(in.Definition) == "" {
		return nil, "", &argError{"argument 'definition' is missing: give the pipeline as YAML (name, project, params, steps)"}
	}
	r, err := s.svc.Pipelines.StartRun(ctx, pipelines.RunInput{Definition: in.Definition, Params: in.Params, Project: in.Project})
	if err != nil {
		return nil, "", err
	}
	return s.pipelineRunView(ctx, r)
}

func (s *Server) getPipelineRun(ctx context.Context, in *pipelineRunArgs) (*pipelineRunView, string, error) {
	r, err := s.svc.Pipelines.PipelineRun(ctx, strings.TrimSpace(in.ID))
	if err != nil {
		return nil, "", err
	}
	v, _, err := s.pipelineRunView(ctx, r)
	return v, "read pipeline run " + r.ID, err
}

func (s *Server) pipelineRunView(ctx context.Context, r *model.PipelineRun) (*pipelineRunView, string, error) {
	v, err := s.svc.Pipelines.PipelineRunView(ctx, r)
	if err != nil {
		return nil, "", err
	}
	out := &pipelineRunView{ID: v.ID, Name: v.Name, State: string(v.State), Reason: v.Reason, Owner: v.OwnerName, Params: v.Params,
		CreatedAt: v.CreatedAt, FinishedAt: v.FinishedAt, Steps: []pipelineStepView{}}
	for _, st := range v.Steps {
		out.Steps = append(out.Steps, pipelineStepView{Name: st.Name, State: string(st.State), Reason: st.Reason, DependsOn: st.DependsOn,
			ComputeResource: st.ComputeResourceName, TaskID: st.TaskID, TaskIDs: st.TaskIDs, Attempts: st.Attempts,
			CachedFromRun: st.CachedFromRunID, StartedAt: st.StartedAt, FinishedAt: st.FinishedAt})
	}
	return out, "", nil
}
