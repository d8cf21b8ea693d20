package access

import (
	"bytes"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// APIKeys checks API keys: round trips, lookup by hash across tenants,
// listing, revoking and touching.
func APIKeys(t *testing.T, setup harness.Setup) {
	apiKey.CheckRefusals(t, setup)
	apiKeyReads(t, setup)
	apiKeyRefusals(t, setup)
	apiKeyLifecycle(t, setup)
}

// apiKeyReads checks that a key is stored whole and found by id in its
// tenant, and by hash in any.
func apiKeyReads(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateAPIKey then GetAPIKey returns every field, with unset times and project", func(t *testing.T, b *harness.Bundle) {
		u := b.User(t)
		in := &model.APIKey{ID: model.NewID(), TenantID: b.Tenant.ID, UserID: u.ID, Name: "ci", Prefix: "kq_abc",
			Hash: []byte{0x00, 0xff, 0x10, 0x80, 0x7f}, CreatedAt: b.At(1)}
		apiKey.CheckCreate(t, b, in)
	})

	setup.Run(t, "CreateAPIKey round-trips set times and a project", func(t *testing.T, b *harness.Bundle) {
		u := b.User(t)
		p := b.Project(t)
		in := &model.APIKey{ID: model.NewID(), TenantID: b.Tenant.ID, UserID: u.ID, Name: "ci", Prefix: "kq_abc",
			Hash: []byte("h"), ProjectID: p.ID, CreatedAt: b.At(1),
			ExpiresAt: harness.Ptr(b.At(60)), LastUsedAt: harness.Ptr(b.At(2)), RevokedAt: harness.Ptr(b.At(3))}
		harness.Must(t, b.Store.CreateAPIKey(b.Ctx, in))
		want := apiKey.Stored(in)
		want.ExpiresAt, want.LastUsedAt, want.RevokedAt = harness.NormPtr(in.ExpiresAt), harness.NormPtr(in.LastUsedAt), harness.NormPtr(in.RevokedAt)
		got := apiKey.CheckStored(t, b, "GetAPIKey", want)
		harness.CheckTimeUTC(t, "ExpiresAt", *got.ExpiresAt)
	})

	setup.Run(t, "GetAPIKeyByHash finds a key of any tenant and returns ErrNotFound for an unknown or empty hash", func(t *testing.T, b *harness.Bundle) {
		mine := b.APIKey(t, b.User(t).ID)
		theirUser := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		theirs := b.APIKey(t, theirUser.ID, func(k *model.APIKey) { k.TenantID = b.Other.ID })
		for _, k := range []*model.APIKey{mine, theirs} {
			got, err := b.Store.GetAPIKeyByHash(b.Ctx, k.Hash)
			harness.Must(t, err)
			harness.CheckEqual(t, "ID", got.ID, k.ID)
			harness.CheckEqual(t, "TenantID", got.TenantID, k.TenantID)
		}
		_, err := b.Store.GetAPIKeyByHash(b.Ctx, []byte("unknown"))
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.GetAPIKeyByHash(b.Ctx, nil)
		harness.WantErr(t, err, store.ErrNotFound)
	})
}

// apiKeyRefusals checks the keys CreateAPIKey refuses: a hash in use, a
// missing or another tenant's user or project.
func apiKeyRefusals(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateAPIKey returns ErrConflict for a hash in use, also in another tenant", func(t *testing.T, b *harness.Bundle) {
		k := b.APIKey(t, b.User(t).ID)
		theirUser := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		harness.WantErr(t, b.Store.CreateAPIKey(b.Ctx, &model.APIKey{TenantID: b.Other.ID, UserID: theirUser.ID, Name: "dup",
			Hash: bytes.Clone(k.Hash)}), store.ErrConflict)
	})

	setup.Run(t, "CreateAPIKey returns ErrNotFound for a missing user or project, or another tenant's", func(t *testing.T, b *harness.Bundle) {
		u := b.User(t)
		theirUser := b.User(t, func(x *model.User) { x.TenantID = b.Other.ID })
		theirProject := b.Project(t, func(x *model.Project) { x.TenantID = b.Other.ID })
		for i, k := range []*model.APIKey{
			{TenantID: b.Tenant.ID, UserID: model.NewID(), Name: "k", Hash: []byte("1")},
			{TenantID: b.Tenant.ID, UserID: theirUser.ID, Name: "k", Hash: []byte("2")},
			{TenantID: b.Tenant.ID, UserID: u.ID, ProjectID: model.NewID(), Name: "k", Hash: []byte("3")},
			{TenantID: b.Tenant.ID, UserID: u.ID, ProjectID: theirProject.ID, Name: "k", Hash: []byte("4")},
		} {
			err := b.Store.CreateAPIKey(b.Ctx, k)
			harness.WantErr(t, err, store.ErrNotFound)
			if k.ID != "" {
				t.Fatalf("case %d: ID %q assigned by a failed create was not undone", i, k.ID)
			}
		}
	})
}

// apiKeyLifecycle checks listing, revoking and touching keys.
func apiKeyLifecycle(t *testing.T, setup harness.Setup) {
	setup.Run(t, "ListAPIKeys lists a tenant's keys or one user's, newest first", func(t *testing.T, b *harness.Bundle) {
		u1, u2 := b.User(t), b.User(t)
		k1 := b.APIKey(t, u1.ID, func(k *model.APIKey) { k.CreatedAt = b.At(1) })
		k2 := b.APIKey(t, u2.ID, func(k *model.APIKey) { k.CreatedAt = b.At(3) })
		k3 := b.APIKey(t, u1.ID, func(k *model.APIKey) { k.CreatedAt = b.At(2) })
		theirUser := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		b.APIKey(t, theirUser.ID, func(k *model.APIKey) { k.TenantID = b.Other.ID; k.CreatedAt = b.At(9) })
		id := func(k *model.APIKey) string { return k.ID }

		all, err := b.Store.ListAPIKeys(b.Ctx, b.Tenant.ID, "")
		harness.Must(t, err)
		harness.CheckEqual(t, "tenant's keys", harness.Names(all, id), []string{k2.ID, k3.ID, k1.ID})
		mine, err := b.Store.ListAPIKeys(b.Ctx, b.Tenant.ID, u1.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "u1's keys", harness.Names(mine, id), []string{k3.ID, k1.ID})
		none, err := b.Store.ListAPIKeys(b.Ctx, b.Tenant.ID, theirUser.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "another tenant's user's keys", len(none), 0)
	})

	setup.Run(t, "RevokeAPIKey sets RevokedAt and keeps the first revocation", func(t *testing.T, b *harness.Bundle) {
		k := b.APIKey(t, b.User(t).ID)
		harness.Must(t, b.Store.RevokeAPIKey(b.Ctx, b.Tenant.ID, k.ID, b.At(5)))
		harness.Must(t, b.Store.RevokeAPIKey(b.Ctx, b.Tenant.ID, k.ID, b.At(6)))
		got, err := b.Store.GetAPIKey(b.Ctx, b.Tenant.ID, k.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "RevokedAt", got.RevokedAt, harness.Ptr(harness.Norm(b.At(5))))
		if got.Active(b.At(4)) {
			t.Fatal("revoked key is active")
		}
	})

	setup.Run(t, "RevokeAPIKey returns ErrNotFound for a missing key and another tenant's key", func(t *testing.T, b *harness.Bundle) {
		harness.WantErr(t, b.Store.RevokeAPIKey(b.Ctx, b.Tenant.ID, model.NewID(), b.Now), store.ErrNotFound)
		theirUser := b.User(t, func(u *model.User) { u.TenantID = b.Other.ID })
		theirs := b.APIKey(t, theirUser.ID, func(k *model.APIKey) { k.TenantID = b.Other.ID })
		harness.WantErr(t, b.Store.RevokeAPIKey(b.Ctx, b.Tenant.ID, theirs.ID, b.Now), store.ErrNotFound)
		got, err := b.Store.GetAPIKey(b.Ctx, b.Other.ID, theirs.ID)
		harness.Must(t, err)
		if got.RevokedAt != nil {
			t.Fatal("another tenant's key was revoked")
		}
	})

	setup.Run(t, "TouchAPIKey sets LastUsedAt and returns ErrNotFound for a missing key", func(t *testing.T, b *harness.Bundle) {
		k := b.APIKey(t, b.User(t).ID)
		harness.Must(t, b.Store.TouchAPIKey(b.Ctx, k.ID, b.At(7)))
		harness.Must(t, b.Store.TouchAPIKey(b.Ctx, k.ID, b.At(8)))
		got, err := b.Store.GetAPIKey(b.Ctx, b.Tenant.ID, k.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "LastUsedAt", got.LastUsedAt, harness.Ptr(harness.Norm(b.At(8))))
		harness.WantErr(t, b.Store.TouchAPIKey(b.Ctx, model.NewID(), b.Now), store.ErrNotFound)
	})
}

// apiKey describes API keys for the checks every kind a tenant owns
// passes: a key is neither updated nor deleted, only revoked, and its name
// need not be unique.
var apiKey = harness.Owned[model.APIKey]{Kind: "APIKey", Noun: "key",
	Make: func(b *harness.Bundle, t *testing.T, mods ...func(*model.APIKey)) *model.APIKey {
		return b.APIKey(t, b.User(t).ID, mods...)
	},
	Fields: func(k *model.APIKey) harness.Fields {
		return harness.Fields{ID: &k.ID, TenantID: &k.TenantID, CreatedAt: &k.CreatedAt}
	},
	Create: store.Store.CreateAPIKey, Get: store.Store.GetAPIKey}
