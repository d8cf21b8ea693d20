package live

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// samePoolUse reports whether two views of a tenant's pools hold the same
// figures (what a tick would tell a subscriber nothing new about).
func samePoolUse(a, b *PoolUtilization) bool {
	if len(a.Pools) != len(b.Pools) || len(a.GPUClasses) != len(b.GPUClasses) {
		return false
	}
	for i := range a.Pools {
		x, y := a.Pools[i], b.Pools[i]
		if x.Pool.ID != y.Pool.ID || x.Declared != y.Declared || x.Used != y.Used || x.Free != y.Free ||
			x.OnlineWorkers != y.OnlineWorkers || x.Workers != y.Workers {
			return false
		}
	}
	for i := range a.GPUClasses {
		x, y := a.GPUClasses[i], b.GPUClasses[i]
		if x.GPUClass.ID != y.GPUClass.ID || x.Declared != y.Declared || x.Used != y.Used || x.Free != y.Free {
			return false
		}
	}
	return true
}

// PoolUse is one pool's declared and used GPUs.
type PoolUse struct {
	Pool          *model.Pool
	Declared      int
	Used, Free    model.MilliGPU
	OnlineWorkers int
	Workers       int
}

// UsedGPUs is Used in GPUs, as the API shows it.
func (u *PoolUse) UsedGPUs() float64 { return u.Used.Float() }

// FreeGPUs is Free in GPUs, as the API shows it.
func (u *PoolUse) FreeGPUs() float64 { return u.Free.Float() }

// GPUClassUse is one GPU class's declared and used GPUs over all pools.
type GPUClassUse struct {
	GPUClass   *model.GPUClass
	Declared   int
	Used, Free model.MilliGPU
}

// UsedGPUs is Used in GPUs, as the API shows it.
func (u *GPUClassUse) UsedGPUs() float64 { return u.Used.Float() }

// FreeGPUs is Free in GPUs, as the API shows it.
func (u *GPUClassUse) FreeGPUs() float64 { return u.Free.Float() }

// PoolUtilization is a tenant's estate in use.
type PoolUtilization struct {
	TenantID   string
	Kind       string
	At         time.Time
	Pools      []PoolUse
	GPUClasses []GPUClassUse
	Missed     int
}

// SubscribePoolUtilization follows used and declared GPUs per pool and per
// GPU class: what everyone in a tenant may see of the capacity serving it.
func (s *Live) SubscribePoolUtilization(ctx context.Context) (<-chan *PoolUtilization, error) {
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	// last is what the topic's feed published last, starting from the view
	// now (used only when this call starts the topic's feed); the feed's
	// build and tick run on its one goroutine, so it needs no lock.
	last, err := s.poolUtilization(ctx, tenantID, "snapshot")
	if err != nil {
		return nil, s.failSubscription(ctx, err, release)
	}
	r := s.subs.pools.Join("pools|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			return e.TenantID == tenantID && (e.ObjectKind == "task" && taskLifecycle(e.Kind) && e.Kind != "task.enqueued" ||
				e.ObjectKind == "pool" || e.ObjectKind == "gpu_class" || e.Kind == "worker.registered")
		},
		func(ctx context.Context, batch []events.Event) []*PoolUtilization {
			u, err := s.poolUtilization(ctx, tenantID, batch[len(batch)-1].Kind)
			if err != nil {
				if ctx.Err() == nil {
					s.k.Log.Warn("pool subscription: read pools", "err", err)
				}
				return nil
			}
			last = u
			return []*PoolUtilization{u}
		}, s.agent.Heartbeat, func(ctx context.Context) []*PoolUtilization {
			// Worker counts change when heartbeats stop, with no event: a
			// tick looks, and tells only when something did change.
			u, err := s.poolUtilization(ctx, tenantID, "tick")
			if err != nil || (last != nil && samePoolUse(last, u)) {
				return nil
			}
			last = u
			return []*PoolUtilization{u}
		}))
	first, err := s.poolUtilization(ctx, tenantID, "snapshot")
	if err != nil {
		return nil, s.failSubscription(ctx, err, r.Close, release)
	}
	return pump(ctx, s, r, release, []*PoolUtilization{first},
		func(p *identity.Principal, u *PoolUtilization) (*PoolUtilization, bool) {
			return u, p.TenantID == u.TenantID
		}), nil
}

func (s *Live) poolUtilization(ctx context.Context, tenantID, kind string) (*PoolUtilization, error) {
	e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	held, err := s.k.Store.ListSchedulable(ctx, tenantID, 0)
	if err != nil {
		return nil, fmt.Errorf("list tasks holding capacity: %w", err)
	}
	ws, err := s.k.Store.ListWorkers(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	now := s.k.Now()
	used := map[string]model.MilliGPU{}
	for _, t := range held {
		if t.PoolID != "" && t.Status != model.TaskQueued {
			used[t.PoolID] += t.Size.Total()
		}
	}
	online, total := map[string]int{}, map[string]int{}
	for _, w := range ws {
		total[w.PoolID]++
		if now.Sub(w.LastHeartbeatAt) <= s.agent.Lease {
			online[w.PoolID]++
		}
	}
	u := &PoolUtilization{TenantID: tenantID, Kind: kind, At: now}
	classes := map[string]*GPUClassUse{}
	for _, pool := range e.Pools {
		pu := PoolUse{Pool: pool, Declared: pool.CapacityGPUs, Used: used[pool.ID], OnlineWorkers: online[pool.ID], Workers: total[pool.ID]}
		pu.Free = max(0, model.GPUs(pool.CapacityGPUs)-pu.Used)
		u.Pools = append(u.Pools, pu)
		c := classes[pool.GPUClassID]
		if c == nil {
			c = &GPUClassUse{GPUClass: e.GPUClass(pool.GPUClassID)}
			if c.GPUClass == nil {
				c.GPUClass = &model.GPUClass{ID: pool.GPUClassID, Name: pool.GPUClassID}
			}
			classes[pool.GPUClassID] = c
		}
		c.Declared += pu.Declared
		c.Used += pu.Used
		c.Free += pu.Free
	}
	for _, c := range classes {
		u.GPUClasses = append(u.GPUClasses, *c)
	}
	sort.Slice(u.Pools, func(i, j int) bool { return u.Pools[i].Pool.Name < u.Pools[j].Pool.Name })
	sort.Slice(u.GPUClasses, func(i, j int) bool { return u.GPUClasses[i].GPUClass.Name < u.GPUClasses[j].GPUClass.Name })
	return u, nil
}
