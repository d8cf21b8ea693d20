package store

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// AutoscalerQueries keep cloud autoscalers (one per pool at most) and what
// their daemons report. Embedded in Queries.
type AutoscalerQueries interface {
	// CreateAutoscaler returns ErrConflict when the pool already has an
	// autoscaler or the name is taken, ErrNotFound when the pool is not
	// the tenant's.
	CreateAutoscaler(ctx context.Context, a *model.Autoscaler) error
	// UpdateAutoscaler writes the spec and the update time.
	UpdateAutoscaler(ctx context.Context, a *model.Autoscaler) error
	DeleteAutoscaler(ctx context.Context, tenantID, id string) error
	GetAutoscaler(ctx context.Context, tenantID, id string) (*model.Autoscaler, error)
	GetAutoscalerByPool(ctx context.Context, tenantID, poolID string) (*model.Autoscaler, error)
	// ListAutoscalers orders by name.
	ListAutoscalers(ctx context.Context, tenantID string) ([]*model.Autoscaler, error)
	// ReportAutoscaler stores the status its daemon reported and the time
	// of the report (its heartbeat).
	ReportAutoscaler(ctx context.Context, tenantID, id string, st model.AutoscalerStatus, at time.Time) error
	// SetPlacedReason sets the reason of the tasks named that are still
	// placed on the pool (not yet claimed), and returns how many changed.
	SetPlacedReason(ctx context.Context, tenantID, poolID string, taskIDs []string, reason string) (int, error)
}
