package storetest

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func exerciseGPUClasses(t *testing.T, setup setupFunc) {
	t.Run("CreateGPUClass then GetGPUClass returns every field", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := &model.GPUClass{ID: model.NewID(), TenantID: b.tenant.ID, Name: "h100", Description: "H100 SXM",
			MemoryGB: 80, PriceMicros: 3_141_592, Currency: "USD", CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		must(t, b.store.CreateGPUClass(b.ctx, in))
		want := *in
		want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)
		got, err := b.store.GetGPUClass(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetGPUClass", got, &want)
	})

	t.Run("UpdateGPUClass writes every mutable field and keeps CreatedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		upd := &model.GPUClass{ID: c.ID, TenantID: c.TenantID, Name: "a100", Description: "A100", MemoryGB: 40,
			PriceMicros: 1_000_001, Currency: "CHF", CreatedAt: b.at(77), UpdatedAt: b.at(4)}
		must(t, b.store.UpdateGPUClass(b.ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = norm(c.CreatedAt), norm(upd.UpdatedAt)
		got, err := b.store.GetGPUClass(b.ctx, b.tenant.ID, c.ID)
		must(t, err)
		checkEqual(t, "after UpdateGPUClass", got, &want)
	})

	t.Run("UpdateGPUClass returns ErrNotFound for a missing class and another tenant's class", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.UpdateGPUClass(b.ctx, &model.GPUClass{ID: model.NewID(), TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		theirs := b.gpuClass(t, func(c *model.GPUClass) { c.TenantID = b.other.ID })
		wantErr(t, b.store.UpdateGPUClass(b.ctx, &model.GPUClass{ID: theirs.ID, TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
	})

	t.Run("CreateGPUClass returns ErrConflict for a name taken in the tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		wantErr(t, b.store.CreateGPUClass(b.ctx, &model.GPUClass{TenantID: b.tenant.ID, Name: c.Name}), store.ErrConflict)
		b.gpuClass(t, func(x *model.GPUClass) { x.TenantID = b.other.ID; x.Name = c.Name })
	})

	t.Run("GetGPUClass returns ErrNotFound for a missing class and another tenant's class", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.GetGPUClass(b.ctx, b.tenant.ID, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		theirs := b.gpuClass(t, func(c *model.GPUClass) { c.TenantID = b.other.ID })
		_, err = b.store.GetGPUClass(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("DeleteGPUClass deletes an unused class and returns ErrNotFound for a missing one", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		theirs := b.gpuClass(t, func(c *model.GPUClass) { c.TenantID = b.other.ID })
		wantErr(t, b.store.DeleteGPUClass(b.ctx, b.tenant.ID, theirs.ID), store.ErrNotFound)
		must(t, b.store.DeleteGPUClass(b.ctx, b.tenant.ID, c.ID))
		_, err := b.store.GetGPUClass(b.ctx, b.tenant.ID, c.ID)
		wantErr(t, err, store.ErrNotFound)
		wantErr(t, b.store.DeleteGPUClass(b.ctx, b.tenant.ID, c.ID), store.ErrNotFound)
	})

	t.Run("DeleteGPUClass returns ErrConflict while a pool uses the class", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		b.pool(t, func(p *model.Pool) { p.GPUClassID = c.ID })
		wantErr(t, b.store.DeleteGPUClass(b.ctx, b.tenant.ID, c.ID), store.ErrConflict)
		_, err := b.store.GetGPUClass(b.ctx, b.tenant.ID, c.ID)
		must(t, err)
	})

	t.Run("DeleteGPUClass returns ErrConflict while a profile uses the class", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		b.profile(t, func(p *model.Profile) { p.GPUClassID = c.ID })
		wantErr(t, b.store.DeleteGPUClass(b.ctx, b.tenant.ID, c.ID), store.ErrConflict)
	})

	t.Run("ListGPUClasses lists a tenant's classes by name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, n := range []string{"l4", "H100", "a100"} {
			b.gpuClass(t, func(c *model.GPUClass) { c.Name = n })
		}
		b.gpuClass(t, func(c *model.GPUClass) { c.TenantID = b.other.ID; c.Name = "b200" })
		got, err := b.store.ListGPUClasses(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "names", names(got, func(c *model.GPUClass) string { return c.Name }), []string{"H100", "a100", "l4"})
	})
}

func exercisePools(t *testing.T, setup setupFunc) {
	t.Run("CreatePool then GetPool returns every field", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := b.gpuClass(t)
		in := &model.Pool{ID: model.NewID(), TenantID: b.tenant.ID, Name: "farm", Description: "on-prem farm",
			Kind: model.PoolSlurm, CapacityGPUs: 64, GPUClassID: c.ID, GPUMemoryGB: 80, Region: "eu-west",
			Labels:       map[string]string{"rack": "r1", "zone": "a", "quote\"d": "ü"},
			ProfileOrder: []string{"p2", "p1", "p3"}, CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		must(t, b.store.CreatePool(b.ctx, in))
		want := *in
		want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)
		got, err := b.store.GetPool(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetPool", got, &want)
	})

	t.Run("CreatePool reads nil and empty labels and profile order back as empty, non-nil values", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1 := b.pool(t)
		p2 := b.pool(t, func(p *model.Pool) { p.Labels = map[string]string{}; p.ProfileOrder = []string{} })
		for _, p := range []*model.Pool{p1, p2} {
			got, err := b.store.GetPool(b.ctx, b.tenant.ID, p.ID)
			must(t, err)
			if got.Labels == nil || len(got.Labels) != 0 {
				t.Fatalf("Labels = %#v, want an empty map", got.Labels)
			}
			if got.ProfileOrder == nil || len(got.ProfileOrder) != 0 {
				t.Fatalf("ProfileOrder = %#v, want an empty slice", got.ProfileOrder)
			}
			checkEqual(t, "GPUClassID", got.GPUClassID, "")
		}
	})

	t.Run("UpdatePool writes every mutable field, and can clear the class and labels", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c1, c2 := b.gpuClass(t), b.gpuClass(t)
		p := b.pool(t, func(p *model.Pool) {
			p.GPUClassID = c1.ID
			p.Labels = map[string]string{"a": "b"}
			p.ProfileOrder = []string{"x"}
		})
		upd := &model.Pool{ID: p.ID, TenantID: p.TenantID, Name: "renamed", Description: "d2", Kind: model.PoolCloud,
			CapacityGPUs: 16, GPUClassID: c2.ID, GPUMemoryGB: 141, Region: "us-east",
			Labels: map[string]string{"k": "v"}, ProfileOrder: []string{"y", "z"}, CreatedAt: b.at(99), UpdatedAt: b.at(3)}
		must(t, b.store.UpdatePool(b.ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = norm(p.CreatedAt), norm(upd.UpdatedAt)
		got, err := b.store.GetPool(b.ctx, b.tenant.ID, p.ID)
		must(t, err)
		checkEqual(t, "after UpdatePool", got, &want)

		upd.GPUClassID, upd.Labels, upd.ProfileOrder = "", nil, nil
		must(t, b.store.UpdatePool(b.ctx, upd))
		got, err = b.store.GetPool(b.ctx, b.tenant.ID, p.ID)
		must(t, err)
		checkEqual(t, "GPUClassID", got.GPUClassID, "")
		checkEqual(t, "Labels", got.Labels, map[string]string{})
		checkEqual(t, "ProfileOrder", got.ProfileOrder, []string{})
		// The class is free to go now.
		must(t, b.store.DeleteGPUClass(b.ctx, b.tenant.ID, c2.ID))
	})

	t.Run("UpdatePool returns ErrNotFound for a missing pool, another tenant's pool, or a missing class", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.UpdatePool(b.ctx, &model.Pool{ID: model.NewID(), TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		theirs := b.pool(t, func(p *model.Pool) { p.TenantID = b.other.ID })
		wantErr(t, b.store.UpdatePool(b.ctx, &model.Pool{ID: theirs.ID, TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		p := b.pool(t)
		p.GPUClassID = model.NewID()
		wantErr(t, b.store.UpdatePool(b.ctx, p), store.ErrNotFound)
	})

	t.Run("CreatePool and UpdatePool return ErrConflict for a name taken in the tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1 := b.pool(t)
		wantErr(t, b.store.CreatePool(b.ctx, &model.Pool{TenantID: b.tenant.ID, Name: p1.Name}), store.ErrConflict)
		p2 := b.pool(t)
		p2.Name = p1.Name
		wantErr(t, b.store.UpdatePool(b.ctx, p2), store.ErrConflict)
		b.pool(t, func(p *model.Pool) { p.TenantID = b.other.ID; p.Name = p1.Name })
	})

	t.Run("CreatePool returns ErrNotFound for a missing GPU class or another tenant's class", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.gpuClass(t, func(c *model.GPUClass) { c.TenantID = b.other.ID })
		wantErr(t, b.store.CreatePool(b.ctx, &model.Pool{TenantID: b.tenant.ID, Name: "a", GPUClassID: model.NewID()}), store.ErrNotFound)
		wantErr(t, b.store.CreatePool(b.ctx, &model.Pool{TenantID: b.tenant.ID, Name: "b", GPUClassID: theirs.ID}), store.ErrNotFound)
	})

	t.Run("GetPool returns ErrNotFound for a missing pool and another tenant's pool", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.GetPool(b.ctx, b.tenant.ID, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		theirs := b.pool(t, func(p *model.Pool) { p.TenantID = b.other.ID })
		_, err = b.store.GetPool(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("DeletePool deletes an unlinked pool and returns ErrNotFound for a missing one", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.pool(t)
		theirs := b.pool(t, func(p *model.Pool) { p.TenantID = b.other.ID })
		wantErr(t, b.store.DeletePool(b.ctx, b.tenant.ID, theirs.ID), store.ErrNotFound)
		must(t, b.store.DeletePool(b.ctx, b.tenant.ID, p.ID))
		_, err := b.store.GetPool(b.ctx, b.tenant.ID, p.ID)
		wantErr(t, err, store.ErrNotFound)
		wantErr(t, b.store.DeletePool(b.ctx, b.tenant.ID, p.ID), store.ErrNotFound)
	})

	t.Run("DeletePool returns ErrConflict while a profile links the pool", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.pool(t)
		b.profile(t, func(pr *model.Profile) { pr.Pools = []string{p.ID} })
		wantErr(t, b.store.DeletePool(b.ctx, b.tenant.ID, p.ID), store.ErrConflict)
		_, err := b.store.GetPool(b.ctx, b.tenant.ID, p.ID)
		must(t, err)
	})

	t.Run("ListPools lists a tenant's pools by name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, n := range []string{"z", "A", "m"} {
			b.pool(t, func(p *model.Pool) { p.Name = n; p.Labels = map[string]string{"name": n} })
		}
		b.pool(t, func(p *model.Pool) { p.TenantID = b.other.ID; p.Name = "b" })
		got, err := b.store.ListPools(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "names", names(got, func(p *model.Pool) string { return p.Name }), []string{"A", "m", "z"})
		checkEqual(t, "labels of the first", got[0].Labels, map[string]string{"name": "A"})
	})
}

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

func exercisePolicies(t *testing.T, setup setupFunc) {
	t.Run("CreatePolicy then GetPolicy returns every field, with and without a budget", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		withBudget := &model.ResourcePolicy{ID: model.NewID(), TenantID: b.tenant.ID, GroupID: b.group(t).ID,
			ReservationGPUs: 8, LimitGPUs: 16, Budget: &model.TimeBudget{MilliHours: 123_456, Period: model.PeriodWeek},
			LowWatermark: 90 * time.Minute, AlertThresholdPercent: 75, CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		without := &model.ResourcePolicy{ID: model.NewID(), TenantID: b.tenant.ID, GroupID: b.group(t).ID,
			LowWatermark: 1500 * time.Millisecond, CreatedAt: b.at(3), UpdatedAt: b.at(4)}
		for _, in := range []*model.ResourcePolicy{withBudget, without} {
			must(t, b.store.CreatePolicy(b.ctx, in))
			want := *in
			want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)
			got, err := b.store.GetPolicy(b.ctx, b.tenant.ID, in.ID)
			must(t, err)
			checkEqual(t, "GetPolicy", got, &want)
		}
	})

	t.Run("UpdatePolicy writes every mutable field, adding and removing the budget", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g2 := b.group(t)
		p := b.policy(t, b.group(t).ID)
		upd := &model.ResourcePolicy{ID: p.ID, TenantID: p.TenantID, GroupID: g2.ID, ReservationGPUs: 1, LimitGPUs: 3,
			Budget: &model.TimeBudget{MilliHours: 5000, Period: model.PeriodMonth}, LowWatermark: time.Hour,
			AlertThresholdPercent: 90, CreatedAt: b.at(40), UpdatedAt: b.at(5)}
		must(t, b.store.UpdatePolicy(b.ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = norm(p.CreatedAt), norm(upd.UpdatedAt)
		got, err := b.store.GetPolicy(b.ctx, b.tenant.ID, p.ID)
		must(t, err)
		checkEqual(t, "after UpdatePolicy", got, &want)

		upd.Budget = nil
		must(t, b.store.UpdatePolicy(b.ctx, upd))
		got, err = b.store.GetPolicy(b.ctx, b.tenant.ID, p.ID)
		must(t, err)
		if got.Budget != nil {
			t.Fatalf("Budget = %+v after removing it", *got.Budget)
		}
	})

	t.Run("UpdatePolicy returns ErrNotFound for a missing policy, another tenant's, or a missing group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		wantErr(t, b.store.UpdatePolicy(b.ctx, &model.ResourcePolicy{ID: model.NewID(), TenantID: b.tenant.ID, GroupID: g.ID}), store.ErrNotFound)
		theirGroup := b.group(t, func(x *model.Group) { x.TenantID = b.other.ID })
		theirs := b.policy(t, theirGroup.ID, func(x *model.ResourcePolicy) { x.TenantID = b.other.ID })
		wantErr(t, b.store.UpdatePolicy(b.ctx, &model.ResourcePolicy{ID: theirs.ID, TenantID: b.tenant.ID, GroupID: g.ID}), store.ErrNotFound)
		p := b.policy(t, g.ID)
		p.GroupID = model.NewID()
		wantErr(t, b.store.UpdatePolicy(b.ctx, p), store.ErrNotFound)
	})

	t.Run("CreatePolicy and UpdatePolicy return ErrConflict for a second policy of one group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		b.policy(t, g.ID)
		wantErr(t, b.store.CreatePolicy(b.ctx, &model.ResourcePolicy{TenantID: b.tenant.ID, GroupID: g.ID}), store.ErrConflict)
		p2 := b.policy(t, b.group(t).ID)
		p2.GroupID = g.ID
		wantErr(t, b.store.UpdatePolicy(b.ctx, p2), store.ErrConflict)
	})

	t.Run("CreatePolicy returns ErrNotFound for a missing group or another tenant's group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.group(t, func(g *model.Group) { g.TenantID = b.other.ID })
		wantErr(t, b.store.CreatePolicy(b.ctx, &model.ResourcePolicy{TenantID: b.tenant.ID, GroupID: model.NewID()}), store.ErrNotFound)
		wantErr(t, b.store.CreatePolicy(b.ctx, &model.ResourcePolicy{TenantID: b.tenant.ID, GroupID: theirs.ID}), store.ErrNotFound)
	})

	t.Run("GetPolicy returns ErrNotFound for a missing policy and another tenant's policy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.GetPolicy(b.ctx, b.tenant.ID, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		theirGroup := b.group(t, func(x *model.Group) { x.TenantID = b.other.ID })
		theirs := b.policy(t, theirGroup.ID, func(x *model.ResourcePolicy) { x.TenantID = b.other.ID })
		_, err = b.store.GetPolicy(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("DeletePolicy deletes an unused policy, freeing its group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		p := b.policy(t, g.ID)
		must(t, b.store.DeletePolicy(b.ctx, b.tenant.ID, p.ID))
		_, err := b.store.GetPolicy(b.ctx, b.tenant.ID, p.ID)
		wantErr(t, err, store.ErrNotFound)
		wantErr(t, b.store.DeletePolicy(b.ctx, b.tenant.ID, p.ID), store.ErrNotFound)
		must(t, b.store.DeleteGroup(b.ctx, b.tenant.ID, g.ID))
	})

	t.Run("DeletePolicy returns ErrConflict while a compute resource uses the policy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		wantErr(t, b.store.DeletePolicy(b.ctx, b.tenant.ID, q.policy.ID), store.ErrConflict)
		_, err := b.store.GetPolicy(b.ctx, b.tenant.ID, q.policy.ID)
		must(t, err)
	})

	t.Run("ListPolicies lists a tenant's policies by id", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var want []string
		for range 4 {
			want = append(want, b.policy(t, b.group(t).ID).ID)
		}
		theirGroup := b.group(t, func(x *model.Group) { x.TenantID = b.other.ID })
		b.policy(t, theirGroup.ID, func(x *model.ResourcePolicy) { x.TenantID = b.other.ID })
		got, err := b.store.ListPolicies(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "ids", names(got, func(p *model.ResourcePolicy) string { return p.ID }), want)
	})
}

func exerciseComputeResources(t *testing.T, setup setupFunc) {
	t.Run("CreateComputeResource then GetComputeResource returns every field", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pol := b.policy(t, b.group(t).ID)
		prof := b.profile(t)
		in := &model.ComputeResource{ID: model.NewID(), TenantID: b.tenant.ID, Name: "1 GPU", Description: "one H100",
			PolicyID: pol.ID, ProfileID: prof.ID, Image: "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
			Env:    map[string]string{"HF_HOME": "/data/hf-cache", "NCCL_DEBUG": "WARN", "QUOTE": "a \"b\" ü"},
			Mounts: []string{"/data/hf-cache:/data/hf-cache", "/datasets:/datasets:ro"}, CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		must(t, b.store.CreateComputeResource(b.ctx, in))
		want := *in
		want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)
		got, err := b.store.GetComputeResource(b.ctx, b.tenant.ID, in.ID)
		must(t, err)
		checkEqual(t, "GetComputeResource", got, &want)
	})

	t.Run("UpdateComputeResource writes every mutable field and keeps CreatedAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		pol2 := b.policy(t, b.group(t).ID)
		prof2 := b.profile(t)
		upd := &model.ComputeResource{ID: q.cr.ID, TenantID: b.tenant.ID, Name: "8 GPUs", Description: "d",
			PolicyID: pol2.ID, ProfileID: prof2.ID, Image: "python:3.12", Env: map[string]string{"A": "1"},
			Mounts: []string{"/scratch:/scratch:rw"}, CreatedAt: b.at(20), UpdatedAt: b.at(3)}
		must(t, b.store.UpdateComputeResource(b.ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = norm(q.cr.CreatedAt), norm(upd.UpdatedAt)
		got, err := b.store.GetComputeResource(b.ctx, b.tenant.ID, q.cr.ID)
		must(t, err)
		checkEqual(t, "after UpdateComputeResource", got, &want)
	})

	t.Run("compute resources read nil run settings back as empty, non-nil values, and an update can clear them", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		got, err := b.store.GetComputeResource(b.ctx, b.tenant.ID, q.cr.ID)
		must(t, err)
		checkEqual(t, "Image", got.Image, "")
		checkEqual(t, "Env", got.Env, map[string]string{})
		checkEqual(t, "Mounts", got.Mounts, []string{})

		set := *q.cr
		set.Image, set.Env, set.Mounts = "python:3.12", map[string]string{"K": "v"}, []string{"/a:/a"}
		must(t, b.store.UpdateComputeResource(b.ctx, &set))
		set.Image, set.Env, set.Mounts = "", nil, nil
		must(t, b.store.UpdateComputeResource(b.ctx, &set))
		got, err = b.store.GetComputeResource(b.ctx, b.tenant.ID, q.cr.ID)
		must(t, err)
		checkEqual(t, "Image after clearing", got.Image, "")
		checkEqual(t, "Env after clearing", got.Env, map[string]string{})
		checkEqual(t, "Mounts after clearing", got.Mounts, []string{})
		list, err := b.store.ListComputeResources(b.ctx, b.tenant.ID)
		must(t, err)
		if len(list) != 1 || list[0].Env == nil || list[0].Mounts == nil {
			t.Fatalf("ListComputeResources = %+v, want one with empty, non-nil settings", list)
		}
	})

	t.Run("UpdateComputeResource returns ErrNotFound for a missing resource, another tenant's, or a missing profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		missing := *q.cr
		missing.ID = model.NewID()
		wantErr(t, b.store.UpdateComputeResource(b.ctx, &missing), store.ErrNotFound)
		wrongTenant := *q.cr
		wrongTenant.TenantID = b.other.ID
		wantErr(t, b.store.UpdateComputeResource(b.ctx, &wrongTenant), store.ErrNotFound)
		badProfile := *q.cr
		badProfile.ProfileID = model.NewID()
		wantErr(t, b.store.UpdateComputeResource(b.ctx, &badProfile), store.ErrNotFound)
	})

	t.Run("CreateComputeResource returns ErrConflict for a second join of one policy and profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		wantErr(t, b.store.CreateComputeResource(b.ctx, &model.ComputeResource{TenantID: b.tenant.ID, Name: "other name",
			PolicyID: q.policy.ID, ProfileID: q.profile.ID}), store.ErrConflict)
	})

	t.Run("CreateComputeResource returns ErrConflict for a name taken in the policy, while other policies may use it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		prof2 := b.profile(t)
		wantErr(t, b.store.CreateComputeResource(b.ctx, &model.ComputeResource{TenantID: b.tenant.ID, Name: q.cr.Name,
			PolicyID: q.policy.ID, ProfileID: prof2.ID}), store.ErrConflict)
		pol2 := b.policy(t, b.group(t).ID)
		b.computeResource(t, pol2.ID, q.profile.ID, func(c *model.ComputeResource) { c.Name = q.cr.Name })
	})

	t.Run("CreateComputeResource returns ErrNotFound for a missing policy or profile, or another tenant's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pol := b.policy(t, b.group(t).ID)
		prof := b.profile(t)
		theirProfile := b.profile(t, func(x *model.Profile) { x.TenantID = b.other.ID })
		for _, c := range []*model.ComputeResource{
			{TenantID: b.tenant.ID, Name: "a", PolicyID: model.NewID(), ProfileID: prof.ID},
			{TenantID: b.tenant.ID, Name: "b", PolicyID: pol.ID, ProfileID: model.NewID()},
			{TenantID: b.tenant.ID, Name: "c", PolicyID: pol.ID, ProfileID: theirProfile.ID},
		} {
			wantErr(t, b.store.CreateComputeResource(b.ctx, c), store.ErrNotFound)
		}
	})

	t.Run("GetComputeResource returns ErrNotFound for a missing resource and another tenant's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		_, err := b.store.GetComputeResource(b.ctx, b.tenant.ID, model.NewID())
		wantErr(t, err, store.ErrNotFound)
		_, err = b.store.GetComputeResource(b.ctx, b.other.ID, q.cr.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("DeleteComputeResource deletes a resource and frees its policy and profile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		wantErr(t, b.store.DeleteComputeResource(b.ctx, b.other.ID, q.cr.ID), store.ErrNotFound)
		must(t, b.store.DeleteComputeResource(b.ctx, b.tenant.ID, q.cr.ID))
		wantErr(t, b.store.DeleteComputeResource(b.ctx, b.tenant.ID, q.cr.ID), store.ErrNotFound)
		must(t, b.store.DeletePolicy(b.ctx, b.tenant.ID, q.policy.ID))
		must(t, b.store.DeleteProfile(b.ctx, b.tenant.ID, q.profile.ID))
	})

	t.Run("DeleteComputeResource leaves the tasks that name it, for their history", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.queue(t)
		tk := b.task(t, q, b.user(t))
		must(t, b.store.DeleteComputeResource(b.ctx, b.tenant.ID, q.cr.ID))
		got, err := b.store.GetTask(b.ctx, b.tenant.ID, tk.ID)
		must(t, err)
		checkEqual(t, "task's compute resource id", got.ComputeResourceID, q.cr.ID)
	})

	t.Run("ListComputeResources lists a tenant's resources by name, then id", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		prof := b.profile(t)
		var sameName []string
		for range 3 {
			sameName = append(sameName, b.computeResource(t, b.policy(t, b.group(t).ID).ID, prof.ID,
				func(c *model.ComputeResource) { c.Name = "1 GPU" }).ID)
		}
		pol := b.policy(t, b.group(t).ID)
		first := b.computeResource(t, pol.ID, prof.ID, func(c *model.ComputeResource) { c.Name = "0.5 GPU" })
		got, err := b.store.ListComputeResources(b.ctx, b.tenant.ID)
		must(t, err)
		checkEqual(t, "ids", names(got, func(c *model.ComputeResource) string { return c.ID }),
			append([]string{first.ID}, sameName...))
		none, err := b.store.ListComputeResources(b.ctx, b.other.ID)
		must(t, err)
		checkEqual(t, "another tenant's list", len(none), 0)
	})
}
