package platform

import (
	"context"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/schedules"
	"github.com/klique-ai/klique/internal/platform/studies"
	"github.com/klique-ai/klique/internal/platform/tasks"
)

// newStudies wires the studies domain to the tasks domain: a trial is a
// clone of the study's base task enqueued by the one enqueue path, a trial
// stopped early is stopped by the abort path, and trials are ranked by
// compare's rules for a metric's direction and its final and best values.
func newStudies(k *kernel.Kernel, t *tasks.Tasks) *studies.Studies {
	return studies.New(k, studies.Deps{
		Clone: func(ctx context.Context, baseID, name string, params map[string]string, project, cr, key string) (*model.Task, error) {
			return t.CloneTask(ctx, baseID, tasks.CloneInput{Name: name, ParameterOverrides: params, Project: project, ComputeResource: cr, IdempotencyKey: key})
		},
		Stop:      t.StopAs,
		Target:    t.Target,
		Direction: tasks.Direction,
		Summarize: func(points []model.MetricPoint, direction string) (studies.Value, studies.Value, bool) {
			f, b, ok := tasks.Summarize(points, direction)
			return studies.Value(f), studies.Value(b), ok
		},
	})
}

// studyStarter lets a schedule start a study: each firing starts a new
// study from the target's definition, its parameters over the base task's
// fixed ones, as the schedule's owner, through StartStudy (so the compute
// resource is checked as them at creation and at every firing), with the
// firing's key as the idempotency key.
func studyStarter(st *studies.Studies) schedules.StarterFuncs {
	return schedules.StarterFuncs{
		CheckFunc: func(ctx context.Context, id string, params map[string]string) (schedules.Target, error) {
			v, err := st.CheckRerunStudy(ctx, id, params)
			if err != nil {
				return schedules.Target{}, err
			}
			return schedules.Target{Name: v.Name, ProjectID: v.ProjectID}, nil
		},
		StartFunc: func(ctx context.Context, id string, params map[string]string, key string) (string, error) {
			v, err := st.RerunStudy(ctx, id, params, key)
			if err != nil {
				return "", err
			}
			return v.ID, nil
		},
	}
}

// SubscribeStudy follows a study the caller may see (studyChanged): the
// study first, then again after each change, each checked against the
// subscriber's rights as they are then.
func (s *Service) SubscribeStudy(ctx context.Context, id string) (<-chan *studies.View, error) {
	v, err := s.studiesDomain.StudyView(ctx, id)
	if err != nil {
		return nil, err
	}
	tenantID, studyID := v.Study.TenantID, v.Study.ID
	ch, err := s.liveDomain.FollowObject(ctx, tenantID, "study", studyID, v,
		func(ctx context.Context) (any, error) { return s.studiesDomain.TenantStudyView(ctx, tenantID, studyID) },
		func(p *identity.Principal, obj any) bool { return studies.Sees(p, obj.(*studies.View).Study) })
	if err != nil {
		return nil, err
	}
	out := make(chan *studies.View, 1)
	go func() {
		defer close(out)
		for u := range ch {
			select {
			case out <- u.Object.(*studies.View):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
