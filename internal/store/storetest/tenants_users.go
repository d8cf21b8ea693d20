package storetest

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func exerciseTenants(t *testing.T, setup setupFunc) {
	t.Run("CreateTenant then GetTenant and GetTenantByName return every field", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := &model.Tenant{ID: model.NewID(), Name: "initech", DisplayName: "Initech", CreatedAt: b.now}
		must(t, b.store.CreateTenant(b.ctx, in))
		want := &model.Tenant{ID: in.ID, Name: "initech", DisplayName: "Initech", CreatedAt: norm(b.now)}

		got, err := b.store.GetTenant(b.ctx, in.ID)
		must(t, err)
		checkEqual(t, "GetTenant", got, want)
		checkTimeUTC(t, "CreatedAt", got.CreatedAt)

		got, err = b.store.GetTenantByName(b.ctx, "initech")
		must(t, err)
		checkEqual(t, "GetTenantByName", got, want)
	})

	t.Run("CreateTenant assigns an id when it has none", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := &model.Tenant{Name: "initech", CreatedAt: b.now}
		must(t, b.store.CreateTenant(b.ctx, in))
		if in.ID == "" {
			t.Fatal("ID is still empty")
		}
		got, err := b.store.GetTenant(b.ctx, in.ID)
		must(t, err)
		checkEqual(t, "Name", got.Name, "initech")
	})

	t.Run("CreateTenant returns ErrConflict for a taken name and leaves the id as given", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := &model.Tenant{Name: b.tenant.Name, CreatedAt: b.now}
		wantErr(t, b.store.CreateTenant(b.ctx, in), store.ErrConflict)
		checkEqual(t, "ID after a failed create", in.ID, "")
	})

	t.Run("GetTenant and GetTenantByName return ErrNotFound for a missing tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.GetTenant(b.ctx, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		_, err = b.store.GetTenantByName(b.ctx, "nobody")
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("ListTenants lists every tenant by name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.createTenant(t, "Zeta")
		b.createTenant(t, "beta")
		got, err := b.store.ListTenants(b.ctx)
		must(t, err)
		// Byte order: upper case sorts first, on every driver.
		checkEqual(t, "names", names(got, func(x *model.Tenant) string { return x.Name }),
			[]string{"Zeta", "acme", "beta", "globex"})
	})
}

func exerciseUsers(t *testing.T, setup setupFunc) {
	t.Run("CreateUser then GetUser returns every field", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := &model.User{ID: model.NewID(), TenantID: b.tenant.ID, Name: "ada", DisplayName: "Ada Lovelace",
			Email: "ada@example.com", Role: model.RoleTenantAdmin, Service: true, ExternalID: "https://idp|ada",
			Disabled: true, CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		must(t, b.store.CreateUser(b.ctx, in))
		want := *in
		want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)

		got, err := b.store.GetUser(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetUser", got, &want)
		checkTimeUTC(t, "UpdatedAt", got.UpdatedAt)
	})

	t.Run("CreateUser stores false flags and an empty external id", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := b.user(t)
		got, err := b.store.GetUser(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		if got.Service || got.Disabled || got.ExternalID != "" {
			t.Fatalf("got Service=%v Disabled=%v ExternalID=%q, want false, false, empty", got.Service, got.Disabled, got.ExternalID)
		}
	})

	t.Run("UpdateUser writes every mutable field and keeps CreatedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.user(t)
		upd := &model.User{ID: u.ID, TenantID: u.TenantID, Name: "grace", DisplayName: "Grace Hopper",
			Email: "grace@example.com", Role: model.RoleViewer, Service: true, ExternalID: "idp|grace",
			Disabled: true, CreatedAt: b.at(100), UpdatedAt: b.at(5)}
		must(t, b.store.UpdateUser(b.ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = norm(u.CreatedAt), norm(upd.UpdatedAt)
		got, err := b.store.GetUser(b.ctx, b.tenant.ID, u.ID)
		must(t, err)
		checkEqual(t, "after UpdateUser", got, &want)

		// And back again: true flags can be cleared.
		upd.Service, upd.Disabled, upd.ExternalID = false, false, ""
		must(t, b.store.UpdateUser(b.ctx, upd))
		got, err = b.store.GetUser(b.ctx, b.tenant.ID, u.ID)
		must(t, err)
		if got.Service || got.Disabled || got.ExternalID != "" {
			t.Fatalf("flags not cleared: %+v", got)
		}
	})

	t.Run("UpdateUser returns ErrNotFound for a missing user and for another tenant's user", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.UpdateUser(b.ctx, &model.User{ID: model.NewID(), TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		theirs := b.user(t, func(u *model.User) { u.TenantID = b.other.ID })
		changed := *theirs
		changed.TenantID = b.tenant.ID
		changed.Name = "hijacked"
		wantErr(t, b.store.UpdateUser(b.ctx, &changed), store.ErrNotFound)
		got, err := b.store.GetUser(b.ctx, b.other.ID, theirs.ID)
		must(t, err)
		checkEqual(t, "other tenant's user name", got.Name, theirs.Name)
	})

	t.Run("UpdateUser returns ErrConflict for a name taken in the tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1 := b.user(t)
		u2 := b.user(t)
		u2.Name = u1.Name
		wantErr(t, b.store.UpdateUser(b.ctx, u2), store.ErrConflict)
	})

	t.Run("GetUser returns ErrNotFound for a missing user and for another tenant's user", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.GetUser(b.ctx, b.tenant.ID, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		theirs := b.user(t, func(u *model.User) { u.TenantID = b.other.ID })
		_, err = b.store.GetUser(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("GetUserByName finds a user in its own tenant only", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.user(t, func(u *model.User) { u.Name = "ada" })
		got, err := b.store.GetUserByName(b.ctx, b.tenant.ID, "ada")
		must(t, err)
		checkEqual(t, "ID", got.ID, u.ID)
		_, err = b.store.GetUserByName(b.ctx, b.other.ID, "ada")
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("GetUserByExternalID finds a user by subject, in its tenant, and never by the empty subject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.user(t) // no external id
		u := b.user(t, func(u *model.User) { u.ExternalID = "idp|ada" })
		got, err := b.store.GetUserByExternalID(b.ctx, b.tenant.ID, "idp|ada")
		must(t, err)
		checkEqual(t, "ID", got.ID, u.ID)
		_, err = b.store.GetUserByExternalID(b.ctx, b.other.ID, "idp|ada")
		wantErr(t, err, store.ErrNotFound)
		_, err = b.store.GetUserByExternalID(b.ctx, b.tenant.ID, "")
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("CreateUser returns ErrConflict for a name taken in the tenant but not in another tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.user(t, func(u *model.User) { u.Name = "ada" })
		wantErr(t, b.store.CreateUser(b.ctx, &model.User{TenantID: b.tenant.ID, Name: "ada"}), store.ErrConflict)
		b.user(t, func(u *model.User) { u.Name = "ada"; u.TenantID = b.other.ID })
	})

	t.Run("CreateUser returns ErrConflict for a taken external id, while many users have none", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.user(t)
		b.user(t)
		b.user(t, func(u *model.User) { u.ExternalID = "idp|ada" })
		wantErr(t, b.store.CreateUser(b.ctx, &model.User{TenantID: b.tenant.ID, Name: "other", ExternalID: "idp|ada"}),
			store.ErrConflict)
		b.user(t, func(u *model.User) { u.ExternalID = "idp|ada"; u.TenantID = b.other.ID })
	})

	t.Run("CreateUser returns ErrNotFound for a missing tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.CreateUser(b.ctx, &model.User{TenantID: model.NewID(), Name: "ada"}), store.ErrNotFound)
	})

	t.Run("ListUsers pages through a tenant's users by name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := []string{"mallory", "Bob", "alice", "carol", "dave", "eve", "trent"}
		for _, n := range want {
			b.user(t, func(u *model.User) { u.Name = n })
		}
		b.user(t, func(u *model.User) { u.TenantID = b.other.ID; u.Name = "zed" })
		checkNamePaging(t, want, func(p store.Page) ([]*model.User, error) {
			return b.store.ListUsers(b.ctx, b.tenant.ID, p)
		}, func(u *model.User) string { return u.Name })
	})
}
