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
	profileWrites(t, setup)
	profileRefusals(t, setup)
	profileDeletesAndLists(t, setup)
}

// profileWrites checks that a profile is stored and updated whole: every
// field, a fractional size, and its pool links in order.
func profileWrites(t *testing.T, setup harness.Setup) {
	t.Run("CreateProfile then GetProfile returns every field with pools in order", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.GPUClass(t)
		p1, p2, p3 := b.Pool(t), b.Pool(t), b.Pool(t)
		in := &model.Profile{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "8xH100", Description: "a node",
			Size: model.Size{Nodes: 2, PerNode: model.GPUs(8)}, SizeParameter: "gpus", GPUClassID: c.ID,
			MinGPUMemoryGB: 80, TimeWeightMilli: 1500, Pools: []string{p3.ID, p1.ID, p2.ID},
			QueuingOrder: []string{"pol-b", "pol-a"}, CreatedAt: b.At(1), UpdatedAt: b.At(2)}
		harness.Must(t, b.Store.CreateProfile(b.Ctx, in))
		want := *in
		want.CreatedAt, want.UpdatedAt = harness.Norm(in.CreatedAt), harness.Norm(in.UpdatedAt)
		got, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, in.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "GetProfile", got, &want)
	})

	t.Run("CreateProfile stores a fractional size and reads nil and empty lists back as empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
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

	t.Run("UpdateProfile writes every mutable field and replaces the pool links wholesale", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.GPUClass(t)
		p1, p2, p3 := b.Pool(t), b.Pool(t), b.Pool(t)
		pr := b.Profile(t, func(p *model.Profile) { p.Pools = []string{p1.ID, p2.ID}; p.QueuingOrder = []string{"a"} })
		upd := &model.Profile{ID: pr.ID, TenantID: pr.TenantID, Name: "renamed", Description: "d",
			Size: model.Size{Nodes: 1, PerNode: 500}, SizeParameter: "size", GPUClassID: c.ID, MinGPUMemoryGB: 24,
			TimeWeightMilli: 250, Pools: []string{p3.ID, p1.ID}, QueuingOrder: []string{"b", "c"},
			CreatedAt: b.At(50), UpdatedAt: b.At(6)}
		harness.Must(t, b.Store.UpdateProfile(b.Ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = harness.Norm(pr.CreatedAt), harness.Norm(upd.UpdatedAt)
		got, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "after UpdateProfile", got, &want)
		// p2 is no longer linked, so it can go; p1 and p3 cannot.
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p2.ID))
		harness.WantErr(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p3.ID), store.ErrConflict)

		upd.Pools, upd.QueuingOrder, upd.GPUClassID = nil, nil, ""
		harness.Must(t, b.Store.UpdateProfile(b.Ctx, upd))
		got, err = b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "Pools after unlinking all", got.Pools, []string{})
		harness.CheckEqual(t, "GPUClassID after clearing", got.GPUClassID, "")
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p3.ID))
	})
}

// profileRefusals checks the writes and reads refused: missing or taken
// pools, classes and names, another tenant's, each writing nothing.
func profileRefusals(t *testing.T, setup harness.Setup) {
	t.Run("UpdateProfile returns ErrNotFound for a missing pool and leaves the profile as it was", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
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

	t.Run("UpdateProfile returns ErrNotFound for a missing profile and another tenant's profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		harness.WantErr(t, b.Store.UpdateProfile(b.Ctx, &model.Profile{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "x"}), store.ErrNotFound)
		theirs := b.Profile(t, func(p *model.Profile) { p.TenantID = b.Other.ID })
		harness.WantErr(t, b.Store.UpdateProfile(b.Ctx, &model.Profile{ID: theirs.ID, TenantID: b.Tenant.ID, Name: "x"}), store.ErrNotFound)
	})

	t.Run("CreateProfile returns ErrConflict for a taken name and for a pool listed twice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pr := b.Profile(t)
		harness.WantErr(t, b.Store.CreateProfile(b.Ctx, &model.Profile{TenantID: b.Tenant.ID, Name: pr.Name}), store.ErrConflict)
		p := b.Pool(t)
		dup := &model.Profile{TenantID: b.Tenant.ID, Name: "dup", Pools: []string{p.ID, p.ID}}
		harness.WantErr(t, b.Store.CreateProfile(b.Ctx, dup), store.ErrConflict)
		_, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, model.NewID())
		harness.WantErr(t, err, store.ErrNotFound)
		list, err := b.Store.ListProfiles(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "profiles after failed creates", len(list), 1)
	})

	t.Run("CreateProfile returns ErrNotFound for a missing pool or class, or another tenant's, and writes nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
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

	t.Run("GetProfile returns ErrNotFound for another tenant's profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.Profile(t, func(p *model.Profile) { p.TenantID = b.Other.ID })
		_, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, theirs.ID)
		harness.WantErr(t, err, store.ErrNotFound)
	})
}

// profileDeletesAndLists checks DeleteProfile, which a compute resource in
// use holds back, and ListProfiles.
func profileDeletesAndLists(t *testing.T, setup harness.Setup) {
	t.Run("DeleteProfile deletes the profile and its pool links", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.Pool(t)
		pr := b.Profile(t, func(x *model.Profile) { x.Pools = []string{p.ID} })
		theirs := b.Profile(t, func(x *model.Profile) { x.TenantID = b.Other.ID })
		harness.WantErr(t, b.Store.DeleteProfile(b.Ctx, b.Tenant.ID, theirs.ID), store.ErrNotFound)
		harness.Must(t, b.Store.DeleteProfile(b.Ctx, b.Tenant.ID, pr.ID))
		_, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, pr.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		harness.WantErr(t, b.Store.DeleteProfile(b.Ctx, b.Tenant.ID, pr.ID), store.ErrNotFound)
		harness.Must(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p.ID))
	})

	t.Run("DeleteProfile returns ErrConflict while a compute resource uses the profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.Queue(t)
		harness.WantErr(t, b.Store.DeleteProfile(b.Ctx, b.Tenant.ID, q.Profile.ID), store.ErrConflict)
		_, err := b.Store.GetProfile(b.Ctx, b.Tenant.ID, q.Profile.ID)
		harness.Must(t, err)
	})

	t.Run("ListProfiles lists a tenant's profiles by name, each with its own pools in order", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
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
