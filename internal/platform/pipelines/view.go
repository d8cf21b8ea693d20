package pipelines

import (
	"context"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// RunView is a run as the channels show it: with its owner's name and,
// per step, its dependencies, level in the graph, compute resource name
// and failure policy, so the GraphQL API, MCP tools, the CLI and the
// dashboard's graph show the same thing.
type RunView struct {
	*model.PipelineRun
	OwnerName string
	Steps     []StepView
}

// StepView is a step with what its definition says of it.
type StepView struct {
	*model.PipelineStep
	DependsOn           []string
	Level               int
	ComputeResourceName string
	Retry               int
	OnFailure           string
}

// PipelineRunView describes a run the caller has read (PipelineRun,
// StartRun, AbortPipelineRun).
func (s *Pipelines) PipelineRunView(ctx context.Context, r *model.PipelineRun) (*RunView, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, e, r), nil
}

func (s *Pipelines) view(ctx context.Context, e *estate.Estate, r *model.PipelineRun) *RunView {
	v := &RunView{PipelineRun: r}
	if u, err := s.k.Store.GetUser(ctx, r.TenantID, r.OwnerID); err == nil {
		v.OwnerName = u.Name
	}
	plan, _ := Check(&r.Definition, r.Params)
	var levels map[string]int
	if plan != nil {
		levels = plan.Levels()
	}
	for i, st := range r.Steps {
		sv := StepView{PipelineStep: st, DependsOn: []string{}, OnFailure: model.FailureStop}
		if plan != nil {
			sv.DependsOn = append(sv.DependsOn, plan.Deps[st.Name]...)
			sv.Level = levels[st.Name]
		}
		if i < len(r.Definition.Steps) {
			d := r.Definition.Steps[i]
			sv.Retry = d.Retry
			if d.OnFailure != "" {
				sv.OnFailure = d.OnFailure
			}
		}
		if cr := e.ComputeResource(st.ComputeResourceID); cr != nil {
			sv.ComputeResourceName = cr.Name
		}
		v.Steps = append(v.Steps, sv)
	}
	return v
}

// TenantRunView describes a run of a tenant as any reader would see it,
// for a live subscription's shared read: whoever follows the run is
// checked against it with Sees before each update reaches them.
func (s *Pipelines) TenantRunView(ctx context.Context, tenantID, id string) (*RunView, error) {
	r, err := s.k.Store.GetPipelineRun(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, e, r), nil
}

// Sees reports whether p may see a run (as its task would be seen).
func Sees(p *identity.Principal, r *model.PipelineRun) bool { return sees(p, r) }
