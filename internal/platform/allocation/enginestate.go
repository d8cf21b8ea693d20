package allocation

import (
	"context"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// EngineState is what the engine's loop reads (loop.State), over the
// store: the store's reads as they are, and the two whose types are the
// store's turned into the engine's, so that the loop imports no store.
type EngineState struct {
	store.Store
}

// ListSchedulable lists the tasks a pass considers: the first perQueue
// waiting in each queue, and every placed or running one.
func (s EngineState) ListSchedulable(ctx context.Context, tenantID string, perQueue int) ([]engine.SchedTask, error) {
	rows, err := s.Store.ListSchedulable(ctx, tenantID, perQueue)
	if err != nil {
		return nil, err
	}
	out := make([]engine.SchedTask, len(rows))
	for i, t := range rows {
		out[i] = engine.SchedTask{ID: t.ID, Name: t.Name, ComputeResourceID: t.ComputeResourceID, OwnerID: t.OwnerID,
			ProjectID: t.ProjectID, Status: t.Status, Size: t.Size, QueueSeq: t.QueueSeq,
			QueueRank: t.QueueRank, QueueOrder: t.QueueOrder, PoolID: t.PoolID, PlacedAt: t.PlacedAt}
	}
	return out, nil
}

// ListBudgetPlacements lists the ledger's intervals of the given policies
// that overlap [from, to): what their time budgets have used.
func (s EngineState) ListBudgetPlacements(ctx context.Context, tenantID string, from, to time.Time, policyIDs []string) ([]*model.Placement, error) {
	return s.Store.ListPlacements(ctx, tenantID, store.PlacementFilter{From: from, To: to, PolicyIDs: policyIDs})
}
