package workflow

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const artifactColumns = `id, tenant_id, task_id, name, size, sha256, content_type, pointer, storage_key, created_by, created_at`

func scanArtifact(r sqlbase.Scanner) (*model.Artifact, error) {
	var a model.Artifact
	var created int64
	if err := r.Scan(&a.ID, &a.TenantID, &a.TaskID, &a.Name, &a.Size, &a.SHA256, &a.ContentType, &a.Pointer,
		&a.StorageKey, &a.CreatedBy, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = sqlbase.FromMicros(created)
	return &a, nil
}

// CreateArtifact inserts an artifact; the (tenant, task, name) index makes
// a second one of the same name a conflict.
func (q Workflows) CreateArtifact(ctx context.Context, a *model.Artifact) error {
	undo := sqlbase.AssignID(&a.ID)
	_, err := q.Write(ctx, "create artifact "+a.Name+" of task "+a.TaskID, store.ErrNotFound,
		`INSERT INTO artifacts (`+artifactColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.TenantID, a.TaskID, a.Name, a.Size, a.SHA256, a.ContentType, a.Pointer, a.StorageKey, a.CreatedBy, sqlbase.Micros(a.CreatedAt))
	if err != nil {
		undo()
	}
	return err
}

// GetArtifact returns a run's artifact by name.
func (q Workflows) GetArtifact(ctx context.Context, tenantID, taskID, name string) (*model.Artifact, error) {
	return sqlbase.GetOne(ctx, q.Q, "get artifact "+name+" of task "+taskID, scanArtifact,
		`SELECT `+artifactColumns+` FROM artifacts WHERE tenant_id = ? AND task_id = ? AND name = ?`, tenantID, taskID, name)
}

// ListArtifacts lists a run's artifacts by name.
func (q Workflows) ListArtifacts(ctx context.Context, tenantID, taskID string) ([]*model.Artifact, error) {
	return sqlbase.GetAll(ctx, q.Q, "list artifacts of task "+taskID, scanArtifact,
		`SELECT `+artifactColumns+` FROM artifacts WHERE tenant_id = ? AND task_id = ? ORDER BY name`, tenantID, taskID)
}

// DeleteArtifact removes an artifact row.
func (q Workflows) DeleteArtifact(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete artifact "+id, store.ErrConflict,
		`DELETE FROM artifacts WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListPublishedArtifacts lists the artifacts of a name published in
// (since, until], filtered on their tasks' project and groups.
func (q Workflows) ListPublishedArtifacts(ctx context.Context, tenantID string, f store.PublishedArtifactFilter, since, until time.Time, limit int) ([]*model.Artifact, error) {
	where, args := ``, []any{tenantID, f.Name, sqlbase.Micros(since), sqlbase.Micros(until)}
	if f.ProjectID != "" {
		where, args = ` AND t.project_id = ?`, append(args, f.ProjectID)
	}
	vis, vargs := sqlbase.VisibleTo("t.", f.RestrictToGroups, f.GroupIDs, f.VisibleToUserID)
	return sqlbase.GetAll(ctx, q.Q, "list published artifacts "+f.Name, scanArtifact, `SELECT a.`+strings.ReplaceAll(artifactColumns, ", ", ", a.")+
		` FROM artifacts a JOIN tasks t ON t.id = a.task_id WHERE a.tenant_id = ? AND a.name = ? AND a.created_at > ? AND a.created_at <= ?`+
		where+vis+` ORDER BY a.created_at, a.id LIMIT ?`, append(append(args, vargs...), limit)...)
}
