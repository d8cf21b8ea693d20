package access

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Groups checks groups: round trips, updates, uniqueness in a tenant,
// deletion and what holds it back, paging.
func Groups(t *testing.T, setup harness.Setup) {
	group.CheckRefusals(t, setup)
	groupWrites(t, setup)
	groupDeletesAndLists(t, setup)
}

// groupWrites checks that a group is stored and updated whole.
func groupWrites(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateGroup then GetGroup and GetGroupByName return every field", func(t *testing.T, b *harness.Bundle) {
		group.CheckCreate(t, b, &model.Group{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "vision", Description: "Vision research",
			CreatedAt: b.At(1), UpdatedAt: b.At(2)})
	})

	setup.Run(t, "CreateGroup assigns an id when it has none", func(t *testing.T, b *harness.Bundle) {
		g := &model.Group{TenantID: b.Tenant.ID, Name: "vision"}
		harness.Must(t, b.Store.CreateGroup(b.Ctx, g))
		_, err := b.Store.GetGroup(b.Ctx, b.Tenant.ID, g.ID)
		harness.Must(t, err)
	})

	setup.Run(t, "UpdateGroup writes name and description and keeps CreatedAt", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		group.CheckUpdate(t, b, g, &model.Group{ID: g.ID, TenantID: g.TenantID, Name: "renamed", Description: "new",
			CreatedAt: b.At(50), UpdatedAt: b.At(3)})
	})

	setup.Run(t, "a department and the team in it keep their kind and parent through create, update and list", func(t *testing.T, b *harness.Bundle) {
		top := b.Group(t, func(g *model.Group) { g.Name = "research"; g.Kind = model.GroupDepartment })
		sub := &model.Group{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "ai", Kind: model.GroupDepartment, ParentID: top.ID,
			CreatedAt: b.At(1), UpdatedAt: b.At(1)}
		group.CheckCreate(t, b, sub)
		team := b.Group(t, func(g *model.Group) { g.Name = "vision"; g.ParentID = sub.ID })
		group.CheckUpdate(t, b, team, &model.Group{ID: team.ID, TenantID: team.TenantID, Name: "vision", Description: "moved up",
			ParentID: top.ID, CreatedAt: b.At(50), UpdatedAt: b.At(4)})
		gs, err := b.Store.ListGroups(b.Ctx, b.Tenant.ID, store.Page{})
		harness.Must(t, err)
		got := map[string]string{}
		for _, g := range gs {
			got[g.Name] = g.Kind.String() + " in " + g.ParentID
		}
		want := map[string]string{"research": "department in ", "ai": "department in " + top.ID, "vision": "team in " + top.ID}
		for n, w := range want {
			if got[n] != w {
				t.Errorf("%s: %q, want %q", n, got[n], w)
			}
		}
	})

}

// groupDeletesAndLists checks DeleteGroup, which takes its memberships
// with it and which a policy or a restricted project holds back, and
// ListGroups.
func groupDeletesAndLists(t *testing.T, setup harness.Setup) {
	setup.Run(t, "DeleteGroup deletes the group and its memberships", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		u := b.User(t)
		harness.Must(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember}))
		harness.Must(t, b.Store.DeleteGroup(b.Ctx, b.Tenant.ID, g.ID))
		_, err := b.Store.GetGroup(b.Ctx, b.Tenant.ID, g.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		ms, err := b.Store.ListMembershipsByUser(b.Ctx, b.Tenant.ID, u.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "memberships left", len(ms), 0)
	})

	setup.Run(t, "DeleteGroup returns ErrConflict while a policy governs the group", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		b.Policy(t, g.ID)
		harness.WantErr(t, b.Store.DeleteGroup(b.Ctx, b.Tenant.ID, g.ID), store.ErrConflict)
		_, err := b.Store.GetGroup(b.Ctx, b.Tenant.ID, g.ID)
		harness.Must(t, err)
	})

	setup.Run(t, "DeleteGroup returns ErrConflict while a project is restricted to the group", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		b.Project(t, func(p *model.Project) { p.GroupID = g.ID })
		harness.WantErr(t, b.Store.DeleteGroup(b.Ctx, b.Tenant.ID, g.ID), store.ErrConflict)
	})

	setup.Run(t, "ListGroups pages through a tenant's groups by name", func(t *testing.T, b *harness.Bundle) {
		want := []string{"nlp", "Vision", "audio", "robotics", "infra"}
		for _, n := range want {
			b.Group(t, func(g *model.Group) { g.Name = n })
		}
		b.Group(t, func(g *model.Group) { g.TenantID = b.Other.ID; g.Name = "zzz" })
		harness.CheckNamePaging(t, want, func(p store.Page) ([]*model.Group, error) {
			return b.Store.ListGroups(b.Ctx, b.Tenant.ID, p)
		}, func(g *model.Group) string { return g.Name })
	})
}

// Memberships checks putting, deleting and listing the members of groups,
// within a tenant.
func Memberships(t *testing.T, setup harness.Setup) {
	setup.Run(t, "PutMembership adds a member, then changes the role and keeps CreatedAt", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		u := b.User(t)
		harness.Must(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: u.ID,
			Role: model.GroupRoleMember, CreatedAt: b.At(1)}))
		want := &model.Membership{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember, CreatedAt: harness.Norm(b.At(1))}
		got, err := b.Store.ListMembershipsByGroup(b.Ctx, b.Tenant.ID, g.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "after add", got, []*model.Membership{want})

		harness.Must(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: u.ID,
			Role: model.GroupRoleLead, CreatedAt: b.At(9)}))
		want.Role = model.GroupRoleLead
		got, err = b.Store.ListMembershipsByUser(b.Ctx, b.Tenant.ID, u.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "after role change", got, []*model.Membership{want})
	})

	setup.Run(t, "PutMembership returns ErrNotFound for a missing group or user, or another tenant's", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		u := b.User(t)
		theirGroup := b.Group(t, func(x *model.Group) { x.TenantID = b.Other.ID })
		theirUser := b.User(t, func(x *model.User) { x.TenantID = b.Other.ID })
		for _, m := range []*model.Membership{
			{TenantID: b.Tenant.ID, GroupID: model.NewID(), UserID: u.ID, Role: model.GroupRoleMember},
			{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: model.NewID(), Role: model.GroupRoleMember},
			{TenantID: b.Tenant.ID, GroupID: theirGroup.ID, UserID: u.ID, Role: model.GroupRoleMember},
			{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: theirUser.ID, Role: model.GroupRoleMember},
		} {
			harness.WantErr(t, b.Store.PutMembership(b.Ctx, m), store.ErrNotFound)
		}
	})

	setup.Run(t, "PutMembership from another tenant cannot change an existing membership", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		u := b.User(t)
		harness.Must(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember}))
		harness.WantErr(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Other.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleLead}),
			store.ErrNotFound)
		got, err := b.Store.ListMembershipsByGroup(b.Ctx, b.Tenant.ID, g.ID)
		harness.Must(t, err)
		if len(got) != 1 || got[0].Role != model.GroupRoleMember {
			t.Fatalf("membership changed: %s", harness.Show(got))
		}
	})

	setup.Run(t, "DeleteMembership removes one membership and returns ErrNotFound when there is none", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		u1, u2 := b.User(t), b.User(t)
		for _, u := range []*model.User{u1, u2} {
			harness.Must(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: u.ID, Role: model.GroupRoleMember}))
		}
		harness.WantErr(t, b.Store.DeleteMembership(b.Ctx, b.Other.ID, g.ID, u1.ID), store.ErrNotFound)
		harness.Must(t, b.Store.DeleteMembership(b.Ctx, b.Tenant.ID, g.ID, u1.ID))
		harness.WantErr(t, b.Store.DeleteMembership(b.Ctx, b.Tenant.ID, g.ID, u1.ID), store.ErrNotFound)
		got, err := b.Store.ListMembershipsByGroup(b.Ctx, b.Tenant.ID, g.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "members left", harness.Names(got, func(m *model.Membership) string { return m.UserID }), []string{u2.ID})
	})

	setup.Run(t, "ListMembershipsByUser orders by group name and ListMembershipsByGroup by user name", func(t *testing.T, b *harness.Bundle) {
		gB := b.Group(t, func(g *model.Group) { g.Name = "b-group" })
		gA := b.Group(t, func(g *model.Group) { g.Name = "a-group" })
		gC := b.Group(t, func(g *model.Group) { g.Name = "c-group" })
		uY := b.User(t, func(u *model.User) { u.Name = "y-user" })
		uX := b.User(t, func(u *model.User) { u.Name = "x-user" })
		for _, g := range []*model.Group{gB, gA, gC} {
			harness.Must(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Tenant.ID, GroupID: g.ID, UserID: uY.ID, Role: model.GroupRoleMember}))
		}
		harness.Must(t, b.Store.PutMembership(b.Ctx, &model.Membership{TenantID: b.Tenant.ID, GroupID: gA.ID, UserID: uX.ID, Role: model.GroupRoleLead}))

		byUser, err := b.Store.ListMembershipsByUser(b.Ctx, b.Tenant.ID, uY.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "groups of y-user", harness.Names(byUser, func(m *model.Membership) string { return m.GroupID }),
			[]string{gA.ID, gB.ID, gC.ID})
		byGroup, err := b.Store.ListMembershipsByGroup(b.Ctx, b.Tenant.ID, gA.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "users of a-group", harness.Names(byGroup, func(m *model.Membership) string { return m.UserID }),
			[]string{uX.ID, uY.ID})
		harness.CheckEqual(t, "x-user's role", byGroup[0].Role, model.GroupRoleLead)

		none, err := b.Store.ListMembershipsByUser(b.Ctx, b.Other.ID, uY.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "memberships seen from another tenant", len(none), 0)
	})
}

// group describes groups for the checks every kind a tenant owns passes.
var group = harness.Owned[model.Group]{Kind: "Group", Noun: "group", Make: (*harness.Bundle).Group,
	Fields: func(g *model.Group) harness.Fields {
		return harness.Fields{ID: &g.ID, TenantID: &g.TenantID, Name: &g.Name, CreatedAt: &g.CreatedAt, UpdatedAt: &g.UpdatedAt}
	},
	Create: store.Store.CreateGroup, Get: store.Store.GetGroup, GetByName: store.Store.GetGroupByName,
	Update: store.Store.UpdateGroup, Delete: store.Store.DeleteGroup}
