package pipelines

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
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
	return v, nil
}

// SubscribePipelineRun sends a run the caller may see as it changes,
// starting with the run as it is, and closes once it has ended (or the
// caller may no longer see it, or ctx ends). Each update is read again as
// the caller, so a member removed from the run's group stops getting them.
func (s *Pipelines) SubscribePipelineRun(ctx context.Context, id string) (<-chan *RunView, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	first, err := s.PipelineRun(ctx, id)
	if err != nil {
		return nil, err
	}
	runID, tenantID := first.ID, p.TenantID
	sub := s.k.Events.Subscribe(64, func(e events.Event) bool {
		return e.TenantID == tenantID && e.ObjectKind == ObjectKind && e.ObjectID == runID
	})
	out := make(chan *RunView, 1)
	go func() {
		defer close(out)
		defer sub.Close()
		send := func(r *model.PipelineRun) bool {
			v, err := s.PipelineRunView(ctx, r)
			if err != nil {
				return false
			}
			select {
			case out <- v:
				return !r.State.Final()
			case <-ctx.Done():
				return false
			}
		}
		if !send(first) {
			return
		}
		// A slow safety poll besides the events: an event lost to a slow
		// reader costs at most this long.
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.C:
				for len(sub.C) > 0 {
					<-sub.C
				}
			case <-tick.C:
			}
			r, err := s.PipelineRun(ctx, runID)
			if err != nil || !send(r) {
				return
			}
		}
	}()
	return out, nil
}
