package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// GPU classes.

const gpuClassColumns = `id, tenant_id, name, description, memory_gb, price_micros, currency, created_at, updated_at`

func scanGPUClass(r sqlbase.Scanner) (*model.GPUClass, error) {
	var c model.GPUClass
	var created, updated int64
	if err := r.Scan(&c.ID, &c.TenantID, &c.Name, &c.Description, &c.MemoryGB, &c.PriceMicros,
		&c.Currency, &created, &updated); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &c, nil
}

// CreateGPUClass inserts a GPU class. Names are unique in a tenant.
func (q *queries) CreateGPUClass(ctx context.Context, c *model.GPUClass) error {
	undo := sqlbase.AssignID(&c.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create GPU class %q", c.Name), store.ErrNotFound,
		`INSERT INTO gpu_classes (`+gpuClassColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.TenantID, c.Name, c.Description, c.MemoryGB, c.PriceMicros, c.Currency,
		sqlbase.Micros(c.CreatedAt), sqlbase.Micros(c.UpdatedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateGPUClass(ctx context.Context, c *model.GPUClass) error {
	return q.WriteOne(ctx, "update GPU class "+c.ID, store.ErrNotFound,
		`UPDATE gpu_classes SET name = ?, description = ?, memory_gb = ?, price_micros = ?, currency = ?, updated_at = ?
		WHERE tenant_id = ? AND id = ?`,
		c.Name, c.Description, c.MemoryGB, c.PriceMicros, c.Currency, sqlbase.Micros(c.UpdatedAt), c.TenantID, c.ID)
}

// DeleteGPUClass deletes a class no pool or profile uses (ErrConflict
// otherwise).
func (q *queries) DeleteGPUClass(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete GPU class "+id, store.ErrConflict,
		`DELETE FROM gpu_classes WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetGPUClass(ctx context.Context, tenantID, id string) (*model.GPUClass, error) {
	return sqlbase.GetOne(ctx, q.Q, "get GPU class "+id, scanGPUClass,
		`SELECT `+gpuClassColumns+` FROM gpu_classes WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListGPUClasses lists a tenant's GPU classes by name. Allocation objects
// are few, so their lists are not paginated.
func (q *queries) ListGPUClasses(ctx context.Context, tenantID string) ([]*model.GPUClass, error) {
	return sqlbase.GetAll(ctx, q.Q, "list GPU classes", scanGPUClass,
		`SELECT `+gpuClassColumns+` FROM gpu_classes WHERE tenant_id = ? ORDER BY name`, tenantID)
}

// Pools.

const poolColumns = `id, tenant_id, name, description, kind, capacity_gpus, gpu_class_id, gpu_memory_gb, region,
	labels, profile_order, claim_timeout_ms, output_destination, single_tenant, created_at, updated_at, app_networks, app_local`

func scanPool(r sqlbase.Scanner) (*model.Pool, error) {
	var p model.Pool
	var kind, labels, order, networks string
	var class sql.NullString
	var claim sql.NullInt64
	var created, updated int64
	if err := r.Scan(&p.ID, &p.TenantID, &p.Name, &p.Description, &kind, &p.CapacityGPUs, &class,
		&p.GPUMemoryGB, &p.Region, &labels, &order, &claim, &p.OutputDestination, &p.SingleTenant, &created, &updated,
		&networks, &p.Local); err != nil {
		return nil, err
	}
	if claim.Valid {
		d := time.Duration(claim.Int64) * time.Millisecond
		p.ClaimTimeout = &d
	}
	var err error
	if p.Labels, err = sqlbase.StringMap(labels); err != nil {
		return nil, fmt.Errorf("pool %s labels: %w", p.ID, err)
	}
	if p.ProfileOrder, err = sqlbase.StringSlice(order); err != nil {
		return nil, fmt.Errorf("pool %s profile order: %w", p.ID, err)
	}
	if p.AppNetworks, err = sqlbase.StringSlice(networks); err != nil {
		return nil, fmt.Errorf("pool %s app networks: %w", p.ID, err)
	}
	if len(p.AppNetworks) == 0 {
		p.AppNetworks = nil // as a pool without them is written
	}
	p.Kind = model.PoolKind(kind)
	p.GPUClassID = class.String
	p.CreatedAt, p.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &p, nil
}

// poolJSON encodes the JSON columns of a pool.
func poolJSON(p *model.Pool) (labels, order, networks string, err error) {
	if labels, err = sqlbase.MarshalJSON(p.Labels, "{}"); err != nil {
		return "", "", "", fmt.Errorf("encode labels: %w", err)
	}
	if order, err = sqlbase.MarshalJSON(p.ProfileOrder, "[]"); err != nil {
		return "", "", "", fmt.Errorf("encode profile order: %w", err)
	}
	if networks, err = sqlbase.MarshalJSON(p.AppNetworks, "[]"); err != nil {
		return "", "", "", fmt.Errorf("encode app networks: %w", err)
	}
	return labels, order, networks, nil
}

// CreatePool inserts a pool. Names are unique in a tenant; the GPU class,
// when set, must exist.
func (q *queries) CreatePool(ctx context.Context, p *model.Pool) error {
	what := fmt.Sprintf("create pool %q", p.Name)
	labels, order, networks, err := poolJSON(p)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	undo := sqlbase.AssignID(&p.ID)
	_, err = q.Write(ctx, what, store.ErrNotFound,
		`INSERT INTO pools (`+poolColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.TenantID, p.Name, p.Description, string(p.Kind), p.CapacityGPUs, sqlbase.NullString(p.GPUClassID),
		p.GPUMemoryGB, p.Region, labels, order, claimMillis(p), p.OutputDestination, p.SingleTenant, sqlbase.Micros(p.CreatedAt), sqlbase.Micros(p.UpdatedAt),
		networks, p.Local)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdatePool(ctx context.Context, p *model.Pool) error {
	what := "update pool " + p.ID
	labels, order, networks, err := poolJSON(p)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return q.WriteOne(ctx, what, store.ErrNotFound,
		`UPDATE pools SET name = ?, description = ?, kind = ?, capacity_gpus = ?, gpu_class_id = ?, gpu_memory_gb = ?,
			region = ?, labels = ?, profile_order = ?, claim_timeout_ms = ?, output_destination = ?, single_tenant = ?, updated_at = ?,
			app_networks = ?, app_local = ?
		WHERE tenant_id = ? AND id = ?`,
		p.Name, p.Description, string(p.Kind), p.CapacityGPUs, sqlbase.NullString(p.GPUClassID), p.GPUMemoryGB,
		p.Region, labels, order, claimMillis(p), p.OutputDestination, p.SingleTenant, sqlbase.Micros(p.UpdatedAt), networks, p.Local, p.TenantID, p.ID)
}

// claimMillis is a pool's claim timeout as stored: NULL for the default.
func claimMillis(p *model.Pool) sql.NullInt64 {
	if p.ClaimTimeout == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: p.ClaimTimeout.Milliseconds(), Valid: true}
}

// DeletePool deletes a pool no profile links (ErrConflict otherwise).
func (q *queries) DeletePool(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete pool "+id, store.ErrConflict,
		`DELETE FROM pools WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetPool(ctx context.Context, tenantID, id string) (*model.Pool, error) {
	return sqlbase.GetOne(ctx, q.Q, "get pool "+id, scanPool,
		`SELECT `+poolColumns+` FROM pools WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListPools lists a tenant's pools by name.
func (q *queries) ListPools(ctx context.Context, tenantID string) ([]*model.Pool, error) {
	return sqlbase.GetAll(ctx, q.Q, "list pools", scanPool,
		`SELECT `+poolColumns+` FROM pools WHERE tenant_id = ? ORDER BY name`, tenantID)
}

// Profiles. A profile's ordered pools live in profile_pools, one row per link
// with its rank; reads join them in so that a profile and its links come
// from one statement (one snapshot, and no query per profile in lists).

const profileColumns = `p.id, p.tenant_id, p.name, p.description, p.size_nodes, p.size_per_node_milli, p.size_parameter,
	p.gpu_class_id, p.min_gpu_memory_gb, p.time_weight_milli, p.queuing_order, p.created_at, p.updated_at`

const profileSelect = `SELECT ` + profileColumns + `, pp.pool_id FROM profiles p
	LEFT JOIN profile_pools pp ON pp.tenant_id = p.tenant_id AND pp.profile_id = p.id`

// scanProfiles reads rows of profileSelect, ordered so that each profile's
// rows are together and in rank order, into one profile per group of rows.
func scanProfiles(rows *sql.Rows) ([]*model.Profile, error) {
	out := []*model.Profile{}
	var cur *model.Profile
	for rows.Next() {
		var p model.Profile
		var class, pool sql.NullString
		var order string
		var created, updated int64
		var perNode int64
		if err := rows.Scan(&p.ID, &p.TenantID, &p.Name, &p.Description, &p.Size.Nodes, &perNode, &p.SizeParameter,
			&class, &p.MinGPUMemoryGB, &p.TimeWeightMilli, &order, &created, &updated, &pool); err != nil {
			return nil, err
		}
		if cur == nil || cur.ID != p.ID {
			var err error
			if p.QueuingOrder, err = sqlbase.StringSlice(order); err != nil {
				return nil, fmt.Errorf("profile %s queuing order: %w", p.ID, err)
			}
			p.Size.PerNode = model.MilliGPU(perNode)
			p.GPUClassID = class.String
			p.CreatedAt, p.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
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
	order, err := sqlbase.MarshalJSON(p.QueuingOrder, "[]")
	if err != nil {
		return fmt.Errorf("%s: encode queuing order: %w", what, err)
	}
	undo := sqlbase.AssignID(&p.ID)
	err = q.atomic(ctx, func(q *queries) error {
		if _, err := q.Write(ctx, what, store.ErrNotFound,
			`INSERT INTO profiles (id, tenant_id, name, description, size_nodes, size_per_node_milli, size_parameter,
				gpu_class_id, min_gpu_memory_gb, time_weight_milli, queuing_order, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.TenantID, p.Name, p.Description, p.Size.Nodes, int64(p.Size.PerNode), p.SizeParameter,
			sqlbase.NullString(p.GPUClassID), p.MinGPUMemoryGB, p.TimeWeightMilli, order,
			sqlbase.Micros(p.CreatedAt), sqlbase.Micros(p.UpdatedAt)); err != nil {
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
	order, err := sqlbase.MarshalJSON(p.QueuingOrder, "[]")
	if err != nil {
		return fmt.Errorf("%s: encode queuing order: %w", what, err)
	}
	return q.atomic(ctx, func(q *queries) error {
		if err := q.WriteOne(ctx, what, store.ErrNotFound,
			`UPDATE profiles SET name = ?, description = ?, size_nodes = ?, size_per_node_milli = ?, size_parameter = ?,
				gpu_class_id = ?, min_gpu_memory_gb = ?, time_weight_milli = ?, queuing_order = ?, updated_at = ?
			WHERE tenant_id = ? AND id = ?`,
			p.Name, p.Description, p.Size.Nodes, int64(p.Size.PerNode), p.SizeParameter,
			sqlbase.NullString(p.GPUClassID), p.MinGPUMemoryGB, p.TimeWeightMilli, order, sqlbase.Micros(p.UpdatedAt),
			p.TenantID, p.ID); err != nil {
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

const policyColumns = `id, tenant_id, group_id, reservation_gpus, limit_gpus, budget_milli_hours, budget_period,
	low_watermark_us, alert_threshold_percent, created_at, updated_at`

func scanPolicy(r sqlbase.Scanner) (*model.ResourcePolicy, error) {
	var p model.ResourcePolicy
	var budget sql.NullInt64
	var period sql.NullString
	var watermark, created, updated int64
	if err := r.Scan(&p.ID, &p.TenantID, &p.GroupID, &p.ReservationGPUs, &p.LimitGPUs, &budget, &period,
		&watermark, &p.AlertThresholdPercent, &created, &updated); err != nil {
		return nil, err
	}
	if budget.Valid {
		p.Budget = &model.TimeBudget{MilliHours: budget.Int64, Period: model.BudgetPeriod(period.String)}
	}
	p.LowWatermark = time.Duration(watermark) * time.Microsecond
	p.CreatedAt, p.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &p, nil
}

// policyBudget splits an optional budget into its two nullable columns.
func policyBudget(b *model.TimeBudget) (milliHours, period any) {
	if b == nil {
		return nil, nil
	}
	return b.MilliHours, string(b.Period)
}

// CreatePolicy inserts a resource policy; a group has at most one
// (ErrConflict).
//
// LowWatermark is stored in whole microseconds, like times.
func (q *queries) CreatePolicy(ctx context.Context, p *model.ResourcePolicy) error {
	undo := sqlbase.AssignID(&p.ID)
	budget, period := policyBudget(p.Budget)
	_, err := q.Write(ctx, "create policy for group "+p.GroupID, store.ErrNotFound,
		`INSERT INTO policies (`+policyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.TenantID, p.GroupID, p.ReservationGPUs, p.LimitGPUs, budget, period,
		p.LowWatermark.Microseconds(), p.AlertThresholdPercent, sqlbase.Micros(p.CreatedAt), sqlbase.Micros(p.UpdatedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdatePolicy(ctx context.Context, p *model.ResourcePolicy) error {
	budget, period := policyBudget(p.Budget)
	return q.WriteOne(ctx, "update policy "+p.ID, store.ErrNotFound,
		`UPDATE policies SET group_id = ?, reservation_gpus = ?, limit_gpus = ?, budget_milli_hours = ?, budget_period = ?,
			low_watermark_us = ?, alert_threshold_percent = ?, updated_at = ?
		WHERE tenant_id = ? AND id = ?`,
		p.GroupID, p.ReservationGPUs, p.LimitGPUs, budget, period,
		p.LowWatermark.Microseconds(), p.AlertThresholdPercent, sqlbase.Micros(p.UpdatedAt), p.TenantID, p.ID)
}

// DeletePolicy deletes a policy no compute resource uses (ErrConflict
// otherwise).
func (q *queries) DeletePolicy(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete policy "+id, store.ErrConflict,
		`DELETE FROM policies WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetPolicy(ctx context.Context, tenantID, id string) (*model.ResourcePolicy, error) {
	return sqlbase.GetOne(ctx, q.Q, "get policy "+id, scanPolicy,
		`SELECT `+policyColumns+` FROM policies WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListPolicies lists a tenant's policies by id. Policies have no name of
// their own, and ids (UUIDv7) sort by creation, so this is creation order.
func (q *queries) ListPolicies(ctx context.Context, tenantID string) ([]*model.ResourcePolicy, error) {
	return sqlbase.GetAll(ctx, q.Q, "list policies", scanPolicy,
		`SELECT `+policyColumns+` FROM policies WHERE tenant_id = ? ORDER BY id`, tenantID)
}

// Compute resources.

const computeResourceColumns = `id, tenant_id, name, description, policy_id, profile_id, image, env, mounts, created_at, updated_at`

func scanComputeResource(r sqlbase.Scanner) (*model.ComputeResource, error) {
	var c model.ComputeResource
	var env, mounts string
	var created, updated int64
	if err := r.Scan(&c.ID, &c.TenantID, &c.Name, &c.Description, &c.PolicyID, &c.ProfileID, &c.Image, &env, &mounts,
		&created, &updated); err != nil {
		return nil, err
	}
	var err error
	if c.Env, err = sqlbase.StringMap(env); err != nil {
		return nil, fmt.Errorf("compute resource %s env: %w", c.ID, err)
	}
	if c.Mounts, err = sqlbase.StringSlice(mounts); err != nil {
		return nil, fmt.Errorf("compute resource %s mounts: %w", c.ID, err)
	}
	c.CreatedAt, c.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &c, nil
}

// computeResourceJSON encodes the JSON columns of a compute resource.
func computeResourceJSON(c *model.ComputeResource) (env, mounts string, err error) {
	if env, err = sqlbase.MarshalJSON(c.Env, "{}"); err != nil {
		return "", "", fmt.Errorf("encode env: %w", err)
	}
	if mounts, err = sqlbase.MarshalJSON(c.Mounts, "[]"); err != nil {
		return "", "", fmt.Errorf("encode mounts: %w", err)
	}
	return env, mounts, nil
}

// CreateComputeResource inserts a compute resource. A policy joins a profile
// once, and its compute resources have distinct names (ErrConflict).
func (q *queries) CreateComputeResource(ctx context.Context, c *model.ComputeResource) error {
	what := fmt.Sprintf("create compute resource %q", c.Name)
	env, mounts, err := computeResourceJSON(c)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	undo := sqlbase.AssignID(&c.ID)
	_, err = q.Write(ctx, what, store.ErrNotFound,
		`INSERT INTO compute_resources (`+computeResourceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.TenantID, c.Name, c.Description, c.PolicyID, c.ProfileID, c.Image, env, mounts, sqlbase.Micros(c.CreatedAt), sqlbase.Micros(c.UpdatedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) UpdateComputeResource(ctx context.Context, c *model.ComputeResource) error {
	what := "update compute resource " + c.ID
	env, mounts, err := computeResourceJSON(c)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return q.WriteOne(ctx, what, store.ErrNotFound,
		`UPDATE compute_resources SET name = ?, description = ?, policy_id = ?, profile_id = ?, image = ?, env = ?, mounts = ?,
			updated_at = ?
		WHERE tenant_id = ? AND id = ?`,
		c.Name, c.Description, c.PolicyID, c.ProfileID, c.Image, env, mounts, sqlbase.Micros(c.UpdatedAt), c.TenantID, c.ID)
}

// DeleteComputeResource deletes a compute resource that no task names
// (ErrConflict otherwise: tasks keep their history).
func (q *queries) DeleteComputeResource(ctx context.Context, tenantID, id string) error {
	return q.WriteOne(ctx, "delete compute resource "+id, store.ErrConflict,
		`DELETE FROM compute_resources WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

func (q *queries) GetComputeResource(ctx context.Context, tenantID, id string) (*model.ComputeResource, error) {
	return sqlbase.GetOne(ctx, q.Q, "get compute resource "+id, scanComputeResource,
		`SELECT `+computeResourceColumns+` FROM compute_resources WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListComputeResources lists a tenant's compute resources by name, then id:
// names repeat across policies.
func (q *queries) ListComputeResources(ctx context.Context, tenantID string) ([]*model.ComputeResource, error) {
	return sqlbase.GetAll(ctx, q.Q, "list compute resources", scanComputeResource,
		`SELECT `+computeResourceColumns+` FROM compute_resources WHERE tenant_id = ? ORDER BY name, id`, tenantID)
}
