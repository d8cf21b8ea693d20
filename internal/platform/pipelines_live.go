package platform

import (
	"context"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform/pipelines"
)

// SubscribePipelineRun follows a run the caller may see
// (pipelineRunChanged): the run first, then again after each change of it
// or its steps, until it has ended. It goes through the live domain like
// every other subscription, so it counts against the caller's
// subscription limits, shares one read per change among everyone
// following the run, and checks each update against the subscriber's
// rights as they are then (a member removed from the run's group stops
// getting them).
func (s *Service) SubscribePipelineRun(ctx context.Context, id string) (<-chan *pipelines.RunView, error) {
	r, err := s.pipelinesDomain.PipelineRun(ctx, id)
	if err != nil {
		return nil, err
	}
	first, err := s.pipelinesDomain.PipelineRunView(ctx, r)
	if err != nil {
		return nil, err
	}
	tenantID, runID := r.TenantID, r.ID
	ch, err := s.liveDomain.FollowObject(ctx, tenantID, pipelines.ObjectKind, runID, first,
		func(ctx context.Context) (any, error) { return s.pipelinesDomain.TenantRunView(ctx, tenantID, runID) },
		func(p *identity.Principal, obj any) bool {
			return pipelines.Sees(p, obj.(*pipelines.RunView).PipelineRun)
		})
	if err != nil {
		return nil, err
	}
	out := make(chan *pipelines.RunView, 1)
	go func() {
		defer close(out)
		for u := range ch {
			v := u.Object.(*pipelines.RunView)
			select {
			case out <- v:
			case <-ctx.Done():
				return
			}
			if v.State.Final() {
				return
			}
		}
	}()
	return out, nil
}
