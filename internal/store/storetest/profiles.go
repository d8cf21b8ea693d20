package storetest

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func exerciseProfiles(t *testing.T, setup setupFunc) {
	t.Run("CreateProfile then GetProfile returns every field with pools in order", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		p1, p2, p3 := b.pool(t), b.pool(t), b.pool(t)
		in := &model.Profile{ID: model.NewID(), TenantID: b.tenant.ID, Name: "8xH100", Description: "a node",
			Size: model.Size{Nodes: 2, PerNode: model.GPUs(8)}, SizeParameter: "gpus", GPUClassID: c.ID,
			MinGPUMemoryGB: 80, TimeWeightMilli: 1500, Pools: []string{p3.ID, p1.ID, p2.ID},
			QueuingOrder: []string{"pol-b", "pol-a"}, CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		must(t, b.store.CreateProfile(b.ctx, in))
		want := *in
		want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)
		got, err := b.store.GetProfile(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetProfile", got, &want)
	})

	t.Run("CreateProfile stores a fractional size and reads nil and empty lists back as empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pr1 := b.profile(t, func(p *model.Profile) { p.Size = model.Size{Nodes: 1, PerNode: 125}; p.TimeWeightMilli = 0 })
		pr2 := b.profile(t, func(p *model.Profile) { p.Pools = []string{}; p.QueuingOrder = []string{} })
		got, err := b.store.GetProfile(b.ctx, b.tenant.ID, pr1.ID)
		must(t, err)
		checkEqual(t, "Size", got.Size, model.Size{Nodes: 1, PerNode: 125})
		checkEqual(t, "TimeWeightMilli", got.TimeWeightMilli, int64(0))
		for _, id := range []string{pr1.ID, pr2.ID} {
			got, err := b.store.GetProfile(b.ctx, b.tenant.ID, id)
			must(t, err)
			if got.Pools == nil || len(got.Pools) != 0 || got.QueuingOrder == nil || len(got.QueuingOrder) != 0 {
				t.Fatalf("Pools = %#v, QueuingOrder = %#v, want empty slices", got.Pools, got.QueuingOrder)
			}
			checkEqual(t, "GPUClassID", got.GPUClassID, "")
		}
	})

	t.Run("UpdateProfile writes every mutable field and replaces the pool links wholesale", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		p1, p2, p3 := b.pool(t), b.pool(t), b.pool(t)
		pr := b.profile(t, func(p *model.Profile) { p.Pools = []string{p1.ID, p2.ID}; p.QueuingOrder = []string{"a"} })
		upd := &model.Profile{ID: pr.ID, TenantID: pr.TenantID, Name: "renamed", Description: "d",
			Size: model.Size{Nodes: 1, PerNode: 500}, SizeParameter: "size", GPUClassID: c.ID, MinGPUMemoryGB: 24,
			TimeWeightMilli: 250, Pools: []string{p3.ID, p1.ID}, QueuingOrder: []string{"b", "c"},
			CreatedAt: b.at(50), UpdatedAt: b.at(6)}
		must(t, b.store.UpdateProfile(b.ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = norm(pr.CreatedAt), norm(upd.UpdatedAt)
		got, err := b.store.GetProfile(b.ctx, b.tenant.ID, pr.ID)
		must(t, err)
		checkEqual(t, "after UpdateProfile", got, &want)
		// p2 is no longer linked, so it can go; p1 and p3 cannot.
		must(t, b.store.DeletePool(b.ctx, b.tenant.ID, p2.ID))
		wantErr(t, b.store.DeletePool(b.ctx, b.tenant.ID, p3.ID), store.ErrConflict)

		upd.Pools, upd.QueuingOrder, upd.GPUClassID = nil, nil, ""
		must(t, b.store.UpdateProfile(b.ctx, upd))
		got, err = b.store.GetProfile(b.ctx, b.tenant.ID, pr.ID)
		must(t, err)
		checkEqual(t, "Pools after unlinking all", got.Pools, []string{})
		checkEqual(t, "GPUClassID after clearing", got.GPUClassID, "")
		must(t, b.store.DeletePool(b.ctx, b.tenant.ID, p3.ID))
	})

	t.Run("UpdateProfile returns ErrNotFound for a missing pool and leaves the profile as it was", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1 := b.pool(t)
		pr := b.profile(t, func(p *model.Profile) { p.Pools = []string{p1.ID} })
		before, err := b.store.GetProfile(b.ctx, b.tenant.ID, pr.ID)
		must(t, err)
		upd := *pr
		upd.Name = "renamed"
		upd.Pools = []string{p1.ID, model.NewID()}
		wantErr(t, b.store.UpdateProfile(b.ctx, &upd), store.ErrNotFound)
		after, err := b.store.GetProfile(b.ctx, b.tenant.ID, pr.ID)
		must(t, err)
		checkEqual(t, "profile after a failed update", after, before)
	})

	t.Run("UpdateProfile returns ErrNotFound for a missing profile and another tenant's profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.UpdateProfile(b.ctx, &model.Profile{ID: model.NewID(), TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		theirs := b.profile(t, func(p *model.Profile) { p.TenantID = b.other.ID })
		wantErr(t, b.store.UpdateProfile(b.ctx, &model.Profile{ID: theirs.ID, TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
	})

	t.Run("CreateProfile returns ErrConflict for a taken name and for a pool listed twice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pr := b.profile(t)
		wantErr(t, b.store.CreateProfile(b.ctx, &model.Profile{TenantID: b.tenant.ID, Name: pr.Name}), store.ErrConflict)
		p := b.pool(t)
		dup := &model.Profile{TenantID: b.tenant.ID, Name: "dup", Pools: []string{p.ID, p.ID}}
		wantErr(t, b.store.CreateProfile(b.ctx, dup), store.ErrConflict)
		_, err := b.store.GetProfile(b.ctx, b.tenant.ID, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		list, err := b.store.ListProfiles(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "profiles after failed creates", len(list), 1)
	})

	t.Run("CreateProfile returns ErrNotFound for a missing pool or class, or another tenant's, and writes nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.pool(t)
		theirPool := b.pool(t, func(x *model.Pool) { x.TenantID = b.other.ID })
		theirClass := b.gpuClass(t, func(x *model.GPUClass) { x.TenantID = b.other.ID })
		for _, pr := range []*model.Profile{
			{TenantID: b.tenant.ID, Name: "a", Pools: []string{p.ID, model.NewID()}},
			{TenantID: b.tenant.ID, Name: "b", Pools: []string{theirPool.ID}},
			{TenantID: b.tenant.ID, Name: "c", GPUClassID: model.NewID()},
			{TenantID: b.tenant.ID, Name: "d", GPUClassID: theirClass.ID},
		} {
			wantErr(t, b.store.CreateProfile(b.ctx, pr), store.ErrNotFound)
			_, err := b.store.GetProfile(b.ctx, b.tenant.ID, pr.ID)
			wantErr(t, err, store.ErrNotFound)
		}
		list, err := b.store.ListProfiles(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "profiles after failed creates", len(list), 0)
		// No link row was left behind to pin the pool.
		must(t, b.store.DeletePool(b.ctx, b.tenant.ID, p.ID))
	})

	t.Run("GetProfile returns ErrNotFound for another tenant's profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.profile(t, func(p *model.Profile) { p.TenantID = b.other.ID })
		_, err := b.store.GetProfile(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("DeleteProfile deletes the profile and its pool links", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.pool(t)
		pr := b.profile(t, func(x *model.Profile) { x.Pools = []string{p.ID} })
		theirs := b.profile(t, func(x *model.Profile) { x.TenantID = b.other.ID })
		wantErr(t, b.store.DeleteProfile(b.ctx, b.tenant.ID, theirs.ID), store.ErrNotFound)
		must(t, b.store.DeleteProfile(b.ctx, b.tenant.ID, pr.ID))
		_, err := b.store.GetProfile(b.ctx, b.tenant.ID, pr.ID)
		wantErr(t, err, store.ErrNotFound)
		wantErr(t, b.store.DeleteProfile(b.ctx, b.tenant.ID, pr.ID), store.ErrNotFound)
		must(t, b.store.DeletePool(b.ctx, b.tenant.ID, p.ID))
	})

	t.Run("DeleteProfile returns ErrConflict while a compute resource uses the profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		wantErr(t, b.store.DeleteProfile(b.ctx, b.tenant.ID, q.profile.ID), store.ErrConflict)
		_, err := b.store.GetProfile(b.ctx, b.tenant.ID, q.profile.ID)
		must(t, err)
	})

	t.Run("ListProfiles lists a tenant's profiles by name, each with its own pools in order", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1, p2, p3 := b.pool(t), b.pool(t), b.pool(t)
		b.profile(t, func(x *model.Profile) { x.Name = "m"; x.Pools = []string{p2.ID, p1.ID, p3.ID} })
		b.profile(t, func(x *model.Profile) { x.Name = "B" })
		b.profile(t, func(x *model.Profile) { x.Name = "a"; x.Pools = []string{p3.ID} })
		b.profile(t, func(x *model.Profile) { x.Name = "z"; x.Pools = []string{p1.ID, p2.ID} })
		b.profile(t, func(x *model.Profile) { x.TenantID = b.other.ID; x.Name = "c" })
		got, err := b.store.ListProfiles(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "names", names(got, func(p *model.Profile) string { return p.Name }), []string{"B", "a", "m", "z"})
		checkEqual(t, "pools", [][]string{got[0].Pools, got[1].Pools, got[2].Pools, got[3].Pools},
			[][]string{{}, {p3.ID}, {p2.ID, p1.ID, p3.ID}, {p1.ID, p2.ID}})
		for _, p := range got {
			checkEqual(t, "CreatedAt of "+p.Name, p.CreatedAt, norm(b.now))
		}
	})
}
