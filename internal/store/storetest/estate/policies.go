package estate

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Policies checks resource policies: one a group, with and without a budget.
func Policies(t *testing.T, setup harness.Setup) {
	policy.CheckRefusals(t, setup)
	policyWritesAndRefusals(t, setup)
	policyDeletesAndLists(t, setup)
}

// policyWritesAndRefusals checks that a policy is stored and updated
// whole, its budget added and removed, and the writes refused for its
// group.
func policyWritesAndRefusals(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreatePolicy then GetPolicy returns every field, with and without a budget", func(t *testing.T, b *harness.Bundle) {
		withBudget := &model.ResourcePolicy{ID: model.NewID(), TenantID: b.Tenant.ID, GroupID: b.Group(t).ID,
			ReservationGPUs: 8, LimitGPUs: 16, Budget: &model.TimeBudget{MilliHours: 123_456, Period: model.PeriodWeek},
			LowWatermark: 90 * time.Minute, AlertThresholdPercent: 75, Weight: 3, CreatedAt: b.At(1), UpdatedAt: b.At(2)}
		without := &model.ResourcePolicy{ID: model.NewID(), TenantID: b.Tenant.ID, GroupID: b.Group(t).ID,
			LowWatermark: 1500 * time.Millisecond, CreatedAt: b.At(3), UpdatedAt: b.At(4)}
		for _, in := range []*model.ResourcePolicy{withBudget, without} {
			policy.CheckCreate(t, b, in)
		}
	})

	setup.Run(t, "UpdatePolicy writes every mutable field, adding and removing the budget", func(t *testing.T, b *harness.Bundle) {
		g2 := b.Group(t)
		p := b.Policy(t, b.Group(t).ID)
		upd := &model.ResourcePolicy{ID: p.ID, TenantID: p.TenantID, GroupID: g2.ID, ReservationGPUs: 1, LimitGPUs: 3,
			Budget: &model.TimeBudget{MilliHours: 5000, Period: model.PeriodMonth}, LowWatermark: time.Hour,
			AlertThresholdPercent: 90, Weight: 7, CreatedAt: b.At(40), UpdatedAt: b.At(5)}
		policy.CheckUpdate(t, b, p, upd)

		upd.Budget = nil
		harness.Must(t, b.Store.UpdatePolicy(b.Ctx, upd))
		got, err := b.Store.GetPolicy(b.Ctx, b.Tenant.ID, p.ID)
		harness.Must(t, err)
		if got.Budget != nil {
			t.Fatalf("Budget = %+v after removing it", *got.Budget)
		}
	})

	setup.Run(t, "UpdatePolicy returns ErrNotFound for a missing group", func(t *testing.T, b *harness.Bundle) {
		p := b.Policy(t, b.Group(t).ID)
		p.GroupID = model.NewID()
		harness.WantErr(t, b.Store.UpdatePolicy(b.Ctx, p), store.ErrNotFound)
	})

	setup.Run(t, "CreatePolicy and UpdatePolicy return ErrConflict for a second policy of one group", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		b.Policy(t, g.ID)
		harness.WantErr(t, b.Store.CreatePolicy(b.Ctx, &model.ResourcePolicy{TenantID: b.Tenant.ID, GroupID: g.ID}), store.ErrConflict)
		p2 := b.Policy(t, b.Group(t).ID)
		p2.GroupID = g.ID
		harness.WantErr(t, b.Store.UpdatePolicy(b.Ctx, p2), store.ErrConflict)
	})

	setup.Run(t, "CreatePolicy returns ErrNotFound for a missing group or another tenant's group", func(t *testing.T, b *harness.Bundle) {
		theirs := b.Group(t, func(g *model.Group) { g.TenantID = b.Other.ID })
		harness.WantErr(t, b.Store.CreatePolicy(b.Ctx, &model.ResourcePolicy{TenantID: b.Tenant.ID, GroupID: model.NewID()}), store.ErrNotFound)
		harness.WantErr(t, b.Store.CreatePolicy(b.Ctx, &model.ResourcePolicy{TenantID: b.Tenant.ID, GroupID: theirs.ID}), store.ErrNotFound)
	})

}

// policyDeletesAndLists checks DeletePolicy, which a compute resource in
// use holds back, and ListPolicies.
func policyDeletesAndLists(t *testing.T, setup harness.Setup) {
	setup.Run(t, "DeletePolicy frees its group", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		p := b.Policy(t, g.ID)
		harness.Must(t, b.Store.DeletePolicy(b.Ctx, b.Tenant.ID, p.ID))
		harness.Must(t, b.Store.DeleteGroup(b.Ctx, b.Tenant.ID, g.ID))
	})

	setup.Run(t, "DeletePolicy returns ErrConflict while a compute resource uses the policy", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		harness.WantErr(t, b.Store.DeletePolicy(b.Ctx, b.Tenant.ID, q.Policy.ID), store.ErrConflict)
		_, err := b.Store.GetPolicy(b.Ctx, b.Tenant.ID, q.Policy.ID)
		harness.Must(t, err)
	})

	setup.Run(t, "ListPolicies lists a tenant's policies by id", func(t *testing.T, b *harness.Bundle) {
		var want []string
		for range 4 {
			want = append(want, b.Policy(t, b.Group(t).ID).ID)
		}
		theirGroup := b.Group(t, func(x *model.Group) { x.TenantID = b.Other.ID })
		b.Policy(t, theirGroup.ID, func(x *model.ResourcePolicy) { x.TenantID = b.Other.ID })
		got, err := b.Store.ListPolicies(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "ids", harness.Names(got, func(p *model.ResourcePolicy) string { return p.ID }), want)
	})
}

// ComputeResources checks compute resources, the join of a policy and a
// profile that tasks queue on.
func ComputeResources(t *testing.T, setup harness.Setup) {
	computeResource.CheckRefusals(t, setup)
	computeResourceWrites(t, setup)
	computeResourceRefusals(t, setup)
	computeResourceDeletesAndLists(t, setup)
}

// computeResourceWrites checks that a compute resource is stored and
// updated whole, its run settings read back as empty rather than nil.
func computeResourceWrites(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateComputeResource then GetComputeResource returns every field", func(t *testing.T, b *harness.Bundle) {
		pol := b.Policy(t, b.Group(t).ID)
		prof := b.Profile(t)
		in := &model.ComputeResource{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "1 GPU", Description: "one H100",
			PolicyID: pol.ID, ProfileID: prof.ID, Image: "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
			Env:    map[string]string{"HF_HOME": "/data/hf-cache", "NCCL_DEBUG": "WARN", "QUOTE": "a \"b\" ü"},
			Mounts: []string{"/data/hf-cache:/data/hf-cache", "/datasets:/datasets:ro"}, CreatedAt: b.At(1), UpdatedAt: b.At(2)}
		computeResource.CheckCreate(t, b, in)
	})

	setup.Run(t, "UpdateComputeResource writes every mutable field and keeps CreatedAt", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		pol2 := b.Policy(t, b.Group(t).ID)
		prof2 := b.Profile(t)
		upd := &model.ComputeResource{ID: q.CR.ID, TenantID: b.Tenant.ID, Name: "8 GPUs", Description: "d",
			PolicyID: pol2.ID, ProfileID: prof2.ID, Image: "python:3.12", Env: map[string]string{"A": "1"},
			Mounts: []string{"/scratch:/scratch:rw"}, CreatedAt: b.At(20), UpdatedAt: b.At(3)}
		computeResource.CheckUpdate(t, b, q.CR, upd)
	})

	setup.Run(t, "compute resources read nil run settings back as empty, non-nil values, and an update can clear them", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		got, err := b.Store.GetComputeResource(b.Ctx, b.Tenant.ID, q.CR.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "Image", got.Image, "")
		harness.CheckEqual(t, "Env", got.Env, map[string]string{})
		harness.CheckEqual(t, "Mounts", got.Mounts, []string{})

		set := *q.CR
		set.Image, set.Env, set.Mounts = "python:3.12", map[string]string{"K": "v"}, []string{"/a:/a"}
		harness.Must(t, b.Store.UpdateComputeResource(b.Ctx, &set))
		set.Image, set.Env, set.Mounts = "", nil, nil
		harness.Must(t, b.Store.UpdateComputeResource(b.Ctx, &set))
		got, err = b.Store.GetComputeResource(b.Ctx, b.Tenant.ID, q.CR.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "Image after clearing", got.Image, "")
		harness.CheckEqual(t, "Env after clearing", got.Env, map[string]string{})
		harness.CheckEqual(t, "Mounts after clearing", got.Mounts, []string{})
		list, err := b.Store.ListComputeResources(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(list) != 1 || list[0].Env == nil || list[0].Mounts == nil {
			t.Fatalf("ListComputeResources = %+v, want one with empty, non-nil settings", list)
		}
	})
}

// computeResourceRefusals checks the writes refused for their policies
// and profiles, missing or another tenant's, and for taken names or joins.
func computeResourceRefusals(t *testing.T, setup harness.Setup) {
	setup.Run(t, "UpdateComputeResource returns ErrNotFound for a missing profile", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		badProfile := *q.CR
		badProfile.ProfileID = model.NewID()
		harness.WantErr(t, b.Store.UpdateComputeResource(b.Ctx, &badProfile), store.ErrNotFound)
	})

	setup.Run(t, "CreateComputeResource returns ErrConflict for a second join of one policy and profile", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		harness.WantErr(t, b.Store.CreateComputeResource(b.Ctx, &model.ComputeResource{TenantID: b.Tenant.ID, Name: "other name",
			PolicyID: q.Policy.ID, ProfileID: q.Profile.ID}), store.ErrConflict)
	})

	setup.Run(t, "CreateComputeResource returns ErrConflict for a name taken in the policy, while other policies may use it", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		prof2 := b.Profile(t)
		harness.WantErr(t, b.Store.CreateComputeResource(b.Ctx, &model.ComputeResource{TenantID: b.Tenant.ID, Name: q.CR.Name,
			PolicyID: q.Policy.ID, ProfileID: prof2.ID}), store.ErrConflict)
		pol2 := b.Policy(t, b.Group(t).ID)
		b.ComputeResource(t, pol2.ID, q.Profile.ID, func(c *model.ComputeResource) { c.Name = q.CR.Name })
	})

	setup.Run(t, "CreateComputeResource returns ErrNotFound for a missing policy or profile, or another tenant's", func(t *testing.T, b *harness.Bundle) {
		pol := b.Policy(t, b.Group(t).ID)
		prof := b.Profile(t)
		theirProfile := b.Profile(t, func(x *model.Profile) { x.TenantID = b.Other.ID })
		for _, c := range []*model.ComputeResource{
			{TenantID: b.Tenant.ID, Name: "a", PolicyID: model.NewID(), ProfileID: prof.ID},
			{TenantID: b.Tenant.ID, Name: "b", PolicyID: pol.ID, ProfileID: model.NewID()},
			{TenantID: b.Tenant.ID, Name: "c", PolicyID: pol.ID, ProfileID: theirProfile.ID},
		} {
			harness.WantErr(t, b.Store.CreateComputeResource(b.Ctx, c), store.ErrNotFound)
		}
	})

}

// computeResourceDeletesAndLists checks DeleteComputeResource, which keeps
// the tasks that name it, and ListComputeResources.
func computeResourceDeletesAndLists(t *testing.T, setup harness.Setup) {
	setup.Run(t, "DeleteComputeResource frees its policy and profile", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		harness.Must(t, b.Store.DeleteComputeResource(b.Ctx, b.Tenant.ID, q.CR.ID))
		harness.Must(t, b.Store.DeletePolicy(b.Ctx, b.Tenant.ID, q.Policy.ID))
		harness.Must(t, b.Store.DeleteProfile(b.Ctx, b.Tenant.ID, q.Profile.ID))
	})

	setup.Run(t, "DeleteComputeResource leaves the tasks that name it, for their history", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		tk := b.Task(t, q, b.User(t))
		harness.Must(t, b.Store.DeleteComputeResource(b.Ctx, b.Tenant.ID, q.CR.ID))
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "task's compute resource id", got.ComputeResourceID, q.CR.ID)
	})

	setup.Run(t, "ListComputeResources lists a tenant's resources by name, then id", func(t *testing.T, b *harness.Bundle) {
		prof := b.Profile(t)
		var sameName []string
		for range 3 {
			sameName = append(sameName, b.ComputeResource(t, b.Policy(t, b.Group(t).ID).ID, prof.ID,
				func(c *model.ComputeResource) { c.Name = "1 GPU" }).ID)
		}
		pol := b.Policy(t, b.Group(t).ID)
		first := b.ComputeResource(t, pol.ID, prof.ID, func(c *model.ComputeResource) { c.Name = "0.5 GPU" })
		got, err := b.Store.ListComputeResources(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "ids", harness.Names(got, func(c *model.ComputeResource) string { return c.ID }),
			append([]string{first.ID}, sameName...))
		none, err := b.Store.ListComputeResources(b.Ctx, b.Other.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "another tenant's list", len(none), 0)
	})
}

// policy and computeResource describe policies and compute resources for
// the checks every kind a tenant owns passes. Neither has a name unique in
// its tenant: a policy has none, a compute resource's is unique in its
// policy.
var (
	policy = harness.Owned[model.ResourcePolicy]{Kind: "Policy", Noun: "policy",
		Make: func(b *harness.Bundle, t *testing.T, mods ...func(*model.ResourcePolicy)) *model.ResourcePolicy {
			return b.Policy(t, b.Group(t).ID, mods...)
		},
		Fields: func(p *model.ResourcePolicy) harness.Fields {
			return harness.Fields{ID: &p.ID, TenantID: &p.TenantID, CreatedAt: &p.CreatedAt, UpdatedAt: &p.UpdatedAt}
		},
		Create: store.Store.CreatePolicy, Get: store.Store.GetPolicy, Update: store.Store.UpdatePolicy,
		Delete: store.Store.DeletePolicy}
	computeResource = harness.Owned[model.ComputeResource]{Kind: "ComputeResource", Noun: "resource",
		Make: func(b *harness.Bundle, t *testing.T, mods ...func(*model.ComputeResource)) *model.ComputeResource {
			return b.ComputeResource(t, b.Policy(t, b.Group(t).ID).ID, b.Profile(t).ID, mods...)
		},
		Fields: func(c *model.ComputeResource) harness.Fields {
			return harness.Fields{ID: &c.ID, TenantID: &c.TenantID, CreatedAt: &c.CreatedAt, UpdatedAt: &c.UpdatedAt}
		},
		Create: store.Store.CreateComputeResource, Get: store.Store.GetComputeResource,
		Update: store.Store.UpdateComputeResource, Delete: store.Store.DeleteComputeResource}
)
