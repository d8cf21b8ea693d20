package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// taskTable is the tasks table as every read returns it. CreateTask
// writes taskInsert, all but the idle limits' columns (app_*), which only
// their own writes (SetAppAddress, TouchAppActivity, SetAppIdleWarned) and
// a claim change, so an UpdateTask of an older copy never moves them back
// (it writes taskUpdate, what changes over a task's life).
var taskTable = sqlbase.Table[model.Task]{
	sqlbase.C("id", func(t *model.Task) any { return &t.ID }),
	sqlbase.C("tenant_id", func(t *model.Task) any { return &t.TenantID }),
	sqlbase.C("project_id", func(t *model.Task) any { return sqlbase.Ref(&t.ProjectID) }),
	sqlbase.C("owner_id", func(t *model.Task) any { return &t.OwnerID }),
	sqlbase.C("compute_resource_id", func(t *model.Task) any { return &t.ComputeResourceID }),
	sqlbase.C("policy_id", func(t *model.Task) any { return &t.PolicyID }),
	sqlbase.C("profile_id", func(t *model.Task) any { return &t.ProfileID }),
	sqlbase.C("group_id", func(t *model.Task) any { return &t.GroupID }),
	sqlbase.C("name", func(t *model.Task) any { return &t.Name }),
	sqlbase.C("spec", func(t *model.Task) any { return sqlbase.JSON(&t.Spec, "{}") }),
	sqlbase.C("size_nodes", func(t *model.Task) any { return &t.Size.Nodes }),
	sqlbase.C("size_per_node_milli", func(t *model.Task) any { return sqlbase.Int(&t.Size.PerNode) }),
	sqlbase.C("status", func(t *model.Task) any { return sqlbase.Str(&t.Status) }),
	sqlbase.C("reason", func(t *model.Task) any { return &t.Reason }),
	sqlbase.C("queue_seq", func(t *model.Task) any { return &t.QueueSeq }),
	sqlbase.C("queue_rank", func(t *model.Task) any { return &t.QueueRank }),
	sqlbase.C("queue_order", func(t *model.Task) any { return &t.QueueOrder }),
	sqlbase.C("pool_id", func(t *model.Task) any { return &t.PoolID }),
	sqlbase.C("cloned_from_id", func(t *model.Task) any { return &t.ClonedFromID }),
	sqlbase.C("created_at", func(t *model.Task) any { return sqlbase.Time(&t.CreatedAt) }),
	sqlbase.C("updated_at", func(t *model.Task) any { return sqlbase.Time(&t.UpdatedAt) }),
	sqlbase.C("placed_at", func(t *model.Task) any { return sqlbase.TimePtr(&t.PlacedAt) }),
	sqlbase.C("finished_at", func(t *model.Task) any { return sqlbase.TimePtr(&t.FinishedAt) }),
	sqlbase.C("worker_id", func(t *model.Task) any { return &t.Run.WorkerID }),
	sqlbase.C("attempt", func(t *model.Task) any { return &t.Run.Attempt }),
	sqlbase.C("lease_expires_at", func(t *model.Task) any { return sqlbase.TimePtr(&t.Run.LeaseExpiresAt) }),
	sqlbase.C("retries", func(t *model.Task) any { return &t.Run.Retries }),
	sqlbase.C("started_at", func(t *model.Task) any { return sqlbase.TimePtr(&t.Run.StartedAt) }),
	sqlbase.C("exit_code", func(t *model.Task) any { return sqlbase.IntPtr(&t.Run.ExitCode) }),
	sqlbase.C("outputs", func(t *model.Task) any { return sqlbase.JSON(&t.Run.Outputs, "[]") }),
	sqlbase.C("app_address", func(t *model.Task) any { return &t.Run.AppAddress }),
	sqlbase.C("tags", func(t *model.Task) any { return sqlbase.JSON(&t.Tags, "[]") }),
	sqlbase.C("app_active_at", func(t *model.Task) any { return sqlbase.TimePtr(&t.Run.AppActiveAt) }),
	sqlbase.C("app_warned_at", func(t *model.Task) any { return sqlbase.TimePtr(&t.Run.AppWarnedAt) }),
	sqlbase.C("app_allow", func(t *model.Task) any { return &t.Run.AppAllow }),
	sqlbase.C("app_refused", func(t *model.Task) any { return &t.Run.AppRefused }),
}

var (
	taskInsert = taskTable.Without("app_active_at", "app_warned_at", "app_allow", "app_refused")
	taskUpdate = taskTable.Only("name", "spec", "size_nodes", "size_per_node_milli", "status", "reason",
		"pool_id", "updated_at", "placed_at", "finished_at", "worker_id", "attempt", "lease_expires_at", "retries",
		"started_at", "exit_code", "outputs", "app_address", "app_allow", "app_refused")
)

// CreateTask inserts a task. When t.QueueSeq is 0 it takes the next queue
// sequence number, so tasks enqueued later sort later, also when they are
// enqueued concurrently. A caller-supplied QueueSeq (an import) is kept, and
// the counter moves past it so that later tasks still sort after it. Queue
// sequence numbers are unique in a tenant (ErrConflict). The task's queue
// order starts as its queue sequence number (when not given), and its queue
// rank is its project's place in its team's project priority, read here so
// that every way a task is made ranks it the same.
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
	undo := sqlbase.AssignID(&t.ID)
	assignSeq, assignOrder, rank := t.QueueSeq == 0, t.QueueOrder == 0, t.QueueRank
	err := q.atomic(ctx, func(q *queries) error {
		if assignSeq {
			if next, again := q.Dialect().SeqExpr(SeqTaskQueue); next != "" {
				return q.insertTaskNumbered(ctx, what, t, next, again, assignOrder)
			}
			seq, err := q.Dialect().NextSeq(ctx, q.Conn(), SeqTaskQueue)
			if err != nil {
				return fmt.Errorf("%s: next queue sequence number: %w", what, err)
			}
			t.QueueSeq = seq
		} else if err := q.Dialect().AdvanceSeq(ctx, q.Conn(), SeqTaskQueue, t.QueueSeq); err != nil {
			return fmt.Errorf("%s: advance queue sequence: %w", what, err)
		}
		if assignOrder {
			t.QueueOrder = t.QueueSeq
		}
		r, err := q.projectRank(ctx, t.TenantID, t.GroupID, t.ProjectID)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		t.QueueRank = r
		_, err = q.Write(ctx, what, store.ErrNotFound, taskInsert.Insert("tasks"), taskInsert.Values(t)...)
		return err
	})
	if err != nil {
		undo()
		if assignSeq {
			t.QueueSeq = 0
		}
		if assignOrder {
			t.QueueOrder = 0
		}
		t.QueueRank = rank
	}
	return err
}

// insertTaskNumbered writes a new task in one statement where the dialect
// takes sequence numbers inside one (PostgreSQL): the INSERT takes the
// queue sequence number (next), the queue order (the same number, again,
// unless given) and the rank of the task's project in its team's priority,
// as projectRank reads it. Three round trips become one on an enqueue.
func (q *queries) insertTaskNumbered(ctx context.Context, what string, t *model.Task, next, again string, assignOrder bool) error {
	rest := taskInsert.Without("queue_seq", "queue_order", "queue_rank")
	args := rest.Values(t)
	order := again
	if !assignOrder {
		order = "?"
		args = append(args, t.QueueOrder)
	}
	rank := "?"
	if t.GroupID != "" && t.ProjectID != "" {
		rank = `COALESCE((SELECT position FROM project_priorities WHERE tenant_id = ? AND group_id = ? AND project_id = ?), ?)`
		args = append(args, t.TenantID, t.GroupID, t.ProjectID)
	}
	args = append(args, model.QueueRankUnlisted)
	query := `INSERT INTO tasks (` + rest.List() + `, queue_seq, queue_order, queue_rank) VALUES (` +
		sqlbase.Placeholders(len(rest)) + `, ` + next + `, ` + order + `, ` + rank + `) RETURNING queue_seq, queue_order, queue_rank`
	if err := q.QueryRow(ctx, query, args...).Scan(&t.QueueSeq, &t.QueueOrder, &t.QueueRank); err != nil {
		return q.MapErr(err, what, store.ErrNotFound)
	}
	return nil
}

// UpdateTask writes what changes over a task's life: name, spec, size,
// status, reason, pool, UpdatedAt, PlacedAt, FinishedAt and the run. What is fixed at
// enqueue (the project, owner, compute resource and the copies taken from it,
// QueueSeq, ClonedFromID, Tags and CreatedAt) is left as it is.
func (q *queries) UpdateTask(ctx context.Context, t *model.Task) error {
	return q.WriteOne(ctx, "update task "+t.ID, store.ErrNotFound,
		`UPDATE tasks SET `+taskUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, taskUpdate.Values(t, t.TenantID, t.ID)...)
}

func (q *queries) GetTask(ctx context.Context, tenantID, id string) (*model.Task, error) {
	return sqlbase.GetOne(ctx, q.Q, "get task "+id, taskTable.Scan,
		`SELECT `+taskTable.List()+` FROM tasks WHERE tenant_id = ? AND id = ?`, tenantID, id)
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

func (q *queries) CountQueuedByGroup(ctx context.Context, tenantID string) (map[string]int, error) {
	rows, err := q.Query(ctx, `SELECT group_id, COUNT(*) FROM tasks WHERE tenant_id = ? AND status = ? GROUP BY group_id`,
		tenantID, string(model.TaskQueued))
	if err != nil {
		return nil, fmt.Errorf("count queued tasks by group: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var group string
		var n int
		if err := rows.Scan(&group, &n); err != nil {
			return nil, fmt.Errorf("count queued tasks by group: %w", err)
		}
		out[group] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count queued tasks by group: %w", err)
	}
	return out, nil
}

// CountQueuedAhead counts the queued tasks of a compute resource ahead of
// the place at in queue order: a task's place in its queue.
func (q *queries) CountQueuedAhead(ctx context.Context, tenantID, computeResourceID string, at store.QueuePlace) (int, error) {
	var n int
	if err := q.QueryRow(ctx,
		`SELECT COUNT(*) FROM tasks
		WHERE tenant_id = ? AND compute_resource_id = ? AND status = ? AND `+aheadOf,
		append([]any{tenantID, computeResourceID, string(model.TaskQueued)}, placeArgs(at)...)...).Scan(&n); err != nil {
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
	return sqlbase.GetAll(ctx, q.Q, "list the finished tasks of project "+projectID, taskTable.Scan,
		`SELECT `+taskTable.List()+` FROM tasks WHERE tenant_id = ? AND project_id = ? AND finished_at > ? AND finished_at <= ? AND status = ?
			AND tags LIKE ? ESCAPE '\'
		ORDER BY finished_at, id LIMIT ?`,
		tenantID, projectID, sqlbase.Micros(since), sqlbase.Micros(until), string(status), like, limit)
}
