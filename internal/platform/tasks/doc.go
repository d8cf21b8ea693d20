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
	// poolWorkers tells why placed work waits (SetPoolWorkers).
	poolWorkers PoolWorkersFunc
	// logLimit bounds a local run's log (SetLogLimit).
	logLimit int64
}

// New returns the tasks domain over a kernel.
func New(k *kernel.Kernel) *Tasks { return &Tasks{k: k} }

// Task returns a task the caller may see.
func (s *Tasks) Task(ctx context.Context, id string) (*model.Task, error) { return s.k.Task(ctx, id) }
