package platform

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/platform/tasks"
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
}
