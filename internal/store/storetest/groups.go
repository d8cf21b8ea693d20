package storetest

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func exerciseGroups(t *testing.T, setup setupFunc) {
	t.Run("CreateGroup then GetGroup and GetGroupByName return every field", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := &model.Group{ID: model.NewID(), TenantID: b.tenant.ID, Name: "vision", Description: "Vision research",
			CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		must(t, b.store.CreateGroup(b.ctx, in))
		want := *in
		want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)
		got, err := b.store.GetGroup(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetGroup", got, &want)
		got, err = b.store.GetGroupByName(b.ctx, b.tenant.ID, "vision")
		must(t, err)
		checkEqual(t, "GetGroupByName", got, &want)
	})

	t.Run("CreateGroup assigns an id when it has none", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := &model.Group{TenantID: b.tenant.ID, Name: "vision"}
		must(t, b.store.CreateGroup(b.ctx, g))
		_, err := b.store.GetGroup(b.ctx, b.tenant.ID, g.ID)
		must(t, err)
	})

	t.Run("UpdateGroup writes name and description and keeps CreatedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		upd := &model.Group{ID: g.ID, TenantID: g.TenantID, Name: "renamed", Description: "new", CreatedAt: b.at(50), UpdatedAt: b.at(3)}
		must(t, b.store.UpdateGroup(b.ctx, upd))
		got, err := b.store.GetGroup(b.ctx, b.tenant.ID, g.ID)
		must(t, err)
		checkEqual(t, "after UpdateGroup", got, &model.Group{ID: g.ID, TenantID: g.TenantID, Name: "renamed",
			Description: "new", CreatedAt: norm(g.CreatedAt), UpdatedAt: norm(b.at(3))})
	})

	t.Run("UpdateGroup returns ErrNotFound for a missing group and another tenant's group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.UpdateGroup(b.ctx, &model.Group{ID: model.NewID(), TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		theirs := b.group(t, func(g *model.Group) { g.TenantID = b.other.ID })
		wantErr(t, b.store.UpdateGroup(b.ctx, &model.Group{ID: theirs.ID, TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
	})

	t.Run("CreateGroup and UpdateGroup return ErrConflict for a name taken in the tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g1 := b.group(t)
		wantErr(t, b.store.CreateGroup(b.ctx, &model.Group{TenantID: b.tenant.ID, Name: g1.Name}), store.ErrConflict)
		g2 := b.group(t)
		g2.Name = g1.Name
		wantErr(t, b.store.UpdateGroup(b.ctx, g2), store.ErrConflict)
		b.group(t, func(g *model.Group) { g.TenantID = b.other.ID; g.Name = g1.Name })
	})

	t.Run("GetGroup and GetGroupByName return ErrNotFound for another tenant's group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.group(t, func(g *model.Group) { g.TenantID = b.other.ID })
		_, err := b.store.GetGroup(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
		_, err = b.store.GetGroupByName(b.ctx, b.tenant.ID, theirs.Name)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("DeleteGroup deletes the group and its memberships", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		u := b.user(t)
		must(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember}))
		must(t, b.store.DeleteGroup(b.ctx, b.tenant.ID, g.ID))
		_, err := b.store.GetGroup(b.ctx, b.tenant.ID, g.ID)
		wantErr(t, err, store.ErrNotFound)
		ms, err := b.store.ListMembershipsByUser(b.ctx, b.tenant.ID, u.ID)
		must(t, err)
		checkEqual(t, "memberships left", len(ms), 0)
	})

	t.Run("DeleteGroup returns ErrNotFound for a missing group and another tenant's group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.DeleteGroup(b.ctx, b.tenant.ID, model.NewID()), store.ErrNotFound)
		theirs := b.group(t, func(g *model.Group) { g.TenantID = b.other.ID })
		wantErr(t, b.store.DeleteGroup(b.ctx, b.tenant.ID, theirs.ID), store.ErrNotFound)
		_, err := b.store.GetGroup(b.ctx, b.other.ID, theirs.ID)
		must(t, err)
	})

	t.Run("DeleteGroup returns ErrConflict while a policy governs the group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		b.policy(t, g.ID)
		wantErr(t, b.store.DeleteGroup(b.ctx, b.tenant.ID, g.ID), store.ErrConflict)
		_, err := b.store.GetGroup(b.ctx, b.tenant.ID, g.ID)
		must(t, err)
	})

	t.Run("DeleteGroup returns ErrConflict while a project is restricted to the group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		b.project(t, func(p *model.Project) { p.GroupID = g.ID })
		wantErr(t, b.store.DeleteGroup(b.ctx, b.tenant.ID, g.ID), store.ErrConflict)
	})

	t.Run("ListGroups pages through a tenant's groups by name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := []string{"nlp", "Vision", "audio", "robotics", "infra"}
		for _, n := range want {
			b.group(t, func(g *model.Group) { g.Name = n })
		}
		b.group(t, func(g *model.Group) { g.TenantID = b.other.ID; g.Name = "zzz" })
		checkNamePaging(t, want, func(p store.Page) ([]*model.Group, error) {
			return b.store.ListGroups(b.ctx, b.tenant.ID, p)
		}, func(g *model.Group) string { return g.Name })
	})
}

func exerciseMemberships(t *testing.T, setup setupFunc) {
	t.Run("PutMembership adds a member, then changes the role and keeps CreatedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		u := b.user(t)
		must(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.tenant.ID, GroupID: g.ID, UserID: u.ID,
			Role: model.GroupRoleMember, CreatedAt: b.at(1)}))
		want := &model.Membership{TenantID: b.tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember, CreatedAt: norm(b.at(1))}
		got, err := b.store.ListMembershipsByGroup(b.ctx, b.tenant.ID, g.ID)
		must(t, err)
		checkEqual(t, "after add", got, []*model.Membership{want})

		must(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.tenant.ID, GroupID: g.ID, UserID: u.ID,
			Role: model.GroupRoleLead, CreatedAt: b.at(9)}))
		want.Role = model.GroupRoleLead
		got, err = b.store.ListMembershipsByUser(b.ctx, b.tenant.ID, u.ID)
		must(t, err)
		checkEqual(t, "after role change", got, []*model.Membership{want})
	})

	t.Run("PutMembership returns ErrNotFound for a missing group or user, or another tenant's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		u := b.user(t)
		theirGroup := b.group(t, func(x *model.Group) { x.TenantID = b.other.ID })
		theirUser := b.user(t, func(x *model.User) { x.TenantID = b.other.ID })
		for _, m := range []*model.Membership{
			{TenantID: b.tenant.ID, GroupID: model.NewID(), UserID: u.ID, Role: model.GroupRoleMember},
			{TenantID: b.tenant.ID, GroupID: g.ID, UserID: model.NewID(), Role: model.GroupRoleMember},
			{TenantID: b.tenant.ID, GroupID: theirGroup.ID, UserID: u.ID, Role: model.GroupRoleMember},
			{TenantID: b.tenant.ID, GroupID: g.ID, UserID: theirUser.ID, Role: model.GroupRoleMember},
		} {
			wantErr(t, b.store.PutMembership(b.ctx, m), store.ErrNotFound)
		}
	})

	t.Run("PutMembership from another tenant cannot change an existing membership", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		u := b.user(t)
		must(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember}))
		wantErr(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.other.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleLead}),
			store.ErrNotFound)
		got, err := b.store.ListMembershipsByGroup(b.ctx, b.tenant.ID, g.ID)
		must(t, err)
		if len(got) != 1 || got[0].Role != model.GroupRoleMember {
			t.Fatalf("membership changed: %s", show(got))
		}
	})

	t.Run("DeleteMembership removes one membership and returns ErrNotFound when there is none", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		u1, u2 := b.user(t), b.user(t)
		for _, u := range []*model.User{u1, u2} {
			must(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember}))
		}
		wantErr(t, b.store.DeleteMembership(b.ctx, b.other.ID, g.ID, u1.ID), store.ErrNotFound)
		must(t, b.store.DeleteMembership(b.ctx, b.tenant.ID, g.ID, u1.ID))
		wantErr(t, b.store.DeleteMembership(b.ctx, b.tenant.ID, g.ID, u1.ID), store.ErrNotFound)
		got, err := b.store.ListMembershipsByGroup(b.ctx, b.tenant.ID, g.ID)
		must(t, err)
		checkEqual(t, "members left", names(got, func(m *model.Membership) string { return m.UserID }), []string{u2.ID})
	})

	t.Run("ListMembershipsByUser orders by group name and ListMembershipsByGroup by user name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		gB := b.group(t, func(g *model.Group) { g.Name = "b-group" })
		gA := b.group(t, func(g *model.Group) { g.Name = "a-group" })
		gC := b.group(t, func(g *model.Group) { g.Name = "c-group" })
		uY := b.user(t, func(u *model.User) { u.Name = "y-user" })
		uX := b.user(t, func(u *model.User) { u.Name = "x-user" })
		for _, g := range []*model.Group{gB, gA, gC} {
			must(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.tenant.ID, GroupID: g.ID, UserID: uY.ID, Role: model.GroupRoleMember}))
		}
		must(t, b.store.PutMembership(b.ctx, &model.Membership{TenantID: b.tenant.ID, GroupID: gA.ID, UserID: uX.ID, Role: model.GroupRoleLead}))

		byUser, err := b.store.ListMembershipsByUser(b.ctx, b.tenant.ID, uY.ID)
		must(t, err)
		checkEqual(t, "groups of y-user", names(byUser, func(m *model.Membership) string { return m.GroupID }),
			[]string{gA.ID, gB.ID, gC.ID})
		byGroup, err := b.store.ListMembershipsByGroup(b.ctx, b.tenant.ID, gA.ID)
		must(t, err)
		checkEqual(t, "users of a-group", names(byGroup, func(m *model.Membership) string { return m.UserID }),
			[]string{uX.ID, uY.ID})
		checkEqual(t, "x-user's role", byGroup[0].Role, model.GroupRoleLead)

		none, err := b.store.ListMembershipsByUser(b.ctx, b.other.ID, uY.ID)
		must(t, err)
		checkEqual(t, "memberships seen from another tenant", len(none), 0)
	})
}
