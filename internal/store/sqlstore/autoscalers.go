package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const autoscalerColumns = `id, tenant_id, pool_id, name, spec, status, created_by, created_at, updated_at, last_heartbeat_at`

func scanAutoscaler(r sqlbase.Scanner) (*model.Autoscaler, error) {
	var a model.Autoscaler
	var spec, status string
	var created, updated int64
	var seen sql.NullInt64
	if err := r.Scan(&a.ID, &a.TenantID, &a.PoolID, &a.Name, &spec, &status, &a.CreatedBy, &created, &updated, &seen); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(spec), &a.Spec); err != nil {
		return nil, fmt.Errorf("autoscaler %s spec: decode JSON: %w", a.ID, err)
	}
	if err := json.Unmarshal([]byte(status), &a.Status); err != nil {
		return nil, fmt.Errorf("autoscaler %s status: decode JSON: %w", a.ID, err)
	}
	a.CreatedAt, a.UpdatedAt, a.LastHeartbeatAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated), sqlbase.NullTime(seen)
	return &a, nil
}

// CreateAutoscaler stores a new autoscaler with an empty status.
func (q *queries) CreateAutoscaler(ctx context.Context, a *model.Autoscaler) error {
	spec, err := json.Marshal(a.Spec)
	if err != nil {
		return fmt.Errorf("create autoscaler %s: encode spec: %w", a.Name, err)
	}
	status, err := json.Marshal(a.Status)
	if err != nil {
		return fmt.Errorf("create autoscaler %s: encode status: %w", a.Name, err)
	}
	undo := sqlbase.AssignID(&a.ID)
	_, err = q.Write(ctx, "create autoscaler "+a.Name, store.ErrNotFound,
		`INSERT INTO autoscalers (`+autoscalerColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.TenantID, a.PoolID, a.Name, string(spec), string(status), a.CreatedBy, sqlbase.Micros(a.CreatedAt), sqlbase.Micros(a.UpdatedAt),
		sqlbase.NullMicros(a.LastHeartbeatAt))
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
	return sqlbase.GetOne(ctx, q.Q, "get autoscaler "+id, scanAutoscaler,
		`SELECT `+autoscalerColumns+` FROM autoscalers WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// GetAutoscalerByPool returns the autoscaler of a pool.
func (q *queries) GetAutoscalerByPool(ctx context.Context, tenantID, poolID string) (*model.Autoscaler, error) {
	return sqlbase.GetOne(ctx, q.Q, "get the autoscaler of pool "+poolID, scanAutoscaler,
		`SELECT `+autoscalerColumns+` FROM autoscalers WHERE tenant_id = ? AND pool_id = ?`, tenantID, poolID)
}

// ListAutoscalers lists a tenant's autoscalers by name.
func (q *queries) ListAutoscalers(ctx context.Context, tenantID string) ([]*model.Autoscaler, error) {
	return sqlbase.GetAll(ctx, q.Q, "list autoscalers", scanAutoscaler,
		`SELECT `+autoscalerColumns+` FROM autoscalers WHERE tenant_id = ? ORDER BY name`, tenantID)
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
