package storetest

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

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
