package estate

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// GPUClasses checks GPU classes: round trips, updates, uniqueness, deletion
// and what holds it back, listing.
func GPUClasses(t *testing.T, setup harness.Setup) {
	gpuClass.CheckRefusals(t, setup)
	setup.Run(t, "CreateGPUClass then GetGPUClass returns every field", func(t *testing.T, b *harness.Bundle) {
		gpuClass.CheckCreate(t, b, &model.GPUClass{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "h100", Description: "H100 SXM",
			MemoryGB: 80, PriceMicros: 3_141_592, Currency: "USD", CreatedAt: b.At(1), UpdatedAt: b.At(2)})
	})

	setup.Run(t, "UpdateGPUClass writes every mutable field and keeps CreatedAt", func(t *testing.T, b *harness.Bundle) {
		c := b.GPUClass(t)
		gpuClass.CheckUpdate(t, b, c, &model.GPUClass{ID: c.ID, TenantID: c.TenantID, Name: "a100", Description: "A100", MemoryGB: 40,
			PriceMicros: 1_000_001, Currency: "CHF", CreatedAt: b.At(77), UpdatedAt: b.At(4)})
	})

	setup.Run(t, "DeleteGPUClass returns ErrConflict while a pool uses the class", func(t *testing.T, b *harness.Bundle) {
		c := b.GPUClass(t)
		b.Pool(t, func(p *model.Pool) { p.GPUClassID = c.ID })
		harness.WantErr(t, b.Store.DeleteGPUClass(b.Ctx, b.Tenant.ID, c.ID), store.ErrConflict)
		_, err := b.Store.GetGPUClass(b.Ctx, b.Tenant.ID, c.ID)
		harness.Must(t, err)
	})

	setup.Run(t, "DeleteGPUClass returns ErrConflict while a profile uses the class", func(t *testing.T, b *harness.Bundle) {
		c := b.GPUClass(t)
		b.Profile(t, func(p *model.Profile) { p.GPUClassID = c.ID })
		harness.WantErr(t, b.Store.DeleteGPUClass(b.Ctx, b.Tenant.ID, c.ID), store.ErrConflict)
	})

	setup.Run(t, "ListGPUClasses lists a tenant's classes by name", func(t *testing.T, b *harness.Bundle) {
		for _, n := range []string{"l4", "H100", "a100"} {
			b.GPUClass(t, func(c *model.GPUClass) { c.Name = n })
		}
		b.GPUClass(t, func(c *model.GPUClass) { c.TenantID = b.Other.ID; c.Name = "b200" })
		got, err := b.Store.ListGPUClasses(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "names", harness.Names(got, func(c *model.GPUClass) string { return c.Name }), []string{"H100", "a100", "l4"})
	})
}

// Pools checks pools: round trips, updates, their GPU class, uniqueness,
// deletion and what holds it back, listing.
func Pools(t *testing.T, setup harness.Setup) {
	pool.CheckRefusals(t, setup)
	poolWrites(t, setup)
	poolRefusalsDeletesAndLists(t, setup)
}

// poolWrites checks that a pool is stored and updated whole, its labels
// and profile order read back as empty rather than nil.
func poolWrites(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreatePool then GetPool returns every field", func(t *testing.T, b *harness.Bundle) {
		c := b.GPUClass(t)
		in := &model.Pool{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "farm", Description: "on-prem farm",
			Kind: model.PoolSlurm, CapacityGPUs: 64, GPUClassID: c.ID, GPUMemoryGB: 80, Region: "eu-west",
			Labels:       map[string]string{"rack": "r1", "zone": "a", "quote\"d": "ü"},
			ProfileOrder: []string{"p2", "p1", "p3"}, AppNetworks: []string{"10.244.0.0/16", "fd00:1::/64"}, Local: true,
			CreatedAt: b.At(1), UpdatedAt: b.At(2)}
		pool.CheckCreate(t, b, in)
	})

	setup.Run(t, "CreatePool reads nil and empty labels and profile order back as empty, non-nil values", func(t *testing.T, b *harness.Bundle) {
		p1 := b.Pool(t)
		p2 := b.Pool(t, func(p *model.Pool) { p.Labels = map[string]string{}; p.ProfileOrder = []string{} })
		for _, p := range []*model.Pool{p1, p2} {
			got, err := b.Store.GetPool(b.Ctx, b.Tenant.ID, p.ID)
			harness.Must(t, err)
			if got.Labels == nil || len(got.Labels) != 0 {
				t.Fatalf("Labels = %#v, want an empty map", got.Labels)
			}
			if got.ProfileOrder == nil || len(got.ProfileOrder) != 0 {
				t.Fatalf("ProfileOrder = %#v, want an empty slice", got.ProfileOrder)
			}
			harness.CheckEqual(t, "GPUClassID", got.GPUClassID, "")
		}
	})

	setup.Run(t, "UpdatePool writes every mutable field, and can clear the class and labels", func(t *testing.T, b *harness.Bundle) {
		c1, c2 := b.GPUClass(t), b.GPUClass(t)
		p := b.Pool(t, func(p *model.Pool) {
			p.GPUClassID = c1.ID
			p.Labels = map[string]string{"a": "b"}
			p.ProfileOrder = []string{"x"}
		})
		upd := &model.Pool{ID: p.ID, TenantID: p.TenantID, Name: "renamed", Description: "d2", Kind: model.PoolCloud,
			CapacityGPUs: 16, GPUClassID: c2.ID, GPUMemoryGB: 141, Region: "us-east",
			Labels: map[string]string{"k": "v"}, ProfileOrder: []string{"y", "z"}, AppNetworks: []string{"10.1.0.0/16"}, Local: true,
			CreatedAt: b.At(99), UpdatedAt: b.At(3)}
		pool.CheckUpdate(t, b, p, upd)

		upd.GPUClassID, upd.Labels, upd.ProfileOrder = "", nil, nil
		harness.Must(t, b.Store.UpdatePool(b.Ctx, upd))
		got, err := b.Store.GetPool(b.Ctx, b.Tenant.ID, p.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "GPUClassID", got.GPUClassID, "")
		harness.CheckEqual(t, "Labels", got.Labels, map[string]string{})
		harness.CheckEqual(t, "ProfileOrder", got.ProfileOrder, []string{})
		// The class is free to go now.
		harness.Must(t, b.Store.DeleteGPUClass(b.Ctx, b.Tenant.ID, c2.ID))
	})
}

// poolRefusalsDeletesAndLists checks the writes refused for a missing
// class, DeletePool, which a linked profile holds back, and ListPools.
func poolRefusalsDeletesAndLists(t *testing.T, setup harness.Setup) {
	setup.Run(t, "UpdatePool returns ErrNotFound for a missing class", func(t *testing.T, b *harness.Bundle) {
		p := b.Pool(t)
		p.GPUClassID = model.NewID()
		harness.WantErr(t, b.Store.UpdatePool(b.Ctx, p), store.ErrNotFound)
	})

	setup.Run(t, "CreatePool returns ErrNotFound for a missing GPU class or another tenant's class", func(t *testing.T, b *harness.Bundle) {
		theirs := b.GPUClass(t, func(c *model.GPUClass) { c.TenantID = b.Other.ID })
		harness.WantErr(t, b.Store.CreatePool(b.Ctx, &model.Pool{TenantID: b.Tenant.ID, Name: "a", GPUClassID: model.NewID()}), store.ErrNotFound)
		harness.WantErr(t, b.Store.CreatePool(b.Ctx, &model.Pool{TenantID: b.Tenant.ID, Name: "b", GPUClassID: theirs.ID}), store.ErrNotFound)
	})

	setup.Run(t, "DeletePool returns ErrConflict while a profile links the pool", func(t *testing.T, b *harness.Bundle) {
		p := b.Pool(t)
		b.Profile(t, func(pr *model.Profile) { pr.Pools = []string{p.ID} })
		harness.WantErr(t, b.Store.DeletePool(b.Ctx, b.Tenant.ID, p.ID), store.ErrConflict)
		_, err := b.Store.GetPool(b.Ctx, b.Tenant.ID, p.ID)
		harness.Must(t, err)
	})

	setup.Run(t, "ListPools lists a tenant's pools by name", func(t *testing.T, b *harness.Bundle) {
		for _, n := range []string{"z", "A", "m"} {
			b.Pool(t, func(p *model.Pool) { p.Name = n; p.Labels = map[string]string{"name": n} })
		}
		b.Pool(t, func(p *model.Pool) { p.TenantID = b.Other.ID; p.Name = "b" })
		got, err := b.Store.ListPools(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "names", harness.Names(got, func(p *model.Pool) string { return p.Name }), []string{"A", "m", "z"})
		harness.CheckEqual(t, "labels of the first", got[0].Labels, map[string]string{"name": "A"})
	})
}

// gpuClass and pool describe GPU classes and pools for the checks every
// kind a tenant owns passes.
var (
	gpuClass = harness.Owned[model.GPUClass]{Kind: "GPUClass", Noun: "class", Make: (*harness.Bundle).GPUClass,
		Fields: func(c *model.GPUClass) harness.Fields {
			return harness.Fields{ID: &c.ID, TenantID: &c.TenantID, Name: &c.Name, CreatedAt: &c.CreatedAt, UpdatedAt: &c.UpdatedAt}
		},
		Create: store.Store.CreateGPUClass, Get: store.Store.GetGPUClass, Update: store.Store.UpdateGPUClass,
		Delete: store.Store.DeleteGPUClass}
	pool = harness.Owned[model.Pool]{Kind: "Pool", Noun: "pool", Make: (*harness.Bundle).Pool,
		Fields: func(p *model.Pool) harness.Fields {
			return harness.Fields{ID: &p.ID, TenantID: &p.TenantID, Name: &p.Name, CreatedAt: &p.CreatedAt, UpdatedAt: &p.UpdatedAt}
		},
		Create: store.Store.CreatePool, Get: store.Store.GetPool, Update: store.Store.UpdatePool, Delete: store.Store.DeletePool}
)
