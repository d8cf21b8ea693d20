package allocation

import (
	"context"
	"errors"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// EngineStatus says whether a tenant's compute policy engine places work.
type EngineStatus struct {
	Enabled bool
	// Since is when the engine was last disabled or enabled (zero if never).
	Since time.Time
	// By is who disabled it, while it is disabled.
	By string
}

// EngineStatus returns the caller's tenant's engine status.
func (s *Allocation) EngineStatus(ctx context.Context) (*EngineStatus, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	st, err := engineStatus(ctx, s.k.Store, p.TenantID, s.k.Now())
	return st, s.k.Internal(ctx, err)
}

func engineStatus(ctx context.Context, q store.Queries, tenantID string, now time.Time) (*EngineStatus, error) {
	pauses, err := q.ListEnginePauses(ctx, tenantID, time.Unix(0, 0), now.Add(time.Hour))
	if err != nil {
		return nil, err
	}
	st := &EngineStatus{Enabled: true}
	if n := len(pauses); n > 0 {
		last := pauses[n-1]
		if last.EndedAt == nil {
			st.Enabled, st.Since, st.By = false, last.StartedAt, last.ByName
		} else {
			st.Since = *last.EndedAt
		}
	}
	return st, nil
}

// SetEngineEnabled disables or enables the caller's tenant's engine. While
// it is disabled nothing is placed or preempted and no budget time is
// charged; work that holds capacity keeps it.
func (s *Allocation) SetEngineEnabled(ctx context.Context, enabled bool) (*EngineStatus, error) {
	what := "disable the compute policy engine"
	if enabled {
		what = "enable the compute policy engine"
	}
	return kernel.Run(ctx, s.k, kernel.Op[*EngineStatus]{Name: "setEngineEnabled", Right: kernel.RightAdmin, What: what,
		// Switching it to the state it is in changes nothing: no entry.
		Unaudited: true,
		Body: func(t *kernel.Txn) (*EngineStatus, kernel.Audit, error) {
			p := t.P
			// Exclusive against the engine's apply, which checks the pause
			// under the shared lock: once this returns, no pass in flight
			// places or preempts work on a disabled engine.
			if err := t.Q.LockTenant(t.Ctx, p.TenantID); err != nil {
				return nil, kernel.Audit{}, err
			}
			cur, err := engineStatus(t.Ctx, t.Q, p.TenantID, t.Now)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if cur.Enabled == enabled {
				return cur, kernel.Audit{}, nil
			}
			if enabled {
				err = t.Q.EndEnginePause(t.Ctx, p.TenantID, t.Now)
			} else {
				err = t.Q.StartEnginePause(t.Ctx, &model.EnginePause{TenantID: p.TenantID, StartedAt: t.Now, ByUserID: p.UserID, ByName: p.UserName})
			}
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			st := &EngineStatus{Enabled: enabled, Since: t.Now}
			action := "engine.enabled"
			if !enabled {
				action, st.By = "engine.disabled", p.UserName
			}
			return st, kernel.Audit{Action: action, Kind: "engine", ID: p.TenantID, Name: "compute policy engine", Detail: what}, nil
		},
	})
}

// QueueState returns why a compute resource's head waits, or nil when
// nothing waits.
func (s *Allocation) QueueState(ctx context.Context, computeResourceID string) (*model.QueueState, error) {
	cr, err := s.ComputeResource(ctx, computeResourceID)
	if err != nil {
		return nil, err
	}
	qs, err := s.k.Store.GetQueueState(ctx, cr.TenantID, cr.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return qs, s.k.Internal(ctx, err)
}
