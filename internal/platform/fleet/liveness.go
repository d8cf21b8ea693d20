package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// PoolWorkers is what the fleet knows of one pool's workers: how many
// heartbeat within their lease, how many are registered, the last
// heartbeat of any of them, and the claim timeout that applies to the
// work placed there (docs/engine.md, "Work placed where no worker is").
type PoolWorkers struct {
	PoolID     string
	PoolName   string
	Online     int
	Registered int
	// LastSeen is the last heartbeat of any worker of the pool; zero when
	// none has registered.
	LastSeen time.Time
	// Autoscaled: an autoscaler brings the pool's nodes.
	Autoscaled bool
	// ClaimTimeout is the pool's own, or the default (0: off).
	ClaimTimeout time.Duration
}

// PoolWorkers says, for every pool of a tenant, what the fleet knows of its
// workers. The caller has checked that the asker may see what it is for
// (a task, a pool): everyone in a tenant may see what capacity serves it.
func (s *Fleet) PoolWorkers(ctx context.Context, tenantID string) (map[string]*PoolWorkers, error) {
	e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	ws, err := s.k.Store.ListWorkers(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	as, err := s.k.Store.ListAutoscalers(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list autoscalers: %w", err)
	}
	out := make(map[string]*PoolWorkers, len(e.Pools))
	for _, p := range e.Pools {
		out[p.ID] = &PoolWorkers{PoolID: p.ID, PoolName: p.Name}
	}
	for _, a := range as {
		if pw := out[a.PoolID]; pw != nil {
			pw.Autoscaled = true
		}
	}
	for _, p := range e.Pools {
		out[p.ID].ClaimTimeout = p.EffectiveClaimTimeout(out[p.ID].Autoscaled)
	}
	now := s.k.Now()
	for _, w := range ws {
		pw := out[w.PoolID]
		if pw == nil {
			continue
		}
		pw.Registered++
		if now.Sub(w.LastHeartbeatAt) <= s.agent.Lease {
			pw.Online++
		}
		if w.LastHeartbeatAt.After(pw.LastSeen) {
			pw.LastSeen = w.LastHeartbeatAt
		}
	}
	return out, nil
}

// PoolWorkersOf is PoolWorkers for one pool of the caller's tenant.
func (s *Fleet) PoolWorkersOf(ctx context.Context, poolID string) (*PoolWorkers, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.PoolWorkers(ctx, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	pw := all[poolID]
	if pw == nil {
		return nil, kernel.NotFound("no pool %s", kernel.Quote(poolID))
	}
	return pw, nil
}

// LastSeenAt is LastSeen for the API: null when no worker has registered.
func (pw *PoolWorkers) LastSeenAt() *time.Time {
	if pw.LastSeen.IsZero() {
		return nil
	}
	t := pw.LastSeen
	return &t
}

// ClaimTimeoutSeconds is ClaimTimeout for the API: null when off.
func (pw *PoolWorkers) ClaimTimeoutSeconds() *int {
	if pw.ClaimTimeout <= 0 {
		return nil
	}
	s := int(pw.ClaimTimeout / time.Second)
	return &s
}

// NoWorker says that no worker of the pool is online, and since when, in
// the words a task placed there shows; nil while one is online.
func (pw *PoolWorkers) NoWorker() *string {
	if pw.Online > 0 {
		return nil
	}
	s := engine.NoWorkerSentence(pw.PoolName, pw.LastSeen)
	return &s
}
