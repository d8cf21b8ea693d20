// Package studies is the studies domain of the platform service:
// hyperparameter searches. A study clones trials from a base task, each
// with its parameters set by a strategy (grid, random, successive
// halving), runs them as ordinary tasks of its owner on its compute
// resource, and ranks them by an objective metric.
//
// Its controller (ReconcileStudies) runs in the control plane, not as a task
// holding a GPU: a pass every couple of seconds on the replica that runs
// the engine. Every change of a pass is written from the study's version
// the pass read (store.UpdateStudy), and each trial's task is enqueued
// with an idempotency key of its own, so two replicas passing at once
// never enqueue a trial twice nor exceed the study's concurrency.
//
// The tasks domain enqueues, stops and summarises metrics; this package
// reaches it only through the functions the facade wires (Deps), as a
// domain never imports another.
package studies

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Deps are what the studies domain needs of the tasks domain.
type Deps struct {
	// Clone enqueues a clone of base as the caller in ctx, with params
	// set, in project on computeResource, with idempotencyKey (CloneTask).
	Clone func(ctx context.Context, baseID, name string, params map[string]string, project, computeResource, idempotencyKey string) (*model.Task, error)
	// Stop ends a task on the control plane's authority with reason
	// (the abort path).
	Stop func(ctx context.Context, tenantID, taskID, actor, reason string) (*model.Task, error)
	// Target checks, as the caller in ctx, the project and compute
	// resource work would go to.
	Target func(ctx context.Context, project, computeResource, group string) (*model.Project, *model.ComputeResource, error)
	// Direction names a metric's better side from its name, as compare
	// does; Summarize returns the final and best values of a metric's
	// points, as compare does.
	Direction func(metric string) string
	Summarize func(points []model.MetricPoint, direction string) (final, best Value, ok bool)
}

// Value is a metric's value at a step.
type Value struct {
	Value float64
	Step  int64
}

// Studies is the studies domain.
type Studies struct {
	k *kernel.Kernel
	d Deps
}

// New returns the studies domain over a kernel, with the tasks domain's
// operations it uses.
func New(k *kernel.Kernel, d Deps) *Studies { return &Studies{k: k, d: d} }
