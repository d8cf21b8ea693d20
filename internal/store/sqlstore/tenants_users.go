package sqlstore

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const tenantColumns = `id, name, display_name, created_at`

func scanTenant(r sqlbase.Scanner) (*model.Tenant, error) {
	var t model.Tenant
	var created int64
	if err := r.Scan(&t.ID, &t.Name, &t.DisplayName, &created); err != nil {
		return nil, err
	}
	t.CreatedAt = sqlbase.FromMicros(created)
	return &t, nil
}

// CreateTenant inserts a tenant. Tenant names are unique.
func (q *queries) CreateTenant(ctx context.Context, t *model.Tenant) error {
	undo := sqlbase.AssignID(&t.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create tenant %q", t.Name), store.ErrNotFound,
		`INSERT INTO tenants (`+tenantColumns+`) VALUES (?, ?, ?, ?)`,
		t.ID, t.Name, t.DisplayName, sqlbase.Micros(t.CreatedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) GetTenant(ctx context.Context, id string) (*model.Tenant, error) {
	return sqlbase.GetOne(ctx, q.Q, "get tenant "+id, scanTenant,
		`SELECT `+tenantColumns+` FROM tenants WHERE id = ?`, id)
}

func (q *queries) GetTenantByName(ctx context.Context, name string) (*model.Tenant, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get tenant %q", name), scanTenant,
		`SELECT `+tenantColumns+` FROM tenants WHERE name = ?`, name)
}

// ListTenants lists every tenant by name.
func (q *queries) ListTenants(ctx context.Context) ([]*model.Tenant, error) {
	return sqlbase.GetAll(ctx, q.Q, "list tenants", scanTenant,
		`SELECT `+tenantColumns+` FROM tenants ORDER BY name`)
}

const userColumns = `id, tenant_id, name, display_name, email, role, service, external_id, disabled, created_at, updated_at, default_project_id`

func scanUser(r sqlbase.Scanner) (*model.User, error) {
	var u model.User
	var role string
	var created, updated int64
	if err := r.Scan(&u.ID, &u.TenantID, &u.Name, &u.DisplayName, &u.Email, &role, &u.Service,
		&u.ExternalID, &u.Disabled, &created, &updated, &u.DefaultProjectID); err != nil {
		return nil, err
	}
	u.Role = model.Role(role)
	u.CreatedAt, u.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &u, nil
}

// CreateUser inserts a user. Names are unique in a tenant, and so are
// external ids that are set.
func (q *queries) CreateUser(ctx context.Context, u *model.User) error {
	undo := sqlbase.AssignID(&u.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create user %q", u.Name), store.ErrNotFound,
		`INSERT INTO users (`+userColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, u.TenantID, u.Name, u.DisplayName, u.Email, string(u.Role), u.Service,
		u.ExternalID, u.Disabled, sqlbase.Micros(u.CreatedAt), sqlbase.Micros(u.UpdatedAt), u.DefaultProjectID)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateUser(ctx context.Context, u *model.User) error {
	return q.WriteOne(ctx, "update user "+u.ID, store.ErrNotFound,
		`UPDATE users SET name = ?, display_name = ?, email = ?, role = ?, service = ?, external_id = ?,
			disabled = ?, updated_at = ?, default_project_id = ?
		WHERE tenant_id = ? AND id = ?`,
		u.Name, u.DisplayName, u.Email, string(u.Role), u.Service, u.ExternalID,
		u.Disabled, sqlbase.Micros(u.UpdatedAt), u.DefaultProjectID, u.TenantID, u.ID)
}

func (q *queries) GetUser(ctx context.Context, tenantID, id string) (*model.User, error) {
	return sqlbase.GetOne(ctx, q.Q, "get user "+id, scanUser,
		`SELECT `+userColumns+` FROM users WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetUserByName(ctx context.Context, tenantID, name string) (*model.User, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get user %q", name), scanUser,
		`SELECT `+userColumns+` FROM users WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// GetUserByExternalID finds a user by identity provider subject. The empty
// external id belongs to no one (users without SSO all have it).
func (q *queries) GetUserByExternalID(ctx context.Context, tenantID, externalID string) (*model.User, error) {
	what := fmt.Sprintf("get user by external id %q", externalID)
	if externalID == "" {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return sqlbase.GetOne(ctx, q.Q, what, scanUser,
		`SELECT `+userColumns+` FROM users WHERE tenant_id = ? AND external_id = ?`, tenantID, externalID)
}

// ListUsers lists a tenant's users by name, one page at a time.
func (q *queries) ListUsers(ctx context.Context, tenantID string, page store.Page) ([]*model.User, error) {
	query, args := sqlbase.PageByName(`SELECT `+userColumns+` FROM users WHERE tenant_id = ?`, []any{tenantID}, page)
	return sqlbase.GetAll(ctx, q.Q, "list users", scanUser, query, args...)
}
