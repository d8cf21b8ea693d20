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

// schedTable is the columns of a task the engine reads (a NULL placed_at
// is the zero time).
var schedTable = sqlbase.Table[store.SchedTask]{
	sqlbase.C("id", func(t *store.SchedTask) any { return &t.ID }),
	sqlbase.C("name", func(t *store.SchedTask) any { return &t.Name }),
	sqlbase.C("compute_resource_id", func(t *store.SchedTask) any { return &t.ComputeResourceID }),
	sqlbase.C("owner_id", func(t *store.SchedTask) any { return &t.OwnerID }),
	sqlbase.C("project_id", func(t *store.SchedTask) any { return sqlbase.Ref(&t.ProjectID) }),
	sqlbase.C("status", func(t *store.SchedTask) any { return sqlbase.Str(&t.Status) }),
	sqlbase.C("size_nodes", func(t *store.SchedTask) any { return &t.Size.Nodes }),
	sqlbase.C("size_per_node_milli", func(t *store.SchedTask) any { return sqlbase.Int(&t.Size.PerNode) }),
	sqlbase.C("queue_seq", func(t *store.SchedTask) any { return &t.QueueSeq }),
	sqlbase.C("queue_rank", func(t *store.SchedTask) any { return &t.QueueRank }),
	sqlbase.C("queue_order", func(t *store.SchedTask) any { return &t.QueueOrder }),
	sqlbase.C("pool_id", func(t *store.SchedTask) any { return &t.PoolID }),
	sqlbase.C("placed_at", func(t *store.SchedTask) any { return sqlbase.Time(&t.PlacedAt) }),
}

// SchedColumns lists the task columns the engine reads, qualified by alias.
func SchedColumns(alias string) string { return schedTable.As(alias) }

func scanSched(r sqlbase.Scanner) (store.SchedTask, error) {
	t, err := schedTable.Scan(r)
	if err != nil {
		return store.SchedTask{}, err
	}
	return *t, nil
}

// ListSchedulable returns the work holding capacity and each compute
// resource's first perQueue queued tasks, as store.Queries documents.
func (q *queries) ListSchedulable(ctx context.Context, tenantID string, perQueue int) ([]store.SchedTask, error) {
	held, err := sqlbase.GetAll(ctx, q.Q, "list placed tasks", scanSched,
		`SELECT `+SchedColumns("t")+` FROM tasks t WHERE t.tenant_id = ? AND t.status IN (?, ?)`,
		tenantID, string(model.TaskPlaced), string(model.TaskRunning))
	if err != nil {
		return nil, err
	}
	if perQueue <= 0 {
		return held, nil
	}
	// The dialect's query numbers its parameters itself.
	rows, err := q.Conn().QueryContext(ctx, q.Dialect().QueueHeadsQuery(), tenantID, perQueue)
	if err != nil {
		return nil, fmt.Errorf("list queue heads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanSched(rows)
		if err != nil {
			return nil, fmt.Errorf("list queue heads: %w", err)
		}
		held = append(held, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queue heads: %w", err)
	}
	return held, nil
}

// placementTable is the ledger's table, placements: one interval a task held capacity.
var placementTable = sqlbase.Table[model.Placement]{
	sqlbase.C("id", func(p *model.Placement) any { return &p.ID }),
	sqlbase.C("tenant_id", func(p *model.Placement) any { return &p.TenantID }),
	sqlbase.C("task_id", func(p *model.Placement) any { return &p.TaskID }),
	sqlbase.C("user_id", func(p *model.Placement) any { return &p.UserID }),
	sqlbase.C("user_name", func(p *model.Placement) any { return &p.UserName }),
	sqlbase.C("project_id", func(p *model.Placement) any { return &p.ProjectID }),
	sqlbase.C("project_name", func(p *model.Placement) any { return &p.ProjectName }),
	sqlbase.C("group_id", func(p *model.Placement) any { return &p.GroupID }),
	sqlbase.C("group_name", func(p *model.Placement) any { return &p.GroupName }),
	sqlbase.C("policy_id", func(p *model.Placement) any { return &p.PolicyID }),
	sqlbase.C("profile_id", func(p *model.Placement) any { return &p.ProfileID }),
	sqlbase.C("profile_name", func(p *model.Placement) any { return &p.ProfileName }),
	sqlbase.C("compute_resource_id", func(p *model.Placement) any { return &p.ComputeResourceID }),
	sqlbase.C("compute_resource_name", func(p *model.Placement) any { return &p.ComputeResourceName }),
	sqlbase.C("pool_id", func(p *model.Placement) any { return &p.PoolID }),
	sqlbase.C("pool_name", func(p *model.Placement) any { return &p.PoolName }),
	sqlbase.C("gpu_class_id", func(p *model.Placement) any { return &p.GPUClassID }),
	sqlbase.C("gpu_class_name", func(p *model.Placement) any { return &p.GPUClassName }),
	sqlbase.C("size_milli", func(p *model.Placement) any { return sqlbase.Int(&p.Size) }),
	sqlbase.C("weight_milli", func(p *model.Placement) any { return &p.WeightMilli }),
	sqlbase.C("price_micros", func(p *model.Placement) any { return &p.PriceMicros }),
	sqlbase.C("currency", func(p *model.Placement) any { return &p.Currency }),
	sqlbase.C("started_at", func(p *model.Placement) any { return sqlbase.Time(&p.StartedAt) }),
	sqlbase.C("ended_at", func(p *model.Placement) any { return sqlbase.TimePtr(&p.EndedAt) }),
	sqlbase.C("end_reason", func(p *model.Placement) any { return &p.EndReason }),
}

// PlaceTasks places each still-queued task and opens its ledger interval in
// the same transaction. It works in batches: one UPDATE … RETURNING per pool
// and reason for the tasks, one multi-row INSERT for the intervals.
func (q *queries) PlaceTasks(ctx context.Context, tenantID string, ps []*model.Placement, reason func(*model.Placement) string) ([]string, error) {
	for _, p := range ps {
		if p.TenantID != tenantID {
			return nil, fmt.Errorf("place task %s: placement of tenant %s in a pass of tenant %s", p.TaskID, p.TenantID, tenantID)
		}
	}
	type key struct {
		pool, reason string
		at           int64
	}
	var order []key
	batches := map[key][]*model.Placement{}
	for _, p := range ps {
		k := key{p.PoolID, reason(p), sqlbase.Micros(p.StartedAt)}
		if _, ok := batches[k]; !ok {
			order = append(order, k)
		}
		batches[k] = append(batches[k], p)
	}
	placed := make([]string, 0, len(ps))
	err := q.atomic(ctx, func(q *queries) error {
		done := make(map[string]bool, len(ps))
		for _, k := range order {
			batch := batches[k]
			for start := 0; start < len(batch); start += sqlbase.BatchRows {
				part := batch[start:min(len(batch), start+sqlbase.BatchRows)]
				args := []any{string(model.TaskPlaced), k.pool, k.at, k.reason, k.at, tenantID, string(model.TaskQueued)}
				for _, p := range part {
					args = append(args, p.TaskID)
				}
				rows, err := q.Query(ctx, `UPDATE tasks SET status = ?, pool_id = ?, placed_at = ?, reason = ?, updated_at = ?
					WHERE tenant_id = ? AND status = ? AND id IN (`+sqlbase.Placeholders(len(part))+`) RETURNING id`, args...)
				if err != nil {
					return fmt.Errorf("place tasks: %w", err)
				}
				for rows.Next() {
					var id string
					if err := rows.Scan(&id); err != nil {
						rows.Close()
						return fmt.Errorf("place tasks: %w", err)
					}
					done[id] = true
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return fmt.Errorf("place tasks: %w", err)
				}
			}
		}
		// Tasks aborted since the snapshot were not updated: no interval.
		var open []*model.Placement
		for _, p := range ps {
			if done[p.TaskID] {
				if p.ID == "" {
					p.ID = model.NewID()
				}
				open = append(open, p)
				placed = append(placed, p.TaskID)
			}
		}
		return sqlbase.InsertBatches(ctx, q.Q, "open ledger intervals", `INSERT INTO placements (`+placementTable.List()+`) VALUES `,
			len(placementTable), len(open), func(i int) []any { return placementTable.Values(open[i]) })
	})
	if err != nil {
		return nil, err
	}
	return placed, nil
}

// PreemptTasks requeues each task still placed or running, keeping its
// queue order, and closes its ledger interval in the same transaction; the
// task's reason and the interval's end reason are the preemption's reason.
func (q *queries) PreemptTasks(ctx context.Context, tenantID string, ps []store.Preemption, at time.Time) ([]string, error) {
	done := make([]string, 0, len(ps))
	err := q.atomic(ctx, func(q *queries) error {
		for _, p := range ps {
			from := string(model.TaskRunning)
			if p.OnlyPlaced {
				from = string(model.TaskPlaced)
			}
			n, err := q.Write(ctx, "preempt task "+p.TaskID, store.ErrNotFound,
				`UPDATE tasks SET status = ?, pool_id = '', placed_at = NULL, lease_expires_at = NULL, reason = ?, updated_at = ?
				WHERE tenant_id = ? AND id = ? AND status IN (?, ?)`,
				string(model.TaskQueued), p.Reason, sqlbase.Micros(at), tenantID, p.TaskID, string(model.TaskPlaced), from)
			if err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			if err := q.endPlacement(ctx, tenantID, p.TaskID, at, p.Reason); err != nil {
				return err
			}
			done = append(done, p.TaskID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// EndPlacement closes a task's open ledger interval, if it has one.
func (q *queries) EndPlacement(ctx context.Context, tenantID, taskID string, at time.Time, reason string) error {
	return q.endPlacement(ctx, tenantID, taskID, at, reason)
}

func (q *queries) endPlacement(ctx context.Context, tenantID, taskID string, at time.Time, reason string) error {
	// An interval never ends before it starts, even with clocks of
	// several replicas a little apart.
	_, err := q.Write(ctx, "close ledger interval of task "+taskID, store.ErrNotFound,
		`UPDATE placements SET ended_at = CASE WHEN started_at > ? THEN started_at ELSE ? END, end_reason = ?
		WHERE tenant_id = ? AND task_id = ? AND ended_at IS NULL`,
		sqlbase.Micros(at), sqlbase.Micros(at), reason, tenantID, taskID)
	return err
}

// ListPlacements lists ledger intervals overlapping [From, To), oldest
// first.
func (q *queries) ListPlacements(ctx context.Context, tenantID string, f store.PlacementFilter) ([]*model.Placement, error) {
	query := `SELECT ` + placementTable.List() + ` FROM placements WHERE tenant_id = ?`
	args := []any{tenantID}
	if !f.To.IsZero() {
		query += ` AND started_at < ?`
		args = append(args, sqlbase.Micros(f.To))
	}
	if !f.From.IsZero() {
		query += ` AND (ended_at IS NULL OR ended_at > ?)`
		args = append(args, sqlbase.Micros(f.From))
	}
	if f.OpenOnly {
		query += ` AND ended_at IS NULL`
	}
	if f.TaskID != "" {
		query += ` AND task_id = ?`
		args = append(args, f.TaskID)
	}
	if len(f.PolicyIDs) > 0 {
		query += ` AND policy_id IN (` + sqlbase.Placeholders(len(f.PolicyIDs)) + `)`
		for _, id := range f.PolicyIDs {
			args = append(args, id)
		}
	}
	query += ` ORDER BY started_at, id`
	return sqlbase.GetAll(ctx, q.Q, "list ledger intervals", placementTable.Scan, query, args...)
}

// usageDimensions maps a dimension to its id and name columns. GPU work
// has no alias or model: it falls under an empty key there (see
// groupColumns).
var usageDimensions = map[string][2]string{
	store.ByUser:            {"user_id", "user_name"},
	store.ByProject:         {"project_id", "project_name"},
	store.ByGroup:           {"group_id", "group_name"},
	store.ByPool:            {"pool_id", "pool_name"},
	store.ByGPUClass:        {"gpu_class_id", "gpu_class_name"},
	store.ByComputeResource: {"compute_resource_id", "compute_resource_name"},
	store.ByProfile:         {"profile_id", "profile_name"},
	store.ByAlias:           {},
	store.ByModel:           {},
}

// ledgerGroupBy gives the select list and GROUP BY columns of a ledger sum
// grouped by dims. A dimension the ledger has no column for selects an
// empty key and groups nothing, so that every grouping of a ledger adds up
// to the same total rather than dropping what it cannot place.
func ledgerGroupBy(what string, cols map[string][2]string, dims []string) (selects, idCols []string, err error) {
	for _, d := range dims {
		c, ok := cols[d]
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("%s: unknown dimension %q", what, d)
		case c[0] == "":
			selects = append(selects, "''", "''")
		default:
			idCols = append(idCols, c[0])
			selects = append(selects, c[0], "MAX("+c[1]+")")
		}
	}
	return selects, idCols, nil
}

// SumUsage adds up the ledger over [From, To). Each interval is cut to the
// range (an open one runs to Now): GPU-hours are size × duration in whole
// milliseconds, cost GPU-hours × the price at placement, and budget hours
// duration × weight less the time the engine was disabled, rounded down to
// the microsecond per interval exactly as engine.BudgetUsed charges budgets,
// so that the ledger and the policy view never disagree. Sums are exact
// integers in millionths, except cost. An interval without a currency (no
// price) costs nothing and does not make its row's currency "mixed".
func (q *queries) SumUsage(ctx context.Context, tenantID string, u store.UsageQuery) ([]store.UsageRow, error) {
	if !u.To.After(u.From) {
		return nil, fmt.Errorf("sum usage: the range must end after it starts")
	}
	selects, idCols, err := ledgerGroupBy("sum usage", usageDimensions, u.By)
	if err != nil {
		return nil, err
	}
	now, from, to := sqlbase.Micros(u.Now), sqlbase.Micros(u.From), sqlbase.Micros(u.To)
	// held is the interval's time in range less the engine pauses in it (an
	// open pause runs to Now); pauses never overlap one another.
	inner := `SELECT w.*, w.e - w.s - CAST(COALESCE((SELECT SUM(
			CASE WHEN COALESCE(p.ended_at, ?) < w.e THEN COALESCE(p.ended_at, ?) ELSE w.e END -
			CASE WHEN p.started_at > w.s THEN p.started_at ELSE w.s END)
		FROM engine_pauses p WHERE p.tenant_id = w.tenant_id AND p.started_at < w.e AND COALESCE(p.ended_at, ?) > w.s), 0) AS BIGINT) AS held
		FROM (SELECT x.*,
			CASE WHEN x.started_at < ? THEN ? ELSE x.started_at END AS s,
			CASE WHEN COALESCE(x.ended_at, ?) > ? THEN ? ELSE COALESCE(x.ended_at, ?) END AS e
		FROM placements x WHERE x.tenant_id = ? AND x.started_at < ? AND COALESCE(x.ended_at, ?) > ?`
	args := []any{now, now, now, from, from, now, to, to, now, tenantID, to, now, from}
	if u.UserID != "" {
		inner += ` AND x.user_id = ?`
		args = append(args, u.UserID)
	}
	if u.ProjectID != "" {
		inner += ` AND x.project_id = ?`
		args = append(args, u.ProjectID)
	}
	if len(u.GroupIDs) > 0 {
		inner += ` AND x.group_id IN (` + sqlbase.Placeholders(len(u.GroupIDs)) + `)`
		for _, g := range u.GroupIDs {
			args = append(args, g)
		}
	}
	inner += `) w WHERE w.e > w.s`
	query := `SELECT ` + strings.Join(append(selects,
		`SUM(size_milli * ((e - s) / 1000) / 3600)`,
		`SUM((held / 3600000) * weight_milli + (held % 3600000) * weight_milli / 3600000)`,
		`SUM(size_milli * 1.0 * ((e - s) / 1000) * price_micros) / 3600000000000000.0`,
		`MIN(NULLIF(currency, ''))`, `MAX(NULLIF(currency, ''))`), ", ") +
		` FROM (` + inner + `) v`
	if len(idCols) > 0 {
		query += ` GROUP BY ` + strings.Join(idCols, ", ") + ` ORDER BY ` + strings.Join(idCols, ", ")
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sum usage: %w", err)
	}
	defer rows.Close()
	out := []store.UsageRow{}
	for rows.Next() {
		keys := make([]store.UsageKey, len(u.By))
		dest := make([]any, 0, 2*len(u.By)+5)
		for i := range keys {
			keys[i].Dimension = u.By[i]
			dest = append(dest, &keys[i].ID, &keys[i].Name)
		}
		var gpu, budget sql.NullInt64
		var cost sql.NullFloat64
		var curMin, curMax sql.NullString
		dest = append(dest, &gpu, &budget, &cost, &curMin, &curMax)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("sum usage: %w", err)
		}
		if !gpu.Valid {
			continue // no interval in range: SUM over nothing
		}
		row := store.UsageRow{Keys: keys, MicroGPUHours: gpu.Int64, MicroBudgetHours: budget.Int64, Cost: cost.Float64, Currency: curMin.String}
		if curMin.String != curMax.String {
			row.Currency = "mixed"
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sum usage: %w", err)
	}
	return out, nil
}

// queueStateTable is the queue_states table: why a compute resource's head waits.
var queueStateTable = sqlbase.Table[model.QueueState]{
	sqlbase.C("tenant_id", func(s *model.QueueState) any { return &s.TenantID }),
	sqlbase.C("compute_resource_id", func(s *model.QueueState) any { return &s.ComputeResourceID }),
	sqlbase.C("task_id", func(s *model.QueueState) any { return &s.TaskID }),
	sqlbase.C("constraint_code", func(s *model.QueueState) any { return &s.Constraint }),
	sqlbase.C("reason", func(s *model.QueueState) any { return &s.Reason }),
	sqlbase.C("until_at", func(s *model.QueueState) any { return sqlbase.TimePtr(&s.Until) }),
	sqlbase.C("updated_at", func(s *model.QueueState) any { return sqlbase.Time(&s.UpdatedAt) }),
}

// PutQueueState records why a compute resource's head waits, replacing the
// previous state.
func (q *queries) PutQueueState(ctx context.Context, s *model.QueueState) error {
	_, err := q.Write(ctx, "put queue state of "+s.ComputeResourceID, store.ErrNotFound,
		queueStateTable.Insert("queue_states")+`
		ON CONFLICT (tenant_id, compute_resource_id) DO UPDATE SET task_id = excluded.task_id,
			constraint_code = excluded.constraint_code, reason = excluded.reason, until_at = excluded.until_at,
			updated_at = excluded.updated_at`,
		queueStateTable.Values(s)...)
	return err
}

// DeleteQueueState forgets a compute resource's state (nothing waits).
func (q *queries) DeleteQueueState(ctx context.Context, tenantID, computeResourceID string) error {
	_, err := q.Write(ctx, "delete queue state of "+computeResourceID, store.ErrNotFound,
		`DELETE FROM queue_states WHERE tenant_id = ? AND compute_resource_id = ?`, tenantID, computeResourceID)
	return err
}

// GetQueueState returns why a compute resource's head waits.
func (q *queries) GetQueueState(ctx context.Context, tenantID, computeResourceID string) (*model.QueueState, error) {
	return sqlbase.GetOne(ctx, q.Q, "get queue state of "+computeResourceID, queueStateTable.Scan,
		`SELECT `+queueStateTable.List()+` FROM queue_states WHERE tenant_id = ? AND compute_resource_id = ?`, tenantID, computeResourceID)
}

// ListQueueStates lists a tenant's queue states by compute resource id.
func (q *queries) ListQueueStates(ctx context.Context, tenantID string) ([]*model.QueueState, error) {
	return sqlbase.GetAll(ctx, q.Q, "list queue states", queueStateTable.Scan,
		`SELECT `+queueStateTable.List()+` FROM queue_states WHERE tenant_id = ? ORDER BY compute_resource_id`, tenantID)
}

// enginePauseTable is the engine_pauses table: when a tenant's engine was disabled.
var enginePauseTable = sqlbase.Table[model.EnginePause]{
	sqlbase.C("tenant_id", func(p *model.EnginePause) any { return &p.TenantID }),
	sqlbase.C("started_at", func(p *model.EnginePause) any { return sqlbase.Time(&p.StartedAt) }),
	sqlbase.C("ended_at", func(p *model.EnginePause) any { return sqlbase.TimePtr(&p.EndedAt) }),
	sqlbase.C("by_user_id", func(p *model.EnginePause) any { return &p.ByUserID }),
	sqlbase.C("by_name", func(p *model.EnginePause) any { return &p.ByName }),
}

// StartEnginePause records that the engine is disabled from p.StartedAt.
func (q *queries) StartEnginePause(ctx context.Context, p *model.EnginePause) error {
	_, err := q.Write(ctx, "disable the engine of tenant "+p.TenantID, store.ErrNotFound,
		enginePauseTable.Insert("engine_pauses"), enginePauseTable.Values(p)...)
	return err
}

// EndEnginePause closes the open pause of a tenant.
func (q *queries) EndEnginePause(ctx context.Context, tenantID string, at time.Time) error {
	return q.WriteOne(ctx, "enable the engine of tenant "+tenantID, store.ErrNotFound,
		`UPDATE engine_pauses SET ended_at = CASE WHEN started_at > ? THEN started_at ELSE ? END
		WHERE tenant_id = ? AND ended_at IS NULL`, sqlbase.Micros(at), sqlbase.Micros(at), tenantID)
}

// ListEnginePauses lists the pauses overlapping [from, to), oldest first.
func (q *queries) ListEnginePauses(ctx context.Context, tenantID string, from, to time.Time) ([]*model.EnginePause, error) {
	return sqlbase.GetAll(ctx, q.Q, "list engine pauses", enginePauseTable.Scan, `SELECT `+enginePauseTable.List()+` FROM engine_pauses
		WHERE tenant_id = ? AND started_at < ? AND (ended_at IS NULL OR ended_at > ?) ORDER BY started_at`,
		tenantID, sqlbase.Micros(to), sqlbase.Micros(from))
}

// AcquireLease takes the lease when it is free or expired, or renews it for
// its holder, in one statement, so two replicas cannot both win.
func (q *queries) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	what := "acquire lease " + name
	exp := sqlbase.Micros(now.Add(ttl))
	n, err := q.Write(ctx, what, store.ErrNotFound,
		`UPDATE leases SET holder = ?, expires_at = ? WHERE name = ? AND (holder = ? OR expires_at <= ?)`,
		holder, exp, name, holder, sqlbase.Micros(now))
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	// Free: take it, unless another replica took it in between.
	n, err = q.Write(ctx, what, store.ErrNotFound,
		`INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`, name, holder, exp)
	return n == 1, err
}

// ReleaseLease gives up the lease if holder holds it.
func (q *queries) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := q.Write(ctx, "release lease "+name, store.ErrNotFound, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder)
	return err
}
