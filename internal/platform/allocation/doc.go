// Package allocation is the allocation domain of the platform service: the
// allocation model (GPU classes, pools, profiles, groups' resource
// policies, compute resources, projects) read, changed object by object or
// applied from an estate file; the engine's switch; each group's use
// against its policy; the ledger's usage; and the apply step of the
// engine's pass.
package allocation

import (
	"context"
	"sync"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Allocation is the allocation domain.
type Allocation struct {
	k *kernel.Kernel
	// names caches user names for the ledger rows of placements.
	names sync.Map // user id -> name
}

// New returns the allocation domain over a kernel.
func New(k *kernel.Kernel) *Allocation { return &Allocation{k: k} }

// Estate returns the caller's tenant's allocation model as the caller may
// see it (see kernel.Kernel.Estate).
func (s *Allocation) Estate(ctx context.Context) (*estate.Estate, error) { return s.k.Estate(ctx) }
