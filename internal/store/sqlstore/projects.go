package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const projectColumns = `id, tenant_id, name, description, group_id, output_destination, created_at, updated_at`

func scanProject(r sqlbase.Scanner) (*model.Project, error) {
	var p model.Project
	var group sql.NullString
	var created, updated int64
	if err := r.Scan(&p.ID, &p.TenantID, &p.Name, &p.Description, &group, &p.OutputDestination,
		&created, &updated); err != nil {
		return nil, err
	}
	p.GroupID = group.String
	p.CreatedAt, p.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &p, nil
}

// CreateProject inserts a project. Names are unique in a tenant; the group,
// when set, must exist.
func (q *queries) CreateProject(ctx context.Context, p *model.Project) error {
	undo := sqlbase.AssignID(&p.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create project %q", p.Name), store.ErrNotFound,
		`INSERT INTO projects (`+projectColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.TenantID, p.Name, p.Description, sqlbase.NullString(p.GroupID), p.OutputDestination,
		sqlbase.Micros(p.CreatedAt), sqlbase.Micros(p.UpdatedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateProject(ctx context.Context, p *model.Project) error {
	return q.WriteOne(ctx, "update project "+p.ID, store.ErrNotFound,
		`UPDATE projects SET name = ?, description = ?, group_id = ?, output_destination = ?, updated_at = ?
		WHERE tenant_id = ? AND id = ?`,
		p.Name, p.Description, sqlbase.NullString(p.GroupID), p.OutputDestination, sqlbase.Micros(p.UpdatedAt), p.TenantID, p.ID)
}

// DeleteProject deletes a project that no task and no API key names
// (ErrConflict otherwise).
func (q *queries) DeleteProject(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete project "+id, store.ErrConflict,
		`DELETE FROM projects WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetProject(ctx context.Context, tenantID, id string) (*model.Project, error) {
	return sqlbase.GetOne(ctx, q.Q, "get project "+id, scanProject,
		`SELECT `+projectColumns+` FROM projects WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetProjectByName(ctx context.Context, tenantID, name string) (*model.Project, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get project %q", name), scanProject,
		`SELECT `+projectColumns+` FROM projects WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// ListProjects lists a tenant's projects by name, one page at a time.
func (q *queries) ListProjects(ctx context.Context, tenantID string, page store.Page) ([]*model.Project, error) {
	query, args := sqlbase.PageByName(`SELECT `+projectColumns+` FROM projects WHERE tenant_id = ?`, []any{tenantID}, page)
	return sqlbase.GetAll(ctx, q.Q, "list projects", scanProject, query, args...)
}
