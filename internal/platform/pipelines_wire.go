package platform

import (
	"context"
	"errors"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/platform/schedules"
	"github.com/klique-ai/klique/internal/platform/tasks"
	"github.com/klique-ai/klique/internal/store"
)

// wirePipelines gives the pipelines domain the tasks domain's one enqueue
// path (and its checks and abort), so a step is enqueued under the same
// rules as any task.
func (s *Service) wirePipelines() {
	in := func(t pipelines.StepTask) tasks.EnqueueInput {
		return tasks.EnqueueInput{Name: t.Name, Project: t.Project, ComputeResource: t.ComputeResource, Group: t.Group,
			Spec: t.Spec, IdempotencyKey: t.IdempotencyKey}
	}
	s.pipelinesDomain.SetTasks(pipelines.TaskPath{
		Check: func(ctx context.Context, t pipelines.StepTask) (*model.Task, error) {
			return s.tasksDomain.CheckEnqueue(ctx, in(t))
		},
		Enqueue: func(ctx context.Context, t pipelines.StepTask) (*model.Task, error) {
			return s.tasksDomain.EnqueueTask(ctx, in(t))
		},
		Abort:         s.tasksDomain.AbortTask,
		AbortAsSystem: s.tasksDomain.AbortAsSystem,
	})
	// The step cache compares a step's inputs by their content's hash
	// where the artifact has one (a stored artifact, or a pointer whose
	// publisher gave it), so a rerun of an upstream step that produced the
	// same bytes still lets its dependants be reused.
	s.pipelinesDomain.SetArtifactHashes(func(ctx context.Context, tenantID, taskID, name string) (string, bool, error) {
		a, err := s.k.Store.GetArtifact(ctx, tenantID, taskID, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "", false, nil
		case err != nil:
			return "", false, err
		}
		return a.SHA256, a.SHA256 != "", nil
	})
	// A pipeline.finished trigger is matched by the pipelines domain, from
	// the runs' end times in the database.
	s.schedulesDomain.SetScheduleTriggerSource(model.TriggerPipelineFinished, pipelines.NewFinishedTrigger(s.k))
	// A schedule of a pipeline reruns an earlier run's definition (the
	// run it names) with its parameters over the run's, as the schedule's
	// owner; the firing's key makes the start idempotent.
	s.schedulesDomain.SetScheduleStarter(model.ScheduleTargetPipeline, schedules.StarterFuncs{
		CheckFunc: func(ctx context.Context, id string, _ map[string]string) (schedules.Target, error) {
			r, err := s.pipelinesDomain.PipelineRun(ctx, id)
			if err != nil {
				return schedules.Target{}, err
			}
			return schedules.Target{Name: r.Name, ProjectID: r.ProjectID}, nil
		},
		StartFunc: func(ctx context.Context, id string, params map[string]string, key string) (string, error) {
			r, err := s.pipelinesDomain.RerunPipeline(ctx, id, params, key)
			if err != nil {
				return "", err
			}
			return r.ID, nil
		},
	})
}
