package sqlstore

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

const tenantColumns = `id, name, display_name, created_at`

func scanTenant(r scanner) (*model.Tenant, error) {
	var t model.Tenant
	var created int64
	if err := r.Scan(&t.ID, &t.Name, &t.DisplayName, &created); err != nil {
		return nil, err
	}
	t.CreatedAt = fromMicros(created)
	return &t, nil
}

// CreateTenant inserts a tenant. Tenant names are unique.
func (q *queries) CreateTenant(ctx context.Context, t *model.Tenant) error {
	undo := assignID(&t.ID)
	_, err := q.write(ctx, fmt.Sprintf("create tenant %q", t.Name), store.ErrNotFound,
		`INSERT INTO tenants (`+tenantColumns+`) VALUES (?, ?, ?, ?)`,
		t.ID, t.Name, t.DisplayName, micros(t.CreatedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) GetTenant(ctx context.Context, id string) (*model.Tenant, error) {
	return getOne(ctx, q, "get tenant "+id, scanTenant,
		`SELECT `+tenantColumns+` FROM tenants WHERE id = ?`, id)
}

func (q *queries) GetTenantByName(ctx context.Context, name string) (*model.Tenant, error) {
	return getOne(ctx, q, fmt.Sprintf("get tenant %q", name), scanTenant,
		`SELECT `+tenantColumns+` FROM tenants WHERE name = ?`, name)
}

// ListTenants lists every tenant by name.
func (q *queries) ListTenants(ctx context.Context) ([]*model.Tenant, error) {
	return getAll(ctx, q, "list tenants", scanTenant,
		`SELECT `+tenantColumns+` FROM tenants ORDER BY name`)
}

const userColumns = `id, tenant_id, name, display_name, email, role, service, external_id, disabled, created_at, updated_at, default_project_id`

func scanUser(r scanner) (*model.User, error) {
	var u model.User
	var role string
	var created, updated int64
	if err := r.Scan(&u.ID, &u.TenantID, &u.Name, &u.DisplayName, &u.Email, &role, &u.Service,
		&u.ExternalID, &u.Disabled, &created, &updated, &u.DefaultProjectID); err != nil {
		return nil, err
	}
	u.Role = model.Role(role)
	u.CreatedAt, u.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &u, nil
}

// CreateUser inserts a user. Names are unique in a tenant, and so are
// external ids that are set.
func (q *queries) CreateUser(ctx context.Context, u *model.User) error {
	undo := assignID(&u.ID)
	_, err := q.write(ctx, fmt.Sprintf("create user %q", u.Name), store.ErrNotFound,
		`INSERT INTO users (`+userColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, u.TenantID, u.Name, u.DisplayName, u.Email, string(u.Role), u.Service,
		u.ExternalID, u.Disabled, micros(u.CreatedAt), micros(u.UpdatedAt), u.DefaultProjectID)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateUser(ctx context.Context, u *model.User) error {
	return q.writeOne(ctx, "update user "+u.ID, store.ErrNotFound,
		`UPDATE users SET name = ?, display_name = ?, email = ?, role = ?, service = ?, external_id = ?,
			disabled = ?, updated_at = ?, default_project_id = ?
		WHERE tenant_id = ? AND id = ?`,
		u.Name, u.DisplayName, u.Email, string(u.Role), u.Service, u.ExternalID,
		u.Disabled, micros(u.UpdatedAt), u.DefaultProjectID, u.TenantID, u.ID)
}

func (q *queries) GetUser(ctx context.Context, tenantID, id string) (*model.User, error) {
	return getOne(ctx, q, "get user "+id, scanUser,
		`SELECT `+userColumns+` FROM users WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetUserByName(ctx context.Context, tenantID, name string) (*model.User, error) {
	return getOne(ctx, q, fmt.Sprintf("get user %q", name), scanUser,
		`SELECT `+userColumns+` FROM users WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// GetUserByExternalID finds a user by identity provider subject. The empty
// external id belongs to no one (users without SSO all have it).
func (q *queries) GetUserByExternalID(ctx context.Context, tenantID, externalID string) (*model.User, error) {
	what := fmt.Sprintf("get user by external id %q", externalID)
	if externalID == "" {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return getOne(ctx, q, what, scanUser,
		`SELECT `+userColumns+` FROM users WHERE tenant_id = ? AND external_id = ?`, tenantID, externalID)
}

// ListUsers lists a tenant's users by name, one page at a time.
func (q *queries) ListUsers(ctx context.Context, tenantID string, page store.Page) ([]*model.User, error) {
	query, args := pageByName(`SELECT `+userColumns+` FROM users WHERE tenant_id = ?`, []any{tenantID}, page)
	return getAll(ctx, q, "list users", scanUser, query, args...)
}

// pageByName completes a query over one tenant's objects with keyset
// pagination on the unique name.
func pageByName(query string, args []any, page store.Page) (string, []any) {
	if page.After != "" {
		query += ` AND name > ?`
		args = append(args, page.After)
	}
	query += ` ORDER BY name`
	return withLimit(query, args, page.Limit)
}

// withLimit adds LIMIT for a positive limit; zero or less lists everything.
func withLimit(query string, args []any, limit int) (string, []any) {
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	return query, args
}
