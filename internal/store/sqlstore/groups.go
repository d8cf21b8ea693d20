package sqlstore

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const groupColumns = `id, tenant_id, name, description, created_at, updated_at`

func scanGroup(r sqlbase.Scanner) (*model.Group, error) {
	var g model.Group
	var created, updated int64
	if err := r.Scan(&g.ID, &g.TenantID, &g.Name, &g.Description, &created, &updated); err != nil {
		return nil, err
	}
	g.CreatedAt, g.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &g, nil
}

// CreateGroup inserts a group. Names are unique in a tenant.
func (q *queries) CreateGroup(ctx context.Context, g *model.Group) error {
	undo := sqlbase.AssignID(&g.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create group %q", g.Name), store.ErrNotFound,
		`INSERT INTO groups (`+groupColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		g.ID, g.TenantID, g.Name, g.Description, sqlbase.Micros(g.CreatedAt), sqlbase.Micros(g.UpdatedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateGroup(ctx context.Context, g *model.Group) error {
	return q.WriteOne(ctx, "update group "+g.ID, store.ErrNotFound,
		`UPDATE groups SET name = ?, description = ?, updated_at = ? WHERE tenant_id = ? AND id = ?`,
		g.Name, g.Description, sqlbase.Micros(g.UpdatedAt), g.TenantID, g.ID)
}

// DeleteGroup deletes a group and its memberships. A group that a resource
// policy or a project still names cannot be deleted (ErrConflict).
func (q *queries) DeleteGroup(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete group "+id, store.ErrConflict,
		`DELETE FROM groups WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetGroup(ctx context.Context, tenantID, id string) (*model.Group, error) {
	return sqlbase.GetOne(ctx, q.Q, "get group "+id, scanGroup,
		`SELECT `+groupColumns+` FROM groups WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetGroupByName(ctx context.Context, tenantID, name string) (*model.Group, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get group %q", name), scanGroup,
		`SELECT `+groupColumns+` FROM groups WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// ListGroups lists a tenant's groups by name, one page at a time.
func (q *queries) ListGroups(ctx context.Context, tenantID string, page store.Page) ([]*model.Group, error) {
	query, args := sqlbase.PageByName(`SELECT `+groupColumns+` FROM groups WHERE tenant_id = ?`, []any{tenantID}, page)
	return sqlbase.GetAll(ctx, q.Q, "list groups", scanGroup, query, args...)
}

const membershipColumns = `m.tenant_id, m.group_id, m.user_id, m.role, m.created_at`

func scanMembership(r sqlbase.Scanner) (*model.Membership, error) {
	var m model.Membership
	var role string
	var created int64
	if err := r.Scan(&m.TenantID, &m.GroupID, &m.UserID, &role, &created); err != nil {
		return nil, err
	}
	m.Role = model.GroupRole(role)
	m.CreatedAt = sqlbase.FromMicros(created)
	return &m, nil
}

// PutMembership adds a user to a group, or changes the role of a member. A
// changed membership keeps its original CreatedAt. The group and the user
// must exist in m.TenantID (ErrNotFound otherwise).
func (q *queries) PutMembership(ctx context.Context, m *model.Membership) error {
	_, err := q.Write(ctx, fmt.Sprintf("put membership of user %s in group %s", m.UserID, m.GroupID), store.ErrNotFound,
		`INSERT INTO memberships (tenant_id, group_id, user_id, role, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, group_id, user_id) DO UPDATE SET role = excluded.role`,
		m.TenantID, m.GroupID, m.UserID, string(m.Role), sqlbase.Micros(m.CreatedAt))
	return err
}

func (q *queries) DeleteMembership(ctx context.Context, tenantID, groupID, userID string) error {
	return q.WriteOne(ctx, fmt.Sprintf("delete membership of user %s in group %s", userID, groupID), store.ErrConflict,
		`DELETE FROM memberships WHERE tenant_id = ? AND group_id = ? AND user_id = ?`, tenantID, groupID, userID)
}

// ListMembershipsByUser lists a user's memberships by group name.
func (q *queries) ListMembershipsByUser(ctx context.Context, tenantID, userID string) ([]*model.Membership, error) {
	return sqlbase.GetAll(ctx, q.Q, "list memberships of user "+userID, scanMembership,
		`SELECT `+membershipColumns+` FROM memberships m
		JOIN groups g ON g.tenant_id = m.tenant_id AND g.id = m.group_id
		WHERE m.tenant_id = ? AND m.user_id = ?
		ORDER BY g.name`, tenantID, userID)
}

// ListMembershipsByGroup lists a group's memberships by user name.
func (q *queries) ListMembershipsByGroup(ctx context.Context, tenantID, groupID string) ([]*model.Membership, error) {
	return sqlbase.GetAll(ctx, q.Q, "list memberships of group "+groupID, scanMembership,
		`SELECT `+membershipColumns+` FROM memberships m
		JOIN users u ON u.tenant_id = m.tenant_id AND u.id = m.user_id
		WHERE m.tenant_id = ? AND m.group_id = ?
		ORDER BY u.name`, tenantID, groupID)
}
