package estate

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Profiles checks profiles and their ordered pool links, written whole or
// not at all.
func Profiles(t *testing.T, setup harness.Setup) {
	profile.CheckRefusals(t, setup)
	profileWrites(t, setup)
	profileRefusals(t, setup)
	profileDeletesAndLists(t, setup)
}

// profileWrites checks that a profile is stored and updated whole: every
// field, a fractional size, and its pool links in order.
func profileWrites(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateProfile then GetProfile returns every field with pools in order", func(t *testing.T, b *harness.Bundle) {
		c := b.GPUClass(t)
		p1, p2, p3 := b.Pool(t), b.Pool(t), b.Pool(t)
		in := &model.Profile{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "8xH100", Description: "a node",
			Size: model.Size{Nodes: 2, PerNode: model.GPUs(8)}, SizeParameter: "gpus", GPUClassID: c.ID,
			MinGPUMemoryGB: 80, TimeWeightMilli: 1500, Pools: []string{p3.ID, p1.ID, p2.ID},
			QueuingOrder: []string{"pol-b", "pol-a"}, CreatedAt: b.At(1), UpdatedAt: b.At(2)}
		profile.CheckCreate(t, b, in)
	})

	setup.Run(t, "CreateProfile stores a fractional size and reads nil and empty lists back as empty", func(t *testing.T, b *harness.Bundle) {
		pr1 := b.Profile(t, func(p *model.Profile) { p.Size = model.Size{Nodes: 1, PerNode: 125}; p.TimeWeightMilli = 0 })
		pr2 := b.Profile(t, func(p *model.Profile) { p.Pools = []string{}; p.QueuingOrder = []string{} })
		got, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr1.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "Size", got.Size, model.Size{Nodes: 1, PerNode: 125})
		harness.CheckEqual(t, "TimeWeightMilli", got.TimeWeightMilli, int64(0))
		for _, id := range []string{pr1.ID, pr2.ID} {
			got, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, id)
			harness.Must(t, err)
			if got.Pools == nil || len(got.Pools) != 0 || got.QueuingOrder == nil || len(got.QueuingOrder) != 0 {
				t.Fatalf("Pools = %#v, QueuingOrder = %#v, want empty slices", got.Pools, got.QueuingOrder)
			}
			harness.CheckEqual(t, "GPUClassID", got.GPUClassID, "")
		}
	})

	setup.Run(t, "UpdateProfile writes every mutable field and replaces the pool links wholesale", func(t *testing.T, b *harness.Bundle) {
		c := b.GPUClass(t)
		p1, p2, p3 := b.Pool(t), b.Pool(t), b.Pool(t)
		pr := b.Profile(t, func(p *model.Profile) { p.Pools = []string{p1.ID, p2.ID}; p.QueuingOrder = []string{"a"} })
		upd := &model.Profile{ID: pr.ID, TenantID: pr.TenantID, Name: "renamed", Description: "d",
			Size: model.Size{Nodes: 1, PerNode: 500}, SizeParameter: "size", GPUClassID: c.ID, MinGPUMemoryGB: 24,
			TimeWeightMilli: 250, Pools: []string{p3.ID, p1.ID}, QueuingOrder: []string{"b", "c"},
			CreatedAt: b.At(50), UpdatedAt: b.At(6)}
		profile.CheckUpdate(t, b, pr, upd)
		// p2 is no longer linked, so it can go; p1 and p3 cannot.
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p2.ID))
		harness.WantErr(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p3.ID), store.ErrConflict)

		upd.Pools, upd.QueuingOrder, upd.GPUClassID = nil, nil, ""
		harness.Must(t, b.Store.UpdateProfile(b.Ctx, upd))
		got, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "Pools after unlinking all", got.Pools, []string{})
		harness.CheckEqual(t, "GPUClassID after clearing", got.GPUClassID, "")
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p3.ID))
	})
}

// profileRefusals checks the writes refused for their pools and classes:
// missing, another tenant's or listed twice, each writing nothing.
func profileRefusals(t *testing.T, setup harness.Setup) {
	setup.Run(t, "UpdateProfile returns ErrNotFound for a missing pool and leaves the profile as it was", func(t *testing.T, b *harness.Bundle) {
		p1 := b.Pool(t)
		pr := b.Profile(t, func(p *model.Profile) { p.Pools = []string{p1.ID} })
		before, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr.ID)
		harness.Must(t, err)
		upd := *pr
		upd.Name = "renamed"
		upd.Pools = []string{p1.ID, model.NewID()}
		harness.WantErr(t, b.Store.UpdateProfile(b.Ctx, &upd), store.ErrNotFound)
		after, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "profile after a failed update", after, before)
	})

	setup.Run(t, "CreateProfile returns ErrConflict for a pool listed twice and writes nothing", func(t *testing.T, b *harness.Bundle) {
		p := b.Pool(t)
		dup := &model.Profile{TenantID: b.Tenant.ID, Name: "dup", Pools: []string{p.ID, p.ID}}
		harness.WantErr(t, b.Store.CreateProfile(b.Ctx, dup), store.ErrConflict)
		list, err := b.Store.ListProfiles(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "profiles after a failed create", len(list), 0)
	})

	setup.Run(t, "CreateProfile returns ErrNotFound for a missing pool or class, or another tenant's, and writes nothing", func(t *testing.T, b *harness.Bundle) {
		p := b.Pool(t)
		theirPool := b.Pool(t, func(x *model.Pool) { x.TenantID = b.Other.ID })
		theirClass := b.GPUClass(t, func(x *model.GPUClass) { x.TenantID = b.Other.ID })
		for _, pr := range []*model.Profile{
			{TenantID: b.Tenant.ID, Name: "a", Pools: []string{p.ID, model.NewID()}},
			{TenantID: b.Tenant.ID, Name: "b", Pools: []string{theirPool.ID}},
			{TenantID: b.Tenant.ID, Name: "c", GPUClassID: model.NewID()},
			{TenantID: b.Tenant.ID, Name: "d", GPUClassID: theirClass.ID},
		} {
			harness.WantErr(t, b.Store.CreateProfile(b.Ctx, pr), store.ErrNotFound)
			_, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr.ID)
			harness.WantErr(t, err, store.ErrNotFound)
		}
		list, err := b.Store.ListProfiles(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "profiles after failed creates", len(list), 0)
		// No link row was left behind to pin the pool.
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p.ID))
	})
}

// profileDeletesAndLists checks DeleteProfile, which a compute resource in
// use holds back, and ListProfiles.
func profileDeletesAndLists(t *testing.T, setup harness.Setup) {
	setup.Run(t, "DeleteProfile deletes the profile's pool links with it", func(t *testing.T, b *harness.Bundle) {
		p := b.Pool(t)
		pr := b.Profile(t, func(x *model.Profile) { x.Pools = []string{p.ID} })
		harness.Must(t, b.Store.DeleteProfile(b.Ctx, b.Tenant.ID, pr.ID))
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p.ID))
	})

	setup.Run(t, "DeleteProfile returns ErrConflict while a compute resource uses the profile", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		harness.WantErr(t, b.Store.DeleteProfile(b.Ctx, b.Tenant.ID, q.Profile.ID), store.ErrConflict)
		_, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, q.Profile.ID)
		harness.Must(t, err)
	})

	setup.Run(t, "ListProfiles lists a tenant's profiles by name, each with its own pools in order", func(t *testing.T, b *harness.Bundle) {
		p1, p2, p3 := b.Pool(t), b.Pool(t), b.Pool(t)
		b.Profile(t, func(x *model.Profile) { x.Name = "m"; x.Pools = []string{p2.ID, p1.ID, p3.ID} })
		b.Profile(t, func(x *model.Profile) { x.Name = "B" })
		b.Profile(t, func(x *model.Profile) { x.Name = "a"; x.Pools = []string{p3.ID} })
		b.Profile(t, func(x *model.Profile) { x.Name = "z"; x.Pools = []string{p1.ID, p2.ID} })
		b.Profile(t, func(x *model.Profile) { x.TenantID = b.Other.ID; x.Name = "c" })
		got, err := b.Store.ListProfiles(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "names", harness.Names(got, func(p *model.Profile) string { return p.Name }), []string{"B", "a", "m", "z"})
		harness.CheckEqual(t, "pools", [][]string{got[0].Pools, got[1].Pools, got[2].Pools, got[3].Pools},
			[][]string{{}, {p3.ID}, {p2.ID, p1.ID, p3.ID}, {p1.ID, p2.ID}})
		for _, p := range got {
			harness.CheckEqual(t, "CreatedAt of "+p.Name, p.CreatedAt, harness.Norm(b.Now))
		}
	})
}

// profile describes profiles for the checks every kind a tenant owns
// passes.
var profile = harness.Owned[model.Profile]{Kind: "Profile", Noun: "profile", Make: (*harness.Bundle).Profile,
	Fields: func(p *model.Profile) harness.Fields {
		return harness.Fields{ID: &p.ID, TenantID: &p.TenantID, Name: &p.Name, CreatedAt: &p.CreatedAt, UpdatedAt: &p.UpdatedAt}
	},
	Create: store.Store.CreateProfile, Get: store.Store.GetProfile, Update: store.Store.UpdateProfile,
	Delete: store.Store.DeleteProfile}
