package harness

import (
	"context"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

// Fixture builders create a valid object in b.Tenant, apply mods (which may
// move it to another tenant or break it on purpose) and fail the test if the
// store refuses it. Names are unique unless a mod sets one.

// User creates a member user.
func (b *Bundle) User(t *testing.T, mods ...func(*model.User)) *model.User {
	t.Helper()
	return made(t, b, &model.User{
		ID: model.NewID(), TenantID: b.Tenant.ID, Name: b.Name("user"), DisplayName: "A User",
		Email: "user@example.com", Role: model.RoleMember, CreatedAt: b.Now, UpdatedAt: b.Now,
	}, mods, b.Store.CreateUser)
}

// Group creates a group.
func (b *Bundle) Group(t *testing.T, mods ...func(*model.Group)) *model.Group {
	t.Helper()
	return made(t, b, &model.Group{ID: model.NewID(), TenantID: b.Tenant.ID, Name: b.Name("group"), Description: "a group",
		CreatedAt: b.Now, UpdatedAt: b.Now}, mods, b.Store.CreateGroup)
}

// GPUClass creates a GPU class.
func (b *Bundle) GPUClass(t *testing.T, mods ...func(*model.GPUClass)) *model.GPUClass {
	t.Helper()
	return made(t, b, &model.GPUClass{ID: model.NewID(), TenantID: b.Tenant.ID, Name: b.Name("class"), Description: "H100 80GB",
		MemoryGB: 80, PriceMicros: 2_500_000, Currency: "EUR", CreatedAt: b.Now, UpdatedAt: b.Now}, mods, b.Store.CreateGPUClass)
}

// Pool creates a Kubernetes pool of 8 GPUs.
func (b *Bundle) Pool(t *testing.T, mods ...func(*model.Pool)) *model.Pool {
	t.Helper()
	return made(t, b, &model.Pool{ID: model.NewID(), TenantID: b.Tenant.ID, Name: b.Name("pool"), Kind: model.PoolKubernetes,
		CapacityGPUs: 8, CreatedAt: b.Now, UpdatedAt: b.Now}, mods, b.Store.CreatePool)
}

// Profile creates a profile of one GPU on one node.
func (b *Bundle) Profile(t *testing.T, mods ...func(*model.Profile)) *model.Profile {
	t.Helper()
	return made(t, b, &model.Profile{ID: model.NewID(), TenantID: b.Tenant.ID, Name: b.Name("profile"),
		Size: model.Size{Nodes: 1, PerNode: model.GPUs(1)}, TimeWeightMilli: 1000, CreatedAt: b.Now, UpdatedAt: b.Now},
		mods, b.Store.CreateProfile)
}

// Policy creates a resource policy of the group groupID.
func (b *Bundle) Policy(t *testing.T, groupID string, mods ...func(*model.ResourcePolicy)) *model.ResourcePolicy {
	t.Helper()
	return made(t, b, &model.ResourcePolicy{ID: model.NewID(), TenantID: b.Tenant.ID, GroupID: groupID, ReservationGPUs: 2,
		LimitGPUs: 4, LowWatermark: model.DefaultLowWatermark,
		AlertThresholdPercent: model.DefaultAlertThresholdPercent, CreatedAt: b.Now, UpdatedAt: b.Now}, mods, b.Store.CreatePolicy)
}

// ComputeResource creates a compute resource of a policy and a profile.
func (b *Bundle) ComputeResource(t *testing.T, policyID, profileID string, mods ...func(*model.ComputeResource)) *model.ComputeResource {
	t.Helper()
	return made(t, b, &model.ComputeResource{ID: model.NewID(), TenantID: b.Tenant.ID, Name: b.Name("cr"), Description: "one GPU",
		PolicyID: policyID, ProfileID: profileID, CreatedAt: b.Now, UpdatedAt: b.Now}, mods, b.Store.CreateComputeResource)
}

// Project creates a project.
func (b *Bundle) Project(t *testing.T, mods ...func(*model.Project)) *model.Project {
	t.Helper()
	return made(t, b, &model.Project{ID: model.NewID(), TenantID: b.Tenant.ID, Name: b.Name("project"), Description: "a project",
		OutputDestination: "s3://bucket/out", CreatedAt: b.Now, UpdatedAt: b.Now}, mods, b.Store.CreateProject)
}

// APIKey creates an API key of the user userID.
func (b *Bundle) APIKey(t *testing.T, userID string, mods ...func(*model.APIKey)) *model.APIKey {
	t.Helper()
	id := model.NewID()
	return made(t, b, &model.APIKey{ID: id, TenantID: b.Tenant.ID, UserID: userID, Name: b.Name("key"), Prefix: "kq_" + id[:6],
		Hash: []byte("hash-of-" + id), CreatedAt: b.Now}, mods, b.Store.CreateAPIKey)
}

// Queue is a compute resource with everything it hangs off: a group with a
// policy, and a profile.
type Queue struct {
	Group   *model.Group
	Policy  *model.ResourcePolicy
	Profile *model.Profile
	CR      *model.ComputeResource
}

// Queue builds a queue in b.Tenant.
func (b *Bundle) Queue(t *testing.T) *Queue {
	t.Helper()
	g := b.Group(t)
	pol := b.Policy(t, g.ID)
	prof := b.Profile(t)
	return &Queue{Group: g, Policy: pol, Profile: prof, CR: b.ComputeResource(t, pol.ID, prof.ID)}
}

// Task enqueues a task on q owned by owner. QueueSeq is left to the store.
func (b *Bundle) Task(t *testing.T, q *Queue, owner *model.User, mods ...func(*model.Task)) *model.Task {
	t.Helper()
	return made(t, b, &model.Task{
		ID: model.NewID(), TenantID: b.Tenant.ID, OwnerID: owner.ID, ComputeResourceID: q.CR.ID,
		PolicyID: q.Policy.ID, ProfileID: q.Profile.ID, GroupID: q.Group.ID, Name: b.Name("task"),
		Spec: model.TaskSpec{Command: []string{"python", "train.py"}}, Size: q.Profile.Size,
		Status: model.TaskQueued, CreatedAt: b.Now, UpdatedAt: b.Now,
	}, mods, b.Store.CreateTask)
}

// Audit inserts an audit entry.
func (b *Bundle) Audit(t *testing.T, mods ...func(*model.AuditEntry)) *model.AuditEntry {
	t.Helper()
	return made(t, b, &model.AuditEntry{TenantID: b.Tenant.ID, At: b.Now, ActorID: "actor-1", ActorName: "ada",
		Channel: "api", Action: "pool.create", ObjectKind: "pool", ObjectID: "pool-1", ObjectName: "gpu-farm",
		Detail: "created pool gpu-farm"}, mods, b.Store.InsertAudit)
}

// made applies mods to e, creates it with create and fails t if the store
// refuses it: the steps every fixture builder ends in.
func made[E any](t *testing.T, b *Bundle, e *E, mods []func(*E), create func(context.Context, *E) error) *E {
	t.Helper()
	for _, m := range mods {
		m(e)
	}
	Must(t, create(b.Ctx, e))
	return e
}
