package storetest

import (
	"bytes"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func exerciseAPIKeys(t *testing.T, setup setupFunc) {
	t.Run("CreateAPIKey then GetAPIKey returns every field, with unset times and project", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.user(t)
		in := &model.APIKey{ID: model.NewID(), TenantID: b.tenant.ID, UserID: u.ID, Name: "ci", Prefix: "kq_abc",
			Hash: []byte{0x00, 0xff, 0x10, 0x80, 0x7f}, CreatedAt: b.at(1)}
		must(t, b.store.CreateAPIKey(b.ctx, in))
		want := *in
		want.CreatedAt = norm(in.CreatedAt)
		got, err := b.store.GetAPIKey(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetAPIKey", got, &want)
	})

	t.Run("CreateAPIKey round-trips set times and a project", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.user(t)
		p := b.project(t)
		in := &model.APIKey{ID: model.NewID(), TenantID: b.tenant.ID, UserID: u.ID, Name: "ci", Prefix: "kq_abc",
			Hash: []byte("h"), ProjectID: p.ID, CreatedAt: b.at(1),
			ExpiresAt: ptr(b.at(60)), LastUsedAt: ptr(b.at(2)), RevokedAt: ptr(b.at(3))}
		must(t, b.store.CreateAPIKey(b.ctx, in))
		want := *in
		want.CreatedAt = norm(in.CreatedAt)
		want.ExpiresAt, want.LastUsedAt, want.RevokedAt = normPtr(in.ExpiresAt), normPtr(in.LastUsedAt), normPtr(in.RevokedAt)
		got, err := b.store.GetAPIKey(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetAPIKey", got, &want)
		checkTimeUTC(t, "ExpiresAt", *got.ExpiresAt)
	})

	t.Run("GetAPIKey returns ErrNotFound for a missing key and another tenant's key", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.GetAPIKey(b.ctx, b.tenant.ID, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		theirUser := b.user(t, func(u *model.User) { u.TenantID = b.other.ID })
		theirs := b.apiKey(t, theirUser.ID, func(k *model.APIKey) { k.TenantID = b.other.ID })
		_, err = b.store.GetAPIKey(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("GetAPIKeyByHash finds a key of any tenant and returns ErrNotFound for an unknown or empty hash", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mine := b.apiKey(t, b.user(t).ID)
		theirUser := b.user(t, func(u *model.User) { u.TenantID = b.other.ID })
		theirs := b.apiKey(t, theirUser.ID, func(k *model.APIKey) { k.TenantID = b.other.ID })
		for _, k := range []*model.APIKey{mine, theirs} {
			got, err := b.store.GetAPIKeyByHash(b.ctx, k.Hash)
			must(t, err)
			checkEqual(t, "ID", got.ID, k.ID)
			checkEqual(t, "TenantID", got.TenantID, k.TenantID)
		}
		_, err := b.store.GetAPIKeyByHash(b.ctx, []byte("unknown"))
		wantErr(t, err, store.ErrNotFound)
		_, err = b.store.GetAPIKeyByHash(b.ctx, nil)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("CreateAPIKey returns ErrConflict for a hash in use, also in another tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.apiKey(t, b.user(t).ID)
		theirUser := b.user(t, func(u *model.User) { u.TenantID = b.other.ID })
		wantErr(t, b.store.CreateAPIKey(b.ctx, &model.APIKey{TenantID: b.other.ID, UserID: theirUser.ID, Name: "dup",
			Hash: bytes.Clone(k.Hash)}), store.ErrConflict)
	})

	t.Run("CreateAPIKey returns ErrNotFound for a missing user or project, or another tenant's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u := b.user(t)
		theirUser := b.user(t, func(x *model.User) { x.TenantID = b.other.ID })
		theirProject := b.project(t, func(x *model.Project) { x.TenantID = b.other.ID })
		for i, k := range []*model.APIKey{
			{TenantID: b.tenant.ID, UserID: model.NewID(), Name: "k", Hash: []byte("1")},
			{TenantID: b.tenant.ID, UserID: theirUser.ID, Name: "k", Hash: []byte("2")},
			{TenantID: b.tenant.ID, UserID: u.ID, ProjectID: model.NewID(), Name: "k", Hash: []byte("3")},
			{TenantID: b.tenant.ID, UserID: u.ID, ProjectID: theirProject.ID, Name: "k", Hash: []byte("4")},
		} {
			err := b.store.CreateAPIKey(b.ctx, k)
			wantErr(t, err, store.ErrNotFound)
			if k.ID != "" {
				t.Fatalf("case %d: ID %q assigned by a failed create was not undone", i, k.ID)
			}
		}
	})

	t.Run("ListAPIKeys lists a tenant's keys or one user's, newest first", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u1, u2 := b.user(t), b.user(t)
		k1 := b.apiKey(t, u1.ID, func(k *model.APIKey) { k.CreatedAt = b.at(1) })
		k2 := b.apiKey(t, u2.ID, func(k *model.APIKey) { k.CreatedAt = b.at(3) })
		k3 := b.apiKey(t, u1.ID, func(k *model.APIKey) { k.CreatedAt = b.at(2) })
		theirUser := b.user(t, func(u *model.User) { u.TenantID = b.other.ID })
		b.apiKey(t, theirUser.ID, func(k *model.APIKey) { k.TenantID = b.other.ID; k.CreatedAt = b.at(9) })
		id := func(k *model.APIKey) string { return k.ID }

		all, err := b.store.ListAPIKeys(b.ctx, b.tenant.ID, "")
		must(t, err)
		checkEqual(t, "tenant's keys", names(all, id), []string{k2.ID, k3.ID, k1.ID})
		mine, err := b.store.ListAPIKeys(b.ctx, b.tenant.ID, u1.ID)
		must(t, err)
		checkEqual(t, "u1's keys", names(mine, id), []string{k3.ID, k1.ID})
		none, err := b.store.ListAPIKeys(b.ctx, b.tenant.ID, theirUser.ID)
		must(t, err)
		checkEqual(t, "another tenant's user's keys", len(none), 0)
	})

	t.Run("RevokeAPIKey sets RevokedAt and keeps the first revocation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.apiKey(t, b.user(t).ID)
		must(t, b.store.RevokeAPIKey(b.ctx, b.tenant.ID, k.ID, b.at(5)))
		must(t, b.store.RevokeAPIKey(b.ctx, b.tenant.ID, k.ID, b.at(6)))
		got, err := b.store.GetAPIKey(b.ctx, b.tenant.ID, k.ID)
		must(t, err)
		checkEqual(t, "RevokedAt", got.RevokedAt, ptr(norm(b.at(5))))
		if got.Active(b.at(4)) {
			t.Fatal("revoked key is active")
		}
	})

	t.Run("RevokeAPIKey returns ErrNotFound for a missing key and another tenant's key", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.RevokeAPIKey(b.ctx, b.tenant.ID, model.NewID(), b.now), store.ErrNotFound)
		theirUser := b.user(t, func(u *model.User) { u.TenantID = b.other.ID })
		theirs := b.apiKey(t, theirUser.ID, func(k *model.APIKey) { k.TenantID = b.other.ID })
		wantErr(t, b.store.RevokeAPIKey(b.ctx, b.tenant.ID, theirs.ID, b.now), store.ErrNotFound)
		got, err := b.store.GetAPIKey(b.ctx, b.other.ID, theirs.ID)
		must(t, err)
		if got.RevokedAt != nil {
			t.Fatal("another tenant's key was revoked")
		}
	})

	t.Run("TouchAPIKey sets LastUsedAt and returns ErrNotFound for a missing key", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := b.apiKey(t, b.user(t).ID)
		must(t, b.store.TouchAPIKey(b.ctx, k.ID, b.at(7)))
		must(t, b.store.TouchAPIKey(b.ctx, k.ID, b.at(8)))
		got, err := b.store.GetAPIKey(b.ctx, b.tenant.ID, k.ID)
		must(t, err)
		checkEqual(t, "LastUsedAt", got.LastUsedAt, ptr(norm(b.at(8))))
		wantErr(t, b.store.TouchAPIKey(b.ctx, model.NewID(), b.now), store.ErrNotFound)
	})
}
