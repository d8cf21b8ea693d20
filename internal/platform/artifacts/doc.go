// Package artifacts is the artifacts domain of the platform service: what
// runs publish (stored files and pointers to where larger outputs stay),
// who may read them, and earlier runs' artifacts as the inputs of later
// ones (docs/experiments.md, "Artifacts and output destinations").
//
// Who may: a run's owner publishes on it with their own credential while
// the run exists, and the run's worker publishes for its current attempt
// (fenced by the attempt number, as every report); whoever may see a run
// (the rule of its logs and metrics) lists and reads its artifacts, and
// anyone else, in another group or another tenant, finds nothing. An input
// is checked twice: at enqueue, the enqueuer must be able to read it; when
// the worker fetches it, the task's owner must still be able to.
package artifacts

import (
	"context"

	"github.com/klique-ai/klique/internal/artifacts"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Options configure the domain and give it what it needs of the fleet,
// at construction (the platform service wires them).
type Options struct {
	// Blobs keeps stored artifacts' bytes; without it, only pointers can
	// be published.
	Blobs artifacts.Blobs
	// MaxBytes is the largest artifact stored (config.DefaultArtifactMaxBytes
	// when 0).
	MaxBytes int64
	// HeldTask is the fleet's check of a worker's hold on a task; without
	// it, workers can neither publish nor fetch (CodeUnavailable).
	HeldTask HeldTaskFunc
}

// DefaultMaxBytes is the stored limit when Options.MaxBytes is 0.
const DefaultMaxBytes = 256 << 20

// HeldTaskFunc returns the task the calling worker (or task credential)
// holds at attempt, as the fleet checks every report: another pool's or an
// old attempt's is refused.
type HeldTaskFunc func(ctx context.Context, taskID string, attempt int) (*model.Task, error)

// Artifacts is the artifacts domain.
type Artifacts struct {
	k        *kernel.Kernel
	blobs    artifacts.Blobs
	maxBytes int64
	heldTask HeldTaskFunc
}

// New returns the domain over a kernel.
func New(k *kernel.Kernel, o Options) *Artifacts {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.HeldTask == nil {
		o.HeldTask = func(context.Context, string, int) (*model.Task, error) {
			return nil, kernel.Unavailable("the worker protocol is not wired to artifacts")
		}
	}
	return &Artifacts{k: k, blobs: o.Blobs, maxBytes: o.MaxBytes, heldTask: o.HeldTask}
}

// ArtifactMaxBytes is the largest artifact stored.
func (s *Artifacts) ArtifactMaxBytes() int64 { return s.maxBytes }
