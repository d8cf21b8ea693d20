package access

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Tenants checks creating, finding and listing tenants.
func Tenants(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateTenant then GetTenant and GetTenantByName return every field", func(t *testing.T, b *harness.Bundle) {
		in := &model.Tenant{ID: model.NewID(), Name: "initech", DisplayName: "Initech", CreatedAt: b.Now}
		harness.Must(t, b.Store.CreateTenant(b.Ctx, in))
		want := &model.Tenant{ID: in.ID, Name: "initech", DisplayName: "Initech", CreatedAt: harness.Norm(b.Now)}

		got, err := b.Store.GetTenant(b.Ctx, in.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "GetTenant", got, want)
		harness.CheckTimeUTC(t, "CreatedAt", got.CreatedAt)

		got, err = b.Store.GetTenantByName(b.Ctx, "initech")
		harness.Must(t, err)
		harness.CheckEqual(t, "GetTenantByName", got, want)
	})

	setup.Run(t, "CreateTenant assigns an id when it has none", func(t *testing.T, b *harness.Bundle) {
		in := &model.Tenant{Name: "initech", CreatedAt: b.Now}
		harness.Must(t, b.Store.CreateTenant(b.Ctx, in))
		if in.ID == "" {
			t.Fatal("ID is still empty")
		}
		got, err := b.Store.GetTenant(b.Ctx, in.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "Name", got.Name, "initech")
	})

	setup.Run(t, "CreateTenant returns ErrConflict for a taken name and leaves the id as given", func(t *testing.T, b *harness.Bundle) {
		in := &model.Tenant{Name: b.Tenant.Name, CreatedAt: b.Now}
		harness.WantErr(t, b.Store.CreateTenant(b.Ctx, in), store.ErrConflict)
		harness.CheckEqual(t, "ID after a failed create", in.ID, "")
	})

	setup.Run(t, "GetTenant and GetTenantByName return ErrNotFound for a missing tenant", func(t *testing.T, b *harness.Bundle) {
		_, err := b.Store.GetTenant(b.Ctx, model.NewID())
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.GetTenantByName(b.Ctx, "nobody")
		harness.WantErr(t, err, store.ErrNotFound)
	})

	setup.Run(t, "ListTenants lists every tenant by name", func(t *testing.T, b *harness.Bundle) {
		b.CreateTenant(t, "Zeta")
		b.CreateTenant(t, "beta")
		got, err := b.Store.ListTenants(b.Ctx)
		harness.Must(t, err)
		// Byte order: upper case sorts first, on every driver.
		harness.CheckEqual(t, "names", harness.Names(got, func(x *model.Tenant) string { return x.Name }),
			[]string{"Zeta", "acme", "beta", "globex"})
	})
}

// Users checks the users of a tenant: round trips, updates, lookups by name
// and external id, uniqueness and paging.
func Users(t *testing.T, setup harness.Setup) {
	user.CheckRefusals(t, setup)
	userWrites(t, setup)
	userLookupsAndRefusals(t, setup)
}

// userWrites checks that a user is stored and updated whole.
func userWrites(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateUser then GetUser returns every field", func(t *testing.T, b *harness.Bundle) {
		in := &model.User{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "ada", DisplayName: "Ada Lovelace",
			Email: "ada@example.com", Role: model.RoleTenantAdmin, Service: true, ExternalID: "https://idp|ada",
			Disabled: true, CreatedAt: b.At(1), UpdatedAt: b.At(2)}
		got := user.CheckCreate(t, b, in)
		harness.CheckTimeUTC(t, "UpdatedAt", got.UpdatedAt)
	})

	setup.Run(t, "CreateUser stores false flags and an empty external id", func(t *testing.T, b *harness.Bundle) {
		in := b.User(t)
		got, err := b.Store.GetUser(b.Ctx, b.Tenant.ID, in.ID)
		harness.Must(t, err)
		if got.Service || got.Disabled || got.ExternalID != "" {
			t.Fatalf("got Service=%v Disabled=%v ExternalID=%q, want false, false, empty", got.Service, got.Disabled, got.ExternalID)
		}
	})

	setup.Run(t, "UpdateUser writes every mutable field and keeps CreatedAt", func(t *testing.T, b *harness.Bundle) {
		u := b.User(t)
		upd := &model.User{ID: u.ID, TenantID: u.TenantID, Name: "grace", DisplayName: "Grace Hopper",
			Email: "grace@example.com", Role: model.RoleViewer, Service: true, ExternalID: "idp|grace",
			Disabled: true, CreatedAt: b.At(100), UpdatedAt: b.At(5)}
		user.CheckUpdate(t, b, u, upd)

		// And back again: true flags can be cleared.
		upd.Service, upd.Disabled, upd.ExternalID = false, false, ""
		harness.Must(t, b.Store.UpdateUser(b.Ctx, upd))
		got, err := b.Store.GetUser(b.Ctx, b.Tenant.ID, u.ID)
		harness.Must(t, err)
		if got.Service || got.Disabled || got.ExternalID != "" {
			t.Fatalf("flags not cleared: %+v", got)
		}
	})

}

// userLookupsAndRefusals checks finding a user by external subject, in its
// tenant only, the users CreateUser refuses, and ListUsers.
func userLookupsAndRefusals(t *testing.T, setup harness.Setup) {
	setup.Run(t, "GetUserByExternalID finds a user by subject, in its tenant, and never by the empty subject", func(t *testing.T, b *harness.Bundle) {
		b.User(t) // no external id
		u := b.User(t, func(u *model.User) { u.ExternalID = "idp|ada" })
		got, err := b.Store.GetUserByExternalID(b.Ctx, b.Tenant.ID, "idp|ada")
		harness.Must(t, err)
		harness.CheckEqual(t, "ID", got.ID, u.ID)
		_, err = b.Store.GetUserByExternalID(b.Ctx, b.Other.ID, "idp|ada")
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.GetUserByExternalID(b.Ctx, b.Tenant.ID, "")
		harness.WantErr(t, err, store.ErrNotFound)
	})

	setup.Run(t, "CreateUser returns ErrConflict for a taken external id, while many users have none", func(t *testing.T, b *harness.Bundle) {
		b.User(t)
		b.User(t)
		b.User(t, func(u *model.User) { u.ExternalID = "idp|ada" })
		harness.WantErr(t, b.Store.CreateUser(b.Ctx, &model.User{TenantID: b.Tenant.ID, Name: "other", ExternalID: "idp|ada"}),
			store.ErrConflict)
		b.User(t, func(u *model.User) { u.ExternalID = "idp|ada"; u.TenantID = b.Other.ID })
	})

	setup.Run(t, "CreateUser returns ErrNotFound for a missing tenant", func(t *testing.T, b *harness.Bundle) {
		harness.WantErr(t, b.Store.CreateUser(b.Ctx, &model.User{TenantID: model.NewID(), Name: "ada"}), store.ErrNotFound)
	})

	setup.Run(t, "ListUsers pages through a tenant's users by name", func(t *testing.T, b *harness.Bundle) {
		want := []string{"mallory", "Bob", "alice", "carol", "dave", "eve", "trent"}
		for _, n := range want {
			b.User(t, func(u *model.User) { u.Name = n })
		}
		b.User(t, func(u *model.User) { u.TenantID = b.Other.ID; u.Name = "zed" })
		harness.CheckNamePaging(t, want, func(p store.Page) ([]*model.User, error) {
			return b.Store.ListUsers(b.Ctx, b.Tenant.ID, p)
		}, func(u *model.User) string { return u.Name })
	})
}

// user describes users for the checks every kind a tenant owns passes.
var user = harness.Owned[model.User]{Kind: "User", Noun: "user", Make: (*harness.Bundle).User,
	Fields: func(u *model.User) harness.Fields {
		return harness.Fields{ID: &u.ID, TenantID: &u.TenantID, Name: &u.Name, CreatedAt: &u.CreatedAt, UpdatedAt: &u.UpdatedAt}
	},
	Create: store.Store.CreateUser, Get: store.Store.GetUser, GetByName: store.Store.GetUserByName,
	Update: store.Store.UpdateUser}
