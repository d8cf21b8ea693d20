// Package fleet is the fleet domain of the platform service: the worker
// protocol (register, claim with a lease, heartbeat, logs, metrics, the
// secrets a task names, the end of a task), the wait of a claim for work,
// worker credentials and the workers they connect, task credentials for
// work that runs out of a worker's reach, and cloud autoscalers.
package fleet

import (
	"sync"

	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Fleet is the fleet domain.
type Fleet struct {
	k     *kernel.Kernel
	agent AgentOptions
	// claims are the claims waiting for work, per pool.
	claims claimWaiters
	// redact holds, per running task attempt, the secret values to cut
	// out of its log lines.
	redact sync.Map
}

// New returns the fleet domain over a kernel.
func New(k *kernel.Kernel, o AgentOptions) *Fleet {
	return &Fleet{k: k, agent: o.withDefaults()}
}

// Agent returns the worker protocol's settings, with defaults applied.
func (s *Fleet) Agent() AgentOptions { return s.agent }
