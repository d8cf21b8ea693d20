package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// autoscalerTable is the autoscalers table: spec and status as JSON.
var autoscalerTable = sqlbase.Table[model.Autoscaler]{
	sqlbase.C("id", func(a *model.Autoscaler) any { return &a.ID }),
	sqlbase.C("tenant_id", func(a *model.Autoscaler) any { return &a.TenantID }),
	sqlbase.C("pool_id", func(a *model.Autoscaler) any { return &a.PoolID }),
	sqlbase.C("name", func(a *model.Autoscaler) any { return &a.Name }),
	sqlbase.C("spec", func(a *model.Autoscaler) any { return sqlbase.JSON(&a.Spec, "") }),
	sqlbase.C("status", func(a *model.Autoscaler) any { return sqlbase.JSON(&a.Status, "") }),
	sqlbase.C("created_by", func(a *model.Autoscaler) any { return &a.CreatedBy }),
	sqlbase.C("created_at", func(a *model.Autoscaler) any { return sqlbase.Time(&a.CreatedAt) }),
	sqlbase.C("updated_at", func(a *model.Autoscaler) any { return sqlbase.Time(&a.UpdatedAt) }),
	sqlbase.C("last_heartbeat_at", func(a *model.Autoscaler) any { return sqlbase.TimePtr(&a.LastHeartbeatAt) }),
}

// CreateAutoscaler stores a new autoscaler with an empty status.
func (q *queries) CreateAutoscaler(ctx context.Context, a *model.Autoscaler) error {
	undo := sqlbase.AssignID(&a.ID)
	_, err := q.Write(ctx, "create autoscaler "+a.Name, store.ErrNotFound, autoscalerTable.Insert("autoscalers"), autoscalerTable.Values(a)...)
	if err != nil {
		undo()
	}
	return err
}

// UpdateAutoscaler writes an autoscaler's name, spec and update time.
func (q *queries) UpdateAutoscaler(ctx context.Context, a *model.Autoscaler) error {
	spec, err := json.Marshal(a.Spec)
	if err != nil {
		return fmt.Errorf("update autoscaler %s: encode spec: %w", a.Name, err)
	}
	return q.WriteOne(ctx, "update autoscaler "+a.ID, store.ErrNotFound,
		`UPDATE autoscalers SET name = ?, spec = ?, updated_at = ? WHERE tenant_id = ? AND id = ?`,
		a.Name, string(spec), sqlbase.Micros(a.UpdatedAt), a.TenantID, a.ID)
}

// DeleteAutoscaler removes an autoscaler.
func (q *queries) DeleteAutoscaler(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete autoscaler "+id, store.ErrConflict,
		`DELETE FROM autoscalers WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// GetAutoscaler returns an autoscaler of the tenant.
func (q *queries) GetAutoscaler(ctx context.Context, tenantID, id string) (*model.Autoscaler, error) {
	return sqlbase.GetOne(ctx, q.Q, "get autoscaler "+id, autoscalerTable.Scan,
		`SELECT `+autoscalerTable.List()+` FROM autoscalers WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// GetAutoscalerByPool returns the autoscaler of a pool.
func (q *queries) GetAutoscalerByPool(ctx context.Context, tenantID, poolID string) (*model.Autoscaler, error) {
	return sqlbase.GetOne(ctx, q.Q, "get the autoscaler of pool "+poolID, autoscalerTable.Scan,
		`SELECT `+autoscalerTable.List()+` FROM autoscalers WHERE tenant_id = ? AND pool_id = ?`, tenantID, poolID)
}

// ListAutoscalers lists a tenant's autoscalers by name.
func (q *queries) ListAutoscalers(ctx context.Context, tenantID string) ([]*model.Autoscaler, error) {
	return sqlbase.GetAll(ctx, q.Q, "list autoscalers", autoscalerTable.Scan,
		`SELECT `+autoscalerTable.List()+` FROM autoscalers WHERE tenant_id = ? ORDER BY name`, tenantID)
}

// ReportAutoscaler stores a daemon's report and its time.
func (q *queries) ReportAutoscaler(ctx context.Context, tenantID, id string, st model.AutoscalerStatus, at time.Time) error {
	status, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("report autoscaler %s: encode status: %w", id, err)
	}
	return q.WriteOne(ctx, "report autoscaler "+id, store.ErrNotFound,
		`UPDATE autoscalers SET status = ?, last_heartbeat_at = ? WHERE tenant_id = ? AND id = ?`,
		string(status), sqlbase.Micros(at), tenantID, id)
}

// SetPlacedReason sets the reason of the named tasks still placed on the
// pool; a task claimed or moved meanwhile keeps its own.
func (q *queries) SetPlacedReason(ctx context.Context, tenantID, poolID string, taskIDs []string, reason string) (int, error) {
	if len(taskIDs) == 0 {
		return 0, nil
	}
	args := []any{reason, tenantID, poolID, string(model.TaskPlaced)}
	for _, id := range taskIDs {
		args = append(args, id)
	}
	n, err := q.Write(ctx, "set the reason of placed tasks", store.ErrNotFound,
		`UPDATE tasks SET reason = ? WHERE tenant_id = ? AND pool_id = ? AND status = ? AND reason <> ?
			AND id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(taskIDs)), ", ")+`)`,
		append(append(args[:4:4], reason), args[4:]...)...)
	return int(n), err
}
