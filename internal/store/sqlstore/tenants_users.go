package sqlstore

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// tenantTable is the tenants table.
var tenantTable = sqlbase.Table[model.Tenant]{
	sqlbase.C("id", func(t *model.Tenant) any { return &t.ID }),
	sqlbase.C("name", func(t *model.Tenant) any { return &t.Name }),
	sqlbase.C("display_name", func(t *model.Tenant) any { return &t.DisplayName }),
	sqlbase.C("created_at", func(t *model.Tenant) any { return sqlbase.Time(&t.CreatedAt) }),
}

// CreateTenant inserts a tenant. Tenant names are unique.
func (q *queries) CreateTenant(ctx context.Context, t *model.Tenant) error {
	undo := sqlbase.AssignID(&t.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create tenant %q", t.Name), store.ErrNotFound,
		tenantTable.Insert("tenants"), tenantTable.Values(t)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) GetTenant(ctx context.Context, id string) (*model.Tenant, error) {
	return sqlbase.GetOne(ctx, q.Q, "get tenant "+id, tenantTable.Scan,
		`SELECT `+tenantTable.List()+` FROM tenants WHERE id = ?`, id)
}

func (q *queries) GetTenantByName(ctx context.Context, name string) (*model.Tenant, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get tenant %q", name), tenantTable.Scan,
		`SELECT `+tenantTable.List()+` FROM tenants WHERE name = ?`, name)
}

// ListTenants lists every tenant by name.
func (q *queries) ListTenants(ctx context.Context) ([]*model.Tenant, error) {
	return sqlbase.GetAll(ctx, q.Q, "list tenants", tenantTable.Scan,
		`SELECT `+tenantTable.List()+` FROM tenants ORDER BY name`)
}

// userTable is the users table; userUpdate what an update writes.
var userTable = sqlbase.Table[model.User]{
	sqlbase.C("id", func(u *model.User) any { return &u.ID }),
	sqlbase.C("tenant_id", func(u *model.User) any { return &u.TenantID }),
	sqlbase.C("name", func(u *model.User) any { return &u.Name }),
	sqlbase.C("display_name", func(u *model.User) any { return &u.DisplayName }),
	sqlbase.C("email", func(u *model.User) any { return &u.Email }),
	sqlbase.C("role", func(u *model.User) any { return sqlbase.Str(&u.Role) }),
	sqlbase.C("service", func(u *model.User) any { return &u.Service }),
	sqlbase.C("external_id", func(u *model.User) any { return &u.ExternalID }),
	sqlbase.C("disabled", func(u *model.User) any { return &u.Disabled }),
	sqlbase.C("created_at", func(u *model.User) any { return sqlbase.Time(&u.CreatedAt) }),
	sqlbase.C("updated_at", func(u *model.User) any { return sqlbase.Time(&u.UpdatedAt) }),
	sqlbase.C("default_project_id", func(u *model.User) any { return &u.DefaultProjectID }),
}
var userUpdate = userTable.Without("id", "tenant_id", "created_at")

// CreateUser inserts a user. Names are unique in a tenant, and so are
// external ids that are set.
func (q *queries) CreateUser(ctx context.Context, u *model.User) error {
	undo := sqlbase.AssignID(&u.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create user %q", u.Name), store.ErrNotFound,
		userTable.Insert("users"), userTable.Values(u)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateUser(ctx context.Context, u *model.User) error {
	return q.WriteOne(ctx, "update user "+u.ID, store.ErrNotFound,
		`UPDATE users SET `+userUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, userUpdate.Values(u, u.TenantID, u.ID)...)
}

func (q *queries) GetUser(ctx context.Context, tenantID, id string) (*model.User, error) {
	return sqlbase.GetOne(ctx, q.Q, "get user "+id, userTable.Scan,
		`SELECT `+userTable.List()+` FROM users WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetUserByName(ctx context.Context, tenantID, name string) (*model.User, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get user %q", name), userTable.Scan,
		`SELECT `+userTable.List()+` FROM users WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// GetUserByExternalID finds a user by identity provider subject. The empty
// external id belongs to no one (users without SSO all have it).
func (q *queries) GetUserByExternalID(ctx context.Context, tenantID, externalID string) (*model.User, error) {
	what := fmt.Sprintf("get user by external id %q", externalID)
	if externalID == "" {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return sqlbase.GetOne(ctx, q.Q, what, userTable.Scan,
		`SELECT `+userTable.List()+` FROM users WHERE tenant_id = ? AND external_id = ?`, tenantID, externalID)
}

// ListUsers lists a tenant's users by name, one page at a time.
func (q *queries) ListUsers(ctx context.Context, tenantID string, page store.Page) ([]*model.User, error) {
	query, args := sqlbase.PageByName(`SELECT `+userTable.List()+` FROM users WHERE tenant_id = ?`, []any{tenantID}, page)
	return sqlbase.GetAll(ctx, q.Q, "list users", userTable.Scan, query, args...)
}
