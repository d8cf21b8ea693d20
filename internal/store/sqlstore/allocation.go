package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// GPU classes.

// gpuClassTable is the gpu_classes table; gpuClassUpdate what an update writes.
var gpuClassTable = sqlbase.Table[model.GPUClass]{
	sqlbase.C("id", func(c *model.GPUClass) any { return &c.ID }),
	sqlbase.C("tenant_id", func(c *model.GPUClass) any { return &c.TenantID }),
	sqlbase.C("name", func(c *model.GPUClass) any { return &c.Name }),
	sqlbase.C("description", func(c *model.GPUClass) any { return &c.Description }),
	sqlbase.C("memory_gb", func(c *model.GPUClass) any { return &c.MemoryGB }),
	sqlbase.C("price_micros", func(c *model.GPUClass) any { return &c.PriceMicros }),
	sqlbase.C("currency", func(c *model.GPUClass) any { return &c.Currency }),
	sqlbase.C("created_at", func(c *model.GPUClass) any { return sqlbase.Time(&c.CreatedAt) }),
	sqlbase.C("updated_at", func(c *model.GPUClass) any { return sqlbase.Time(&c.UpdatedAt) }),
}
var gpuClassUpdate = gpuClassTable.Only("name", "description", "memory_gb", "price_micros", "currency", "updated_at")

// CreateGPUClass inserts a GPU class. Names are unique in a tenant.
func (q *queries) CreateGPUClass(ctx context.Context, c *model.GPUClass) error {
	undo := sqlbase.AssignID(&c.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create GPU class %q", c.Name), store.ErrNotFound,
		gpuClassTable.Insert("gpu_classes"), gpuClassTable.Values(c)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateGPUClass(ctx context.Context, c *model.GPUClass) error {
	return q.WriteOne(ctx, "update GPU class "+c.ID, store.ErrNotFound,
		`UPDATE gpu_classes SET `+gpuClassUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, gpuClassUpdate.Values(c, c.TenantID, c.ID)...)
}

// DeleteGPUClass deletes a class no pool or profile uses (ErrConflict
// otherwise).
func (q *queries) DeleteGPUClass(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete GPU class "+id, store.ErrConflict,
		`DELETE FROM gpu_classes WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetGPUClass(ctx context.Context, tenantID, id string) (*model.GPUClass, error) {
	return sqlbase.GetOne(ctx, q.Q, "get GPU class "+id, gpuClassTable.Scan,
		`SELECT `+gpuClassTable.List()+` FROM gpu_classes WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListGPUClasses lists a tenant's GPU classes by name. Allocation objects
// are few, so their lists are not paginated.
func (q *queries) ListGPUClasses(ctx context.Context, tenantID string) ([]*model.GPUClass, error) {
	return sqlbase.GetAll(ctx, q.Q, "list GPU classes", gpuClassTable.Scan,
		`SELECT `+gpuClassTable.List()+` FROM gpu_classes WHERE tenant_id = ? ORDER BY name`, tenantID)
}

// Pools.

// poolTable is the pools table: a claim timeout in milliseconds (NULL for
// the default) and app networks that read back nil when there are none, as
// a pool without them is written. poolUpdate is what an update writes.
var poolTable = sqlbase.Table[model.Pool]{
	sqlbase.C("id", func(p *model.Pool) any { return &p.ID }),
	sqlbase.C("tenant_id", func(p *model.Pool) any { return &p.TenantID }),
	sqlbase.C("name", func(p *model.Pool) any { return &p.Name }),
	sqlbase.C("description", func(p *model.Pool) any { return &p.Description }),
	sqlbase.C("kind", func(p *model.Pool) any { return sqlbase.Str(&p.Kind) }),
	sqlbase.C("capacity_gpus", func(p *model.Pool) any { return &p.CapacityGPUs }),
	sqlbase.C("gpu_class_id", func(p *model.Pool) any { return sqlbase.Ref(&p.GPUClassID) }),
	sqlbase.C("gpu_memory_gb", func(p *model.Pool) any { return &p.GPUMemoryGB }),
	sqlbase.C("region", func(p *model.Pool) any { return &p.Region }),
	sqlbase.C("labels", func(p *model.Pool) any { return sqlbase.Dict(&p.Labels) }),
	sqlbase.C("profile_order", func(p *model.Pool) any { return sqlbase.List(&p.ProfileOrder) }),
	sqlbase.C("claim_timeout_ms", func(p *model.Pool) any { return sqlbase.DurationPtr(&p.ClaimTimeout, time.Millisecond) }),
	sqlbase.C("output_destination", func(p *model.Pool) any { return &p.OutputDestination }),
	sqlbase.C("single_tenant", func(p *model.Pool) any { return &p.SingleTenant }),
	sqlbase.C("created_at", func(p *model.Pool) any { return sqlbase.Time(&p.CreatedAt) }),
	sqlbase.C("updated_at", func(p *model.Pool) any { return sqlbase.Time(&p.UpdatedAt) }),
	sqlbase.C("app_networks", func(p *model.Pool) any { return sqlbase.JSON(&p.AppNetworks, "[]") }),
	sqlbase.C("app_local", func(p *model.Pool) any { return &p.Local }),
}
var poolUpdate = poolTable.Without("id", "tenant_id", "created_at")

// CreatePool inserts a pool. Names are unique in a tenant; the GPU class,
// when set, must exist.
func (q *queries) CreatePool(ctx context.Context, p *model.Pool) error {
	undo := sqlbase.AssignID(&p.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create pool %q", p.Name), store.ErrNotFound, poolTable.Insert("pools"), poolTable.Values(p)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdatePool(ctx context.Context, p *model.Pool) error {
	return q.WriteOne(ctx, "update pool "+p.ID, store.ErrNotFound,
		`UPDATE pools SET `+poolUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, poolUpdate.Values(p, p.TenantID, p.ID)...)
}

// DeletePool deletes a pool no profile links (ErrConflict otherwise).
func (q *queries) DeletePool(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete pool "+id, store.ErrConflict,
		`DELETE FROM pools WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetPool(ctx context.Context, tenantID, id string) (*model.Pool, error) {
	return sqlbase.GetOne(ctx, q.Q, "get pool "+id, poolTable.Scan,
		`SELECT `+poolTable.List()+` FROM pools WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListPools lists a tenant's pools by name.
func (q *queries) ListPools(ctx context.Context, tenantID string) ([]*model.Pool, error) {
	return sqlbase.GetAll(ctx, q.Q, "list pools", poolTable.Scan,
		`SELECT `+poolTable.List()+` FROM pools WHERE tenant_id = ? ORDER BY name`, tenantID)
}

// Profiles. A profile's ordered pools live in profile_pools, one row per link
// with its rank; reads join them in so that a profile and its links come
// from one statement (one snapshot, and no query per profile in lists).

// profileTable is the profiles table; profileUpdate what an update writes.
var profileTable = sqlbase.Table[model.Profile]{
	sqlbase.C("id", func(p *model.Profile) any { return &p.ID }),
	sqlbase.C("tenant_id", func(p *model.Profile) any { return &p.TenantID }),
	sqlbase.C("name", func(p *model.Profile) any { return &p.Name }),
	sqlbase.C("description", func(p *model.Profile) any { return &p.Description }),
	sqlbase.C("size_nodes", func(p *model.Profile) any { return &p.Size.Nodes }),
	sqlbase.C("size_per_node_milli", func(p *model.Profile) any { return sqlbase.Int(&p.Size.PerNode) }),
	sqlbase.C("size_parameter", func(p *model.Profile) any { return &p.SizeParameter }),
	sqlbase.C("gpu_class_id", func(p *model.Profile) any { return sqlbase.Ref(&p.GPUClassID) }),
	sqlbase.C("min_gpu_memory_gb", func(p *model.Profile) any { return &p.MinGPUMemoryGB }),
	sqlbase.C("time_weight_milli", func(p *model.Profile) any { return &p.TimeWeightMilli }),
	sqlbase.C("queuing_order", func(p *model.Profile) any { return sqlbase.List(&p.QueuingOrder) }),
	sqlbase.C("created_at", func(p *model.Profile) any { return sqlbase.Time(&p.CreatedAt) }),
	sqlbase.C("updated_at", func(p *model.Profile) any { return sqlbase.Time(&p.UpdatedAt) }),
}

var (
	profileUpdate = profileTable.Without("id", "tenant_id", "created_at")
	profileSelect = `SELECT ` + profileTable.As("p") + `, pp.pool_id FROM profiles p
	LEFT JOIN profile_pools pp ON pp.tenant_id = p.tenant_id AND pp.profile_id = p.id`
)

// scanProfiles reads rows of profileSelect, ordered so that each profile's
// rows are together and in rank order, into one profile per group of rows.
func scanProfiles(rows *sql.Rows) ([]*model.Profile, error) {
	out := []*model.Profile{}
	var cur *model.Profile
	for rows.Next() {
		var p model.Profile
		var pool sql.NullString
		if err := rows.Scan(append(profileTable.Dest(&p), &pool)...); err != nil {
			return nil, err
		}
		if cur == nil || cur.ID != p.ID {
			p.Pools = []string{}
			cur = &p
			out = append(out, cur)
		}
		if pool.Valid {
			cur.Pools = append(cur.Pools, pool.String)
		}
	}
	return out, rows.Err()
}

func (q *queries) selectProfiles(ctx context.Context, what, where string, args ...any) ([]*model.Profile, error) {
	rows, err := q.Query(ctx, profileSelect+` WHERE `+where+` ORDER BY p.name, p.id, pp.rank`, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out, err := scanProfiles(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// CreateProfile inserts a profile and its pool links. Names are unique in a
// tenant; the GPU class and every pool must exist (ErrNotFound), and a pool
// may be listed once (ErrConflict).
func (q *queries) CreateProfile(ctx context.Context, p *model.Profile) error {
	what := fmt.Sprintf("create profile %q", p.Name)
	undo := sqlbase.AssignID(&p.ID)
	err := q.atomic(ctx, func(q *queries) error {
		if _, err := q.Write(ctx, what, store.ErrNotFound, profileTable.Insert("profiles"), profileTable.Values(p)...); err != nil {
			return err
		}
		return q.insertProfilePools(ctx, what, p)
	})
	if err != nil {
		undo()
	}
	return err
}

// insertProfilePools writes a profile's links in one statement, ranked by
// their place in p.Pools.
func (q *queries) insertProfilePools(ctx context.Context, what string, p *model.Profile) error {
	if len(p.Pools) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString(`INSERT INTO profile_pools (tenant_id, profile_id, pool_id, rank) VALUES `)
	args := make([]any, 0, 4*len(p.Pools))
	for i, pool := range p.Pools {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?)")
		args = append(args, p.TenantID, p.ID, pool, i)
	}
	_, err := q.Write(ctx, what+": link pools", store.ErrNotFound, sb.String(), args...)
	return err
}

// UpdateProfile writes a profile and replaces its pool links wholesale.
func (q *queries) UpdateProfile(ctx context.Context, p *model.Profile) error {
	what := "update profile " + p.ID
	return q.atomic(ctx, func(q *queries) error {
		if err := q.WriteOne(ctx, what, store.ErrNotFound,
			`UPDATE profiles SET `+profileUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, profileUpdate.Values(p, p.TenantID, p.ID)...); err != nil {
			return err
		}
		if _, err := q.Write(ctx, what+": unlink pools", store.ErrConflict,
			`DELETE FROM profile_pools WHERE tenant_id = ? AND profile_id = ?`, p.TenantID, p.ID); err != nil {
			return err
		}
		return q.insertProfilePools(ctx, what, p)
	})
}

// DeleteProfile deletes a profile and its pool links. A profile that a
// compute resource uses cannot be deleted (ErrConflict).
func (q *queries) DeleteProfile(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete profile "+id, store.ErrConflict,
		`DELETE FROM profiles WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetProfile(ctx context.Context, tenantID, id string) (*model.Profile, error) {
	what := "get profile " + id
	out, err := q.selectProfiles(ctx, what, `p.tenant_id = ? AND p.id = ?`, tenantID, id)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return out[0], nil
}

// ListProfiles lists a tenant's profiles by name, each with its pools.
func (q *queries) ListProfiles(ctx context.Context, tenantID string) ([]*model.Profile, error) {
	return q.selectProfiles(ctx, "list profiles", `p.tenant_id = ?`, tenantID)
}

// Resource policies.

// policyTable is the policies table: an optional budget in two columns,
// NULL when there is none (budgetCol), and the low watermark in whole
// microseconds, like times. policyUpdate is what an update writes.
var policyTable = sqlbase.Table[model.ResourcePolicy]{
	sqlbase.C("id", func(p *model.ResourcePolicy) any { return &p.ID }),
	sqlbase.C("tenant_id", func(p *model.ResourcePolicy) any { return &p.TenantID }),
	sqlbase.C("group_id", func(p *model.ResourcePolicy) any { return &p.GroupID }),
	sqlbase.C("reservation_gpus", func(p *model.ResourcePolicy) any { return &p.ReservationGPUs }),
	sqlbase.C("limit_gpus", func(p *model.ResourcePolicy) any { return &p.LimitGPUs }),
	sqlbase.C("budget_milli_hours", func(p *model.ResourcePolicy) any { return budgetCol{&p.Budget, false} }),
	sqlbase.C("budget_period", func(p *model.ResourcePolicy) any { return budgetCol{&p.Budget, true} }),
	sqlbase.C("low_watermark_us", func(p *model.ResourcePolicy) any { return sqlbase.Duration(&p.LowWatermark, time.Microsecond) }),
	sqlbase.C("alert_threshold_percent", func(p *model.ResourcePolicy) any { return &p.AlertThresholdPercent }),
	sqlbase.C("weight", func(p *model.ResourcePolicy) any { return &p.Weight }),
	sqlbase.C("created_at", func(p *model.ResourcePolicy) any { return sqlbase.Time(&p.CreatedAt) }),
	sqlbase.C("updated_at", func(p *model.ResourcePolicy) any { return sqlbase.Time(&p.UpdatedAt) }),
}

var policyUpdate = policyTable.Without("id", "tenant_id", "created_at")

// budgetCol is one of the columns of a policy's optional budget: its hours
// (period false) or its period.
type budgetCol struct {
	p      **model.TimeBudget
	period bool
}

func (c budgetCol) Value() (driver.Value, error) {
	switch b := *c.p; {
	case b == nil:
		return nil, nil
	case c.period:
		return string(b.Period), nil
	default:
		return b.MilliHours, nil
	}
}

// Scan reads the hours or the period into the budget, which a non-NULL
// hours column makes; the period, read after, completes it.
func (c budgetCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
	case int64:
		*c.p = &model.TimeBudget{MilliHours: v}
	case string:
		if *c.p != nil {
			(*c.p).Period = model.BudgetPeriod(v)
		}
	default:
		return fmt.Errorf("a budget column stored as %T", src)
	}
	return nil
}

// CreatePolicy inserts a resource policy; a group has at most one
// (ErrConflict).
//
// LowWatermark is stored in whole microseconds, like times.
func (q *queries) CreatePolicy(ctx context.Context, p *model.ResourcePolicy) error {
	undo := sqlbase.AssignID(&p.ID)
	_, err := q.Write(ctx, "create policy for group "+p.GroupID, store.ErrNotFound, policyTable.Insert("policies"), policyTable.Values(p)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdatePolicy(ctx context.Context, p *model.ResourcePolicy) error {
	return q.WriteOne(ctx, "update policy "+p.ID, store.ErrNotFound,
		`UPDATE policies SET `+policyUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, policyUpdate.Values(p, p.TenantID, p.ID)...)
}

// DeletePolicy deletes a policy no compute resource uses (ErrConflict
// otherwise).
func (q *queries) DeletePolicy(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete policy "+id, store.ErrConflict,
		`DELETE FROM policies WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetPolicy(ctx context.Context, tenantID, id string) (*model.ResourcePolicy, error) {
	return sqlbase.GetOne(ctx, q.Q, "get policy "+id, policyTable.Scan,
		`SELECT `+policyTable.List()+` FROM policies WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListPolicies lists a tenant's policies by id. Policies have no name of
// their own, and ids (UUIDv7) sort by creation, so this is creation order.
func (q *queries) ListPolicies(ctx context.Context, tenantID string) ([]*model.ResourcePolicy, error) {
	return sqlbase.GetAll(ctx, q.Q, "list policies", policyTable.Scan,
		`SELECT `+policyTable.List()+` FROM policies WHERE tenant_id = ? ORDER BY id`, tenantID)
}

// Compute resources.

// computeResourceTable is the compute_resources table; computeResourceUpdate what an update writes.
var computeResourceTable = sqlbase.Table[model.ComputeResource]{
	sqlbase.C("id", func(c *model.ComputeResource) any { return &c.ID }),
	sqlbase.C("tenant_id", func(c *model.ComputeResource) any { return &c.TenantID }),
	sqlbase.C("name", func(c *model.ComputeResource) any { return &c.Name }),
	sqlbase.C("description", func(c *model.ComputeResource) any { return &c.Description }),
	sqlbase.C("policy_id", func(c *model.ComputeResource) any { return &c.PolicyID }),
	sqlbase.C("profile_id", func(c *model.ComputeResource) any { return &c.ProfileID }),
	sqlbase.C("image", func(c *model.ComputeResource) any { return &c.Image }),
	sqlbase.C("env", func(c *model.ComputeResource) any { return sqlbase.Dict(&c.Env) }),
	sqlbase.C("mounts", func(c *model.ComputeResource) any { return sqlbase.List(&c.Mounts) }),
	sqlbase.C("created_at", func(c *model.ComputeResource) any { return sqlbase.Time(&c.CreatedAt) }),
	sqlbase.C("updated_at", func(c *model.ComputeResource) any { return sqlbase.Time(&c.UpdatedAt) }),
}
var computeResourceUpdate = computeResourceTable.Without("id", "tenant_id", "created_at")

// CreateComputeResource inserts a compute resource. A policy joins a profile
// once, and its compute resources have distinct names (ErrConflict).
func (q *queries) CreateComputeResource(ctx context.Context, c *model.ComputeResource) error {
	undo := sqlbase.AssignID(&c.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create compute resource %q", c.Name), store.ErrNotFound,
		computeResourceTable.Insert("compute_resources"), computeResourceTable.Values(c)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateComputeResource(ctx context.Context, c *model.ComputeResource) error {
	return q.WriteOne(ctx, "update compute resource "+c.ID, store.ErrNotFound,
		`UPDATE compute_resources SET `+computeResourceUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`,
		computeResourceUpdate.Values(c, c.TenantID, c.ID)...)
}

// DeleteComputeResource deletes a compute resource that no task names
// (ErrConflict otherwise: tasks keep their history).
func (q *queries) DeleteComputeResource(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete compute resource "+id, store.ErrConflict,
		`DELETE FROM compute_resources WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetComputeResource(ctx context.Context, tenantID, id string) (*model.ComputeResource, error) {
	return sqlbase.GetOne(ctx, q.Q, "get compute resource "+id, computeResourceTable.Scan,
		`SELECT `+computeResourceTable.List()+` FROM compute_resources WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListComputeResources lists a tenant's compute resources by name, then id:
// names repeat across policies.
func (q *queries) ListComputeResources(ctx context.Context, tenantID string) ([]*model.ComputeResource, error) {
	return sqlbase.GetAll(ctx, q.Q, "list compute resources", computeResourceTable.Scan,
		`SELECT `+computeResourceTable.List()+` FROM compute_resources WHERE tenant_id = ? ORDER BY name, id`, tenantID)
}
