// Package pipelines owns pipeline runs: a graph of steps, each an ordinary
// task on its own compute resource, advanced by a controller in the
// control plane (Reconcile), never by a task holding a GPU.
//
// A run carries the definition it runs (there is no separate pipeline
// object): runs of one name in one project are runs of one pipeline, and
// share its step cache. Every step's task goes through the platform's one
// enqueue path as the run's owner, so policies, reservations, limits,
// budgets, preemption and the ledger apply to each step as to any task.
// The package imports no other domain: the platform service gives it the
// task path at construction (Deps).
package pipelines

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// StepTask is a step's task as the enqueue path takes it.
type StepTask struct {
	Name            string
	Project         string
	ComputeResource string
	Group           string
	Spec            model.TaskSpec
	// IdempotencyKey makes a second enqueue of the same step attempt (by
	// another replica, or after a crash) return the first one's task.
	IdempotencyKey string
}

// TaskPath is the tasks domain's enqueue path, as the caller in ctx.
type TaskPath struct {
	// Check runs the enqueue's checks and returns the task it would
	// write, writing nothing.
	Check func(ctx context.Context, t StepTask) (*model.Task, error)
	// Enqueue enqueues the task.
	Enqueue func(ctx context.Context, t StepTask) (*model.Task, error)
	// Abort aborts a task as the caller, with reason.
	Abort func(ctx context.Context, id, reason string) (*model.Task, error)
	// AbortAsSystem aborts a task on the control plane's own authority.
	AbortAsSystem func(ctx context.Context, tenantID, id, actor, reason string) (*model.Task, error)
}

// ArtifactHashes reads the SHA-256 of a run's artifact ("" and false when
// it is not known), for the step cache. Without it, inputs are compared
// by run and name.
type ArtifactHashes func(ctx context.Context, tenantID, taskID, name string) (string, bool, error)

// Pipelines is the domain.
type Pipelines struct {
	k      *kernel.Kernel
	tasks  TaskPath
	hashes ArtifactHashes
}

// Deps is what the pipelines domain needs of the tasks and artifacts
// domains, given at construction (the platform service wires it).
type Deps struct {
	// Tasks is the tasks domain's enqueue and abort paths; a run cannot
	// start without them.
	Tasks TaskPath
	// Hashes reads artifacts' hashes for the step cache; nil compares
	// inputs by run and name.
	Hashes ArtifactHashes
}

// New returns the domain over a kernel, wired to what it needs.
func New(k *kernel.Kernel, d Deps) *Pipelines {
	return &Pipelines{k: k, tasks: d.Tasks, hashes: d.Hashes}
}

// EventKind is the kind of the event published whenever a run or one of
// its steps changes.
const EventKind = "pipeline_run.changed"

// ObjectKind is what the audit trail and events call a run.
const ObjectKind = "pipeline_run"
