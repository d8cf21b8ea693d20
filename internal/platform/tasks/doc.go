// Package tasks is the tasks domain of the platform service: enqueueing
// work on a compute resource, cloning and aborting it, the task spec and
// its checks, local runs (runs on their owner's machine, recorded by the
// SDK), and reading a task, its place in line, why it waits, its logs and
// its metrics.
package tasks

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Tasks is the tasks domain.
type Tasks struct {
	k *kernel.Kernel
	// poolWorkers tells why placed work waits (Deps.PoolWorkers).
	poolWorkers PoolWorkersFunc
	// logLimit bounds a local run's log (Deps.LogLimit).
	logLimit int64
	// inputCheck checks a task's inputs at enqueue (Deps.InputCheck).
	inputCheck InputCheckFunc
}

// Deps is what the tasks domain needs of the rest of the platform, given
// at construction (the platform service wires it from the other domains).
// A nil function disables what it serves, as documented on its type.
type Deps struct {
	// InputCheck checks, at enqueue, that the enqueuer may read a task's
	// inputs (the artifacts domain's rule).
	InputCheck InputCheckFunc
	// PoolWorkers says what the fleet knows of a pool's workers, to tell
	// why placed work waits.
	PoolWorkers PoolWorkersFunc
	// LogLimit bounds the log of a local run as the worker protocol
	// bounds a task's (KLIQUE_TASK_LOG_LIMIT); 16 MiB when zero.
	LogLimit int64
}

// New returns the tasks domain over a kernel, wired to what it needs.
func New(k *kernel.Kernel, d Deps) *Tasks {
	return &Tasks{k: k, inputCheck: d.InputCheck, poolWorkers: d.PoolWorkers, logLimit: d.LogLimit}
}

// Task returns a task the caller may see.
func (s *Tasks) Task(ctx context.Context, id string) (*model.Task, error) { return s.k.Task(ctx, id) }
