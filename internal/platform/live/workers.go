package live

import (
	"context"
	"sync"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform/view"
)

// WorkerUpdate says a worker joined, or its heartbeats stopped or resumed.
type WorkerUpdate struct {
	TenantID string
	Kind     string
	At       time.Time
	Worker   *view.WorkerView
	Workers  []*view.WorkerView
	Missed   int
}

// SubscribeWorkers follows the tenant's workers: joins, and heartbeats lost
// (found by looking at each worker's last heartbeat every heartbeat
// interval, since a silent worker sends nothing to notice it by).
func (s *Live) SubscribeWorkers(ctx context.Context) (<-chan *WorkerUpdate, error) {
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	first, err := s.reads.TenantWorkers(ctx, tenantID)
	if err != nil {
		return nil, s.failSubscription(ctx, err, release)
	}
	var mu sync.Mutex
	online := map[string]bool{}
	seen := func(ws []*view.WorkerView) {
		for _, w := range ws {
			online[w.ID] = w.Online
		}
	}
	// look reads the tenant's workers and tells what changes finds in
	// them; then they are the workers last seen.
	look := func(ctx context.Context, changes func(ws []*view.WorkerView) []*WorkerUpdate) []*WorkerUpdate {
		ws, err := s.reads.TenantWorkers(ctx, tenantID)
		if err != nil {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		out := changes(ws)
		seen(ws)
		return out
	}
	r := s.subs.workers.Join("workers|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool { return e.TenantID == tenantID && e.Kind == "worker.registered" },
		func(ctx context.Context, batch []events.Event) []*WorkerUpdate {
			return look(ctx, func(ws []*view.WorkerView) (out []*WorkerUpdate) {
				for _, e := range batch {
					for _, w := range ws {
						if w.ID == e.ObjectID {
							out = append(out, &WorkerUpdate{TenantID: tenantID, Kind: e.Kind, At: e.At, Worker: w, Workers: ws})
						}
					}
				}
				return out
			})
		}, s.agent.Heartbeat, func(ctx context.Context) []*WorkerUpdate {
			return look(ctx, func(ws []*view.WorkerView) (out []*WorkerUpdate) {
				now := s.k.Now()
				for _, w := range ws {
					was, known := online[w.ID]
					switch {
					case known && was && !w.Online:
						out = append(out, &WorkerUpdate{TenantID: tenantID, Kind: "worker.heartbeat_lost", At: now, Worker: w, Workers: ws})
					case known && !was && w.Online:
						out = append(out, &WorkerUpdate{TenantID: tenantID, Kind: "worker.back", At: now, Worker: w, Workers: ws})
					}
				}
				return out
			})
		}))
	mu.Lock()
	seen(first)
	mu.Unlock()
	return pump(ctx, s, r, release, []*WorkerUpdate{{TenantID: tenantID, Kind: "snapshot", At: s.k.Now(), Workers: first}},
		func(p *identity.Principal, u *WorkerUpdate) (*WorkerUpdate, bool) { return u, p.TenantID == u.TenantID }), nil
}
