package storetest

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

// Fixture builders create a valid object in b.tenant, apply mods (which may
// move it to another tenant or break it on purpose) and fail the test if the
// store refuses it. Names are unique unless a mod sets one.

func (b *testBundle) user(t *testing.T, mods ...func(*model.User)) *model.User {
	t.Helper()
	u := &model.User{
		ID: model.NewID(), TenantID: b.tenant.ID, Name: b.name("user"), DisplayName: "A User",
		Email: "user@example.com", Role: model.RoleMember, CreatedAt: b.now, UpdatedAt: b.now,
	}
	for _, m := range mods {
		m(u)
	}
	must(t, b.store.CreateUser(b.ctx, u))
	return u
}

func (b *testBundle) group(t *testing.T, mods ...func(*model.Group)) *model.Group {
	t.Helper()
	g := &model.Group{ID: model.NewID(), TenantID: b.tenant.ID, Name: b.name("group"), Description: "a group",
		CreatedAt: b.now, UpdatedAt: b.now}
	for _, m := range mods {
		m(g)
	}
	must(t, b.store.CreateGroup(b.ctx, g))
	return g
}

func (b *testBundle) gpuClass(t *testing.T, mods ...func(*model.GPUClass)) *model.GPUClass {
	t.Helper()
	c := &model.GPUClass{ID: model.NewID(), TenantID: b.tenant.ID, Name: b.name("class"), Description: "H100 80GB",
		MemoryGB: 80, PriceMicros: 2_500_000, Currency: "EUR", CreatedAt: b.now, UpdatedAt: b.now}
	for _, m := range mods {
		m(c)
	}
	must(t, b.store.CreateGPUClass(b.ctx, c))
	return c
}

func (b *testBundle) pool(t *testing.T, mods ...func(*model.Pool)) *model.Pool {
	t.Helper()
	p := &model.Pool{ID: model.NewID(), TenantID: b.tenant.ID, Name: b.name("pool"), Kind: model.PoolKubernetes,
		CapacityGPUs: 8, CreatedAt: b.now, UpdatedAt: b.now}
	for _, m := range mods {
		m(p)
	}
	must(t, b.store.CreatePool(b.ctx, p))
	return p
}

func (b *testBundle) profile(t *testing.T, mods ...func(*model.Profile)) *model.Profile {
	t.Helper()
	p := &model.Profile{ID: model.NewID(), TenantID: b.tenant.ID, Name: b.name("profile"),
		Size: model.Size{Nodes: 1, PerNode: model.GPUs(1)}, TimeWeightMilli: 1000, CreatedAt: b.now, UpdatedAt: b.now}
	for _, m := range mods {
		m(p)
	}
	must(t, b.store.CreateProfile(b.ctx, p))
	return p
}

func (b *testBundle) policy(t *testing.T, groupID string, mods ...func(*model.ResourcePolicy)) *model.ResourcePolicy {
	t.Helper()
	p := &model.ResourcePolicy{ID: model.NewID(), TenantID: b.tenant.ID, GroupID: groupID, ReservationGPUs: 2,
		LimitGPUs: 4, LowWatermark: model.DefaultLowWatermark,
		AlertThresholdPercent: model.DefaultAlertThresholdPercent, CreatedAt: b.now, UpdatedAt: b.now}
	for _, m := range mods {
		m(p)
	}
	must(t, b.store.CreatePolicy(b.ctx, p))
	return p
}

func (b *testBundle) computeResource(t *testing.T, policyID, profileID string, mods ...func(*model.ComputeResource)) *model.ComputeResource {
	t.Helper()
	c := &model.ComputeResource{ID: model.NewID(), TenantID: b.tenant.ID, Name: b.name("cr"), Description: "one GPU",
		PolicyID: policyID, ProfileID: profileID, CreatedAt: b.now, UpdatedAt: b.now}
	for _, m := range mods {
		m(c)
	}
	must(t, b.store.CreateComputeResource(b.ctx, c))
	return c
}

func (b *testBundle) project(t *testing.T, mods ...func(*model.Project)) *model.Project {
	t.Helper()
	p := &model.Project{ID: model.NewID(), TenantID: b.tenant.ID, Name: b.name("project"), Description: "a project",
		OutputDestination: "s3://bucket/out", CreatedAt: b.now, UpdatedAt: b.now}
	for _, m := range mods {
		m(p)
	}
	must(t, b.store.CreateProject(b.ctx, p))
	return p
}

func (b *testBundle) apiKey(t *testing.T, userID string, mods ...func(*model.APIKey)) *model.APIKey {
	t.Helper()
	id := model.NewID()
	k := &model.APIKey{ID: id, TenantID: b.tenant.ID, UserID: userID, Name: b.name("key"), Prefix: "kq_" + id[:6],
		Hash: []byte("hash-of-" + id), CreatedAt: b.now}
	for _, m := range mods {
		m(k)
	}
	must(t, b.store.CreateAPIKey(b.ctx, k))
	return k
}

// queue is a compute resource with everything it hangs off: a group with a
// policy, and a profile.
type queue struct {
	group   *model.Group
	policy  *model.ResourcePolicy
	profile *model.Profile
	cr      *model.ComputeResource
}

func (b *testBundle) queue(t *testing.T) *queue {
	t.Helper()
	g := b.group(t)
	pol := b.policy(t, g.ID)
	prof := b.profile(t)
	return &queue{group: g, policy: pol, profile: prof, cr: b.computeResource(t, pol.ID, prof.ID)}
}

// task enqueues a task on q owned by owner. QueueSeq is left to the store.
func (b *testBundle) task(t *testing.T, q *queue, owner *model.User, mods ...func(*model.Task)) *model.Task {
	t.Helper()
	tk := &model.Task{
		ID: model.NewID(), TenantID: b.tenant.ID, OwnerID: owner.ID, ComputeResourceID: q.cr.ID,
		PolicyID: q.policy.ID, ProfileID: q.profile.ID, GroupID: q.group.ID, Name: b.name("task"),
		Spec: model.TaskSpec{Command: []string{"python", "train.py"}}, Size: q.profile.Size,
		Status: model.TaskQueued, CreatedAt: b.now, UpdatedAt: b.now,
	}
	for _, m := range mods {
		m(tk)
	}
	must(t, b.store.CreateTask(b.ctx, tk))
	return tk
}

func (b *testBundle) audit(t *testing.T, mods ...func(*model.AuditEntry)) *model.AuditEntry {
	t.Helper()
	e := &model.AuditEntry{TenantID: b.tenant.ID, At: b.now, ActorID: "actor-1", ActorName: "ada",
		Channel: "api", Action: "pool.create", ObjectKind: "pool", ObjectID: "pool-1", ObjectName: "gpu-farm",
		Detail: "created pool gpu-farm"}
	for _, m := range mods {
		m(e)
	}
	must(t, b.store.InsertAudit(b.ctx, e))
	return e
}
