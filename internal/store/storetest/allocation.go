package storetest

import (
	"testing"

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
