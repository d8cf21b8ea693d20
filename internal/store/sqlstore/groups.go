package sqlstore

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// groupTable is the groups table.
var groupTable = sqlbase.Table[model.Group]{
	sqlbase.C("id", func(g *model.Group) any { return &g.ID }),
	sqlbase.C("tenant_id", func(g *model.Group) any { return &g.TenantID }),
	sqlbase.C("name", func(g *model.Group) any { return &g.Name }),
	sqlbase.C("description", func(g *model.Group) any { return &g.Description }),
	sqlbase.C("kind", func(g *model.Group) any { return kindCol{&g.Kind} }),
	sqlbase.C("parent_id", func(g *model.Group) any { return &g.ParentID }),
	sqlbase.C("created_at", func(g *model.Group) any { return sqlbase.Time(&g.CreatedAt) }),
	sqlbase.C("updated_at", func(g *model.Group) any { return sqlbase.Time(&g.UpdatedAt) }),
}

// kindCol stores a group's kind as its name: model.GroupTeam, the zero
// value, is written 'team', as the column's default gives every group
// made before departments.
type kindCol struct{ p *model.GroupKind }

func (c kindCol) Value() (driver.Value, error) { return c.p.String(), nil }

func (c kindCol) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("group kind: cannot read %T", src)
	}
	k, ok := model.ParseGroupKind(s)
	if !ok {
		return fmt.Errorf("group kind %q is not known", s)
	}
	*c.p = k
	return nil
}

// CreateGroup inserts a group. Names are unique in a tenant.
func (q *queries) CreateGroup(ctx context.Context, g *model.Group) error {
	undo := sqlbase.AssignID(&g.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create group %q", g.Name), store.ErrNotFound,
		groupTable.Insert("groups"), groupTable.Values(g)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateGroup(ctx context.Context, g *model.Group) error {
	return q.WriteOne(ctx, "update group "+g.ID, store.ErrNotFound,
		`UPDATE groups SET name = ?, description = ?, kind = ?, parent_id = ?, updated_at = ? WHERE tenant_id = ? AND id = ?`,
		g.Name, g.Description, g.Kind.String(), g.ParentID, sqlbase.Micros(g.UpdatedAt), g.TenantID, g.ID)
}

// DeleteGroup deletes a group and its memberships. A group that a resource
// policy or a project still names cannot be deleted (ErrConflict).
func (q *queries) DeleteGroup(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete group "+id, store.ErrConflict,
		`DELETE FROM groups WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetGroup(ctx context.Context, tenantID, id string) (*model.Group, error) {
	return sqlbase.GetOne(ctx, q.Q, "get group "+id, groupTable.Scan,
		`SELECT `+groupTable.List()+` FROM groups WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetGroupByName(ctx context.Context, tenantID, name string) (*model.Group, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get group %q", name), groupTable.Scan,
		`SELECT `+groupTable.List()+` FROM groups WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// ListGroups lists a tenant's groups by name, one page at a time.
func (q *queries) ListGroups(ctx context.Context, tenantID string, page store.Page) ([]*model.Group, error) {
	query, args := sqlbase.PageByName(`SELECT `+groupTable.List()+` FROM groups WHERE tenant_id = ?`, []any{tenantID}, page)
	return sqlbase.GetAll(ctx, q.Q, "list groups", groupTable.Scan, query, args...)
}

// membershipTable is the memberships table.
var membershipTable = sqlbase.Table[model.Membership]{
	sqlbase.C("tenant_id", func(m *model.Membership) any { return &m.TenantID }),
	sqlbase.C("group_id", func(m *model.Membership) any { return &m.GroupID }),
	sqlbase.C("user_id", func(m *model.Membership) any { return &m.UserID }),
	sqlbase.C("role", func(m *model.Membership) any { return sqlbase.Str(&m.Role) }),
	sqlbase.C("created_at", func(m *model.Membership) any { return sqlbase.Time(&m.CreatedAt) }),
}

// PutMembership adds a user to a group, or changes the role of a member. A
// changed membership keeps its original CreatedAt. The group and the user
// must exist in m.TenantID (ErrNotFound otherwise).
func (q *queries) PutMembership(ctx context.Context, m *model.Membership) error {
	_, err := q.Write(ctx, fmt.Sprintf("put membership of user %s in group %s", m.UserID, m.GroupID), store.ErrNotFound,
		membershipTable.Insert("memberships")+`
		ON CONFLICT (tenant_id, group_id, user_id) DO UPDATE SET role = excluded.role`,
		membershipTable.Values(m)...)
	return err
}

func (q *queries) DeleteMembership(ctx context.Context, tenantID, groupID, userID string) error {
	return q.WriteOne(ctx, fmt.Sprintf("delete membership of user %s in group %s", userID, groupID), store.ErrConflict,
		`DELETE FROM memberships WHERE tenant_id = ? AND group_id = ? AND user_id = ?`, tenantID, groupID, userID)
}

// ListMembershipsByUser lists a user's memberships by group name.
func (q *queries) ListMembershipsByUser(ctx context.Context, tenantID, userID string) ([]*model.Membership, error) {
	return sqlbase.GetAll(ctx, q.Q, "list memberships of user "+userID, membershipTable.Scan,
		`SELECT `+membershipTable.As("m")+` FROM memberships m
		JOIN groups g ON g.tenant_id = m.tenant_id AND g.id = m.group_id
		WHERE m.tenant_id = ? AND m.user_id = ?
		ORDER BY g.name`, tenantID, userID)
}

// ListMembershipsByGroup lists a group's memberships by user name.
func (q *queries) ListMembershipsByGroup(ctx context.Context, tenantID, groupID string) ([]*model.Membership, error) {
	return sqlbase.GetAll(ctx, q.Q, "list memberships of group "+groupID, membershipTable.Scan,
		`SELECT `+membershipTable.As("m")+` FROM memberships m
		JOIN users u ON u.tenant_id = m.tenant_id AND u.id = m.user_id
		WHERE m.tenant_id = ? AND m.group_id = ?
		ORDER BY u.name`, tenantID, groupID)
}
