package workflow

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// artifactTable is the artifacts table.
var artifactTable = sqlbase.Table[model.Artifact]{
	sqlbase.C("id", func(a *model.Artifact) any { return &a.ID }),
	sqlbase.C("tenant_id", func(a *model.Artifact) any { return &a.TenantID }),
	sqlbase.C("task_id", func(a *model.Artifact) any { return &a.TaskID }),
	sqlbase.C("name", func(a *model.Artifact) any { return &a.Name }),
	sqlbase.C("size", func(a *model.Artifact) any { return &a.Size }),
	sqlbase.C("sha256", func(a *model.Artifact) any { return &a.SHA256 }),
	sqlbase.C("content_type", func(a *model.Artifact) any { return &a.ContentType }),
	sqlbase.C("pointer", func(a *model.Artifact) any { return &a.Pointer }),
	sqlbase.C("storage_key", func(a *model.Artifact) any { return &a.StorageKey }),
	sqlbase.C("created_by", func(a *model.Artifact) any { return &a.CreatedBy }),
	sqlbase.C("created_at", func(a *model.Artifact) any { return sqlbase.Time(&a.CreatedAt) }),
}

// CreateArtifact inserts an artifact; the (tenant, task, name) index makes
// a second one of the same name a conflict.
func (q Workflows) CreateArtifact(ctx context.Context, a *model.Artifact) error {
	undo := sqlbase.AssignID(&a.ID)
	_, err := q.Write(ctx, "create artifact "+a.Name+" of task "+a.TaskID, store.ErrNotFound,
		artifactTable.Insert("artifacts"), artifactTable.Values(a)...)
	if err != nil {
		undo()
	}
	return err
}

// GetArtifact returns a run's artifact by name.
func (q Workflows) GetArtifact(ctx context.Context, tenantID, taskID, name string) (*model.Artifact, error) {
	return sqlbase.GetOne(ctx, q.Q, "get artifact "+name+" of task "+taskID, artifactTable.Scan,
		`SELECT `+artifactTable.List()+` FROM artifacts WHERE tenant_id = ? AND task_id = ? AND name = ?`, tenantID, taskID, name)
}

// ListArtifacts lists a run's artifacts by name.
func (q Workflows) ListArtifacts(ctx context.Context, tenantID, taskID string) ([]*model.Artifact, error) {
	return sqlbase.GetAll(ctx, q.Q, "list artifacts of task "+taskID, artifactTable.Scan,
		`SELECT `+artifactTable.List()+` FROM artifacts WHERE tenant_id = ? AND task_id = ? ORDER BY name`, tenantID, taskID)
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
	return sqlbase.GetAll(ctx, q.Q, "list published artifacts "+f.Name, artifactTable.Scan, `SELECT `+artifactTable.As("a")+
		` FROM artifacts a JOIN tasks t ON t.id = a.task_id WHERE a.tenant_id = ? AND a.name = ? AND a.created_at > ? AND a.created_at <= ?`+
		where+vis+` ORDER BY a.created_at, a.id LIMIT ?`, append(append(args, vargs...), limit)...)
}
