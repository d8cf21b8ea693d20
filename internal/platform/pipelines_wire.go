package platform

import (
	"context"
	"errors"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/platform/schedules"
	"github.com/klique-ai/klique/internal/platform/tasks"
	"github.com/klique-ai/klique/internal/store"
)

// newPipelines wires the pipelines domain to the tasks domain's one
// enqueue path (and its checks and abort), so a step is enqueued under the
// same rules as any task.
func newPipelines(k *kernel.Kernel, t *tasks.Tasks) *pipelines.Pipelines {
	in := func(st pipelines.StepTask) tasks.EnqueueInput {
		return tasks.EnqueueInput{Name: st.Name, Project: st.Project, ComputeResource: st.ComputeResource, Group: st.Group,
			Spec: st.Spec, IdempotencyKey: st.IdempotencyKey}
	}
	return pipelines.New(k, pipelines.Deps{
		Tasks: pipelines.TaskPath{
			Check: func(ctx context.Context, st pipelines.StepTask) (*model.Task, error) {
				return t.CheckEnqueue(ctx, in(st))
			},
			Enqueue: func(ctx context.Context, st pipelines.StepTask) (*model.Task, error) {
				return t.EnqueueTask(ctx, in(st))
			},
			Abort:         t.AbortTask,
			AbortAsSystem: t.AbortAsSystem,
		},
		Hashes: artifactHashes(k.Store),
	})
}

// artifactHashes lets the step cache compare a step's inputs by their
// content's hash where the artifact has one (a stored artifact, or a
// pointer whose publisher gave it), so a rerun of an upstream step that
// produced the same bytes still lets its dependants be reused.
func artifactHashes(st store.Store) pipelines.ArtifactHashes {
	return func(ctx context.Context, tenantID, taskID, name string) (string, bool, error) {
		a, err := st.GetArtifact(ctx, tenantID, taskID, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "", false, nil
		case err != nil:
			return "", false, err
		}
		return a.SHA256, a.SHA256 != "", nil
	}
}

// pipelineStarter lets a schedule of a pipeline rerun an earlier run's
// definition (the run it names) with its parameters over the run's, as the
// schedule's owner; the firing's key makes the start idempotent.
func pipelineStarter(p *pipelines.Pipelines) schedules.StarterFuncs {
	return schedules.StarterFuncs{
		CheckFunc: func(ctx context.Context, id string, _ map[string]string) (schedules.Target, error) {
			r, err := p.PipelineRun(ctx, id)
			if err != nil {
				return schedules.Target{}, err
			}
			return schedules.Target{Name: r.Name, ProjectID: r.ProjectID}, nil
		},
		StartFunc: func(ctx context.Context, id string, params map[string]string, key string) (string, error) {
			r, err := p.RerunPipeline(ctx, id, params, key)
			if err != nil {
				return "", err
			}
			return r.ID, nil
		},
	}
}
