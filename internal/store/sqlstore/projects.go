package sqlstore

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// projectTable is the projects table; projectUpdate what an update writes.
var projectTable = sqlbase.Table[model.Project]{
	sqlbase.C("id", func(p *model.Project) any { return &p.ID }),
	sqlbase.C("tenant_id", func(p *model.Project) any { return &p.TenantID }),
	sqlbase.C("name", func(p *model.Project) any { return &p.Name }),
	sqlbase.C("description", func(p *model.Project) any { return &p.Description }),
	sqlbase.C("group_id", func(p *model.Project) any { return sqlbase.Ref(&p.GroupID) }),
	sqlbase.C("output_destination", func(p *model.Project) any { return &p.OutputDestination }),
	sqlbase.C("created_at", func(p *model.Project) any { return sqlbase.Time(&p.CreatedAt) }),
	sqlbase.C("updated_at", func(p *model.Project) any { return sqlbase.Time(&p.UpdatedAt) }),
}
var projectUpdate = projectTable.Without("id", "tenant_id", "created_at")

// CreateProject inserts a project. Names are unique in a tenant; the group,
// when set, must exist.
func (q *queries) CreateProject(ctx context.Context, p *model.Project) error {
	undo := sqlbase.AssignID(&p.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create project %q", p.Name), store.ErrNotFound,
		projectTable.Insert("projects"), projectTable.Values(p)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateProject(ctx context.Context, p *model.Project) error {
	return q.WriteOne(ctx, "update project "+p.ID, store.ErrNotFound,
		`UPDATE projects SET `+projectUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, projectUpdate.Values(p, p.TenantID, p.ID)...)
}

// DeleteProject deletes a project that no task and no API key names
// (ErrConflict otherwise).
func (q *queries) DeleteProject(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete project "+id, store.ErrConflict,
		`DELETE FROM projects WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetProject(ctx context.Context, tenantID, id string) (*model.Project, error) {
	return sqlbase.GetOne(ctx, q.Q, "get project "+id, projectTable.Scan,
		`SELECT `+projectTable.List()+` FROM projects WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetProjectByName(ctx context.Context, tenantID, name string) (*model.Project, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get project %q", name), projectTable.Scan,
		`SELECT `+projectTable.List()+` FROM projects WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// ListProjects lists a tenant's projects by name, one page at a time.
func (q *queries) ListProjects(ctx context.Context, tenantID string, page store.Page) ([]*model.Project, error) {
	query, args := sqlbase.PageByName(`SELECT `+projectTable.List()+` FROM projects WHERE tenant_id = ?`, []any{tenantID}, page)
	return sqlbase.GetAll(ctx, q.Q, "list projects", projectTable.Scan, query, args...)
}
