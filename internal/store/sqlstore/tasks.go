package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// taskInsertColumns are the columns CreateTask writes; taskColumns, what
// every read returns, add the idle limits' columns, which only their own
// writes (TouchAppActivity, SetAppIdleWarned) and a claim change, so an
// UpdateTask of an older copy never moves them back.
const taskInsertColumns = `id, tenant_id, project_id, owner_id, compute_resource_id, policy_id, profile_id, group_id, name, spec,
	size_nodes, size_per_node_milli, status, reason, queue_seq, pool_id, cloned_from_id,
	created_at, updated_at, placed_at, finished_at,
	worker_id, attempt, lease_expires_at, retries, started_at, exit_code, outputs, app_address, tags`

const taskColumns = taskInsertColumns + `, app_active_at, app_warned_at, app_allow, app_refused`

func scanTask(r sqlbase.Scanner) (*model.Task, error) {
	var t model.Task
	var project sql.NullString
	var spec, status string
	var perNode, created, updated int64
	var placed, finished, lease, started, exit, active, warned sql.NullInt64
	var outputs, tags string
	if err := r.Scan(&t.ID, &t.TenantID, &project, &t.OwnerID, &t.ComputeResourceID, &t.PolicyID, &t.ProfileID,
		&t.GroupID, &t.Name, &spec, &t.Size.Nodes, &perNode, &status, &t.Reason, &t.QueueSeq, &t.PoolID,
		&t.ClonedFromID, &created, &updated, &placed, &finished,
		&t.Run.WorkerID, &t.Run.Attempt, &lease, &t.Run.Retries, &started, &exit, &outputs, &t.Run.AppAddress, &tags, &active, &warned,
		&t.Run.AppAllow, &t.Run.AppRefused); err != nil {
		return nil, err
	}
	t.Run.LeaseExpiresAt, t.Run.StartedAt = sqlbase.NullTime(lease), sqlbase.NullTime(started)
	t.Run.AppActiveAt, t.Run.AppWarnedAt = sqlbase.NullTime(active), sqlbase.NullTime(warned)
	if exit.Valid {
		code := int(exit.Int64)
		t.Run.ExitCode = &code
	}
	if outputs != "" && outputs != "[]" {
		if err := json.Unmarshal([]byte(outputs), &t.Run.Outputs); err != nil {
			return nil, fmt.Errorf("task %s outputs: decode JSON: %w", t.ID, err)
		}
	}
	if tags != "" && tags != "[]" {
		if err := json.Unmarshal([]byte(tags), &t.Tags); err != nil {
			return nil, fmt.Errorf("task %s tags: decode JSON: %w", t.ID, err)
		}
	}
	if spec != "" && spec != "null" {
		if err := json.Unmarshal([]byte(spec), &t.Spec); err != nil {
			return nil, fmt.Errorf("task %s spec: decode JSON: %w", t.ID, err)
		}
	}
	t.ProjectID = project.String
	t.Size.PerNode = model.MilliGPU(perNode)
	t.Status = model.TaskStatus(status)
	t.CreatedAt, t.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	t.PlacedAt, t.FinishedAt = sqlbase.NullTime(placed), sqlbase.NullTime(finished)
	return &t, nil
}

// CreateTask inserts a task. When t.QueueSeq is 0 it takes the next queue
// sequence number, so tasks enqueued later sort later, also when they are
// enqueued concurrently. A caller-supplied QueueSeq (an import) is kept, and
// the counter moves past it so that later tasks still sort after it. Queue
// sequence numbers are unique in a tenant (ErrConflict).
//
// The project (when set), the owner and the compute resource must exist in
// the task's tenant (ErrNotFound). PolicyID, ProfileID, GroupID, PoolID and
// ClonedFromID are copies kept for queries and history, not references: they
// do not stop those objects from being deleted.
//
// The task's Spec is stored as JSON; its empty slices and maps read back as
// nil, following the spec's omitempty tags.
func (q *queries) CreateTask(ctx context.Context, t *model.Task) error {
	what := fmt.Sprintf("create task %q", t.Name)
	spec, err := sqlbase.MarshalJSON(t.Spec, "{}")
	if err != nil {
		return fmt.Errorf("%s: encode spec: %w", what, err)
	}
	undo := sqlbase.AssignID(&t.ID)
	assignSeq := t.QueueSeq == 0
	err = q.atomic(ctx, func(q *queries) error {
		if assignSeq {
			seq, err := q.Dialect().NextSeq(ctx, q.Conn(), SeqTaskQueue)
			if err != nil {
				return fmt.Errorf("%s: next queue sequence number: %w", what, err)
			}
			t.QueueSeq = seq
		} else if err := q.Dialect().AdvanceSeq(ctx, q.Conn(), SeqTaskQueue, t.QueueSeq); err != nil {
			return fmt.Errorf("%s: advance queue sequence: %w", what, err)
		}
		outputs, err := sqlbase.MarshalJSON(t.Run.Outputs, "[]")
		if err != nil {
			return fmt.Errorf("%s: encode outputs: %w", what, err)
		}
		tags, err := sqlbase.MarshalJSON(t.Tags, "[]")
		if err != nil {
			return fmt.Errorf("%s: encode tags: %w", what, err)
		}
		_, err = q.Write(ctx, what, store.ErrNotFound,
			`INSERT INTO tasks (`+taskInsertColumns+`) VALUES (`+sqlbase.Placeholders(30)+`)`,
			t.ID, t.TenantID, sqlbase.NullString(t.ProjectID), t.OwnerID, t.ComputeResourceID, t.PolicyID, t.ProfileID,
			t.GroupID, t.Name, spec, t.Size.Nodes, int64(t.Size.PerNode), string(t.Status), t.Reason, t.QueueSeq,
			t.PoolID, t.ClonedFromID, sqlbase.Micros(t.CreatedAt), sqlbase.Micros(t.UpdatedAt),
			sqlbase.NullMicros(t.PlacedAt), sqlbase.NullMicros(t.FinishedAt),
			t.Run.WorkerID, t.Run.Attempt, sqlbase.NullMicros(t.Run.LeaseExpiresAt), t.Run.Retries, sqlbase.NullMicros(t.Run.StartedAt),
			sqlbase.NullInt(t.Run.ExitCode), outputs, t.Run.AppAddress, tags)
		return err
	})
	if err != nil {
		undo()
		if assignSeq {
			t.QueueSeq = 0
		}
	}
	return err
}

// UpdateTask writes what changes over a task's life: name, spec, size,
// status, reason, pool, UpdatedAt, PlacedAt, FinishedAt and the run. What is fixed at
// enqueue (the project, owner, compute resource and the copies taken from it,
// QueueSeq, ClonedFromID, Tags and CreatedAt) is left as it is.
func (q *queries) UpdateTask(ctx context.Context, t *model.Task) error {
	what := "update task " + t.ID
	spec, err := sqlbase.MarshalJSON(t.Spec, "{}")
	if err != nil {
		return fmt.Errorf("%s: encode spec: %w", what, err)
	}
	outputs, err := sqlbase.MarshalJSON(t.Run.Outputs, "[]")
	if err != nil {
		return fmt.Errorf("%s: encode outputs: %w", what, err)
	}
	return q.WriteOne(ctx, what, store.ErrNotFound,
		`UPDATE tasks SET name = ?, spec = ?, size_nodes = ?, size_per_node_milli = ?, status = ?, reason = ?,
			pool_id = ?, updated_at = ?, placed_at = ?, finished_at = ?,
			worker_id = ?, attempt = ?, lease_expires_at = ?, retries = ?, started_at = ?, exit_code = ?, outputs = ?, app_address = ?,
			app_allow = ?, app_refused = ?
		WHERE tenant_id = ? AND id = ?`,
		t.Name, spec, t.Size.Nodes, int64(t.Size.PerNode), string(t.Status), t.Reason,
		t.PoolID, sqlbase.Micros(t.UpdatedAt), sqlbase.NullMicros(t.PlacedAt), sqlbase.NullMicros(t.FinishedAt),
		t.Run.WorkerID, t.Run.Attempt, sqlbase.NullMicros(t.Run.LeaseExpiresAt), t.Run.Retries, sqlbase.NullMicros(t.Run.StartedAt),
		sqlbase.NullInt(t.Run.ExitCode), outputs, t.Run.AppAddress, t.Run.AppAllow, t.Run.AppRefused, t.TenantID, t.ID)
}

func (q *queries) GetTask(ctx context.Context, tenantID, id string) (*model.Task, error) {
	return sqlbase.GetOne(ctx, q.Q, "get task "+id, scanTask,
		`SELECT `+taskColumns+` FROM tasks WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// taskWhere builds the WHERE clause of a task filter, as store.TaskFilter
// documents it. The group rule applies when RestrictToGroups is set or
// GroupIDs is not empty: it keeps tasks of the groups and, when
// VisibleToUserID is set, that user's own tasks. VisibleToUserID without the
// group rule does not filter. An empty rule (restricted, no groups, no user)
// keeps nothing.
func taskWhere(tenantID string, f store.TaskFilter) (string, []any) {
	var sb strings.Builder
	args := []any{tenantID}
	sb.WriteString(` WHERE tenant_id = ?`)
	if len(f.Statuses) > 0 {
		sb.WriteString(` AND status IN (` + sqlbase.Placeholders(len(f.Statuses)) + `)`)
		for _, s := range f.Statuses {
			args = append(args, string(s))
		}
	}
	if f.ComputeResourceID != "" {
		sb.WriteString(` AND compute_resource_id = ?`)
		args = append(args, f.ComputeResourceID)
	}
	if f.ProjectID != "" {
		sb.WriteString(` AND project_id = ?`)
		args = append(args, f.ProjectID)
	}
	if f.OwnerID != "" {
		sb.WriteString(` AND owner_id = ?`)
		args = append(args, f.OwnerID)
	}
	if f.PoolID != "" {
		sb.WriteString(` AND pool_id = ?`)
		args = append(args, f.PoolID)
	}
	vis, vargs := sqlbase.VisibleTo("", f.RestrictToGroups, f.GroupIDs, f.VisibleToUserID)
	sb.WriteString(vis)
	args = append(args, vargs...)
	return sb.String(), args
}

// CountTasks counts the tasks that match f.
func (q *queries) CountTasks(ctx context.Context, tenantID string, f store.TaskFilter) (int, error) {
	where, args := taskWhere(tenantID, f)
	var n int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM tasks`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count tasks: %w", err)
	}
	return n, nil
}

// CountQueuedAhead counts the queued tasks of a compute resource with a
// smaller QueueSeq than seq: a task's place in its queue.
func (q *queries) CountQueuedAhead(ctx context.Context, tenantID, computeResourceID string, seq int64) (int, error) {
	var n int
	if err := q.QueryRow(ctx,
		`SELECT COUNT(*) FROM tasks
		WHERE tenant_id = ? AND compute_resource_id = ? AND status = ? AND queue_seq < ?`,
		tenantID, computeResourceID, string(model.TaskQueued), seq).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued ahead in compute resource %s: %w", computeResourceID, err)
	}
	return n, nil
}

// ListFinishedTasks lists a project's tasks with a tag that finished in a
// status between since (exclusive) and until. Tags hold no quotes, so the
// tag's quoted form matches it in the JSON list exactly; its LIKE
// wildcards are escaped.
func (q *queries) ListFinishedTasks(ctx context.Context, tenantID, projectID, tag string, status model.TaskStatus, since, until time.Time, limit int) ([]*model.Task, error) {
	like := `%"` + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(tag) + `"%`
	return sqlbase.GetAll(ctx, q.Q, "list the finished tasks of project "+projectID, scanTask,
		`SELECT `+taskColumns+` FROM tasks WHERE tenant_id = ? AND project_id = ? AND finished_at > ? AND finished_at <= ? AND status = ?
			AND tags LIKE ? ESCAPE '\'
		ORDER BY finished_at, id LIMIT ?`,
		tenantID, projectID, sqlbase.Micros(since), sqlbase.Micros(until), string(status), like, limit)
}
