package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// A queue is in (queue_rank, queue_order, queue_seq) order: the project's
// place in its team's priority, then the order a lead may change, then the
// task's creation order, which breaks ties and keeps the order total. The
// row comparisons walk the tasks_queue_order index (migration 0029).
const (
	aheadOf = `(queue_rank, queue_order, queue_seq) < (?, ?, ?)`
	behind  = `(queue_rank, queue_order, queue_seq) > (?, ?, ?)`
	inOrder = ` ORDER BY queue_rank, queue_order, queue_seq`
	reverse = ` ORDER BY queue_rank DESC, queue_order DESC, queue_seq DESC`
)

func placeArgs(p store.QueuePlace) []any { return []any{p.Rank, p.Order, p.Seq} }

// projectRank is a project's place in its group's project priority, or
// model.QueueRankUnlisted.
func (q *queries) projectRank(ctx context.Context, tenantID, groupID, projectID string) (int, error) {
	if groupID == "" || projectID == "" {
		return model.QueueRankUnlisted, nil
	}
	var pos int
	err := q.QueryRow(ctx, `SELECT position FROM project_priorities WHERE tenant_id = ? AND group_id = ? AND project_id = ?`,
		tenantID, groupID, projectID).Scan(&pos)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return model.QueueRankUnlisted, nil
	case err != nil:
		return 0, fmt.Errorf("read the rank of project %s: %w", projectID, err)
	}
	return pos, nil
}

// ListQueued lists a compute resource's queued tasks in queue order.
func (q *queries) ListQueued(ctx context.Context, tenantID, computeResourceID string, limit int) ([]*model.Task, error) {
	query, args := sqlbase.WithLimit(`SELECT `+taskTable.List()+` FROM tasks WHERE tenant_id = ? AND compute_resource_id = ? AND status = ?`+inOrder,
		[]any{tenantID, computeResourceID, string(model.TaskQueued)}, limit)
	return sqlbase.GetAll(ctx, q.Q, "list the queue of compute resource "+computeResourceID, taskTable.Scan, query, args...)
}

// ProjectPriorities lists a group's project priority, first first.
func (q *queries) ProjectPriorities(ctx context.Context, tenantID, groupID string) ([]string, error) {
	return sqlbase.GetAll(ctx, q.Q, "list the project priority of group "+groupID, func(r sqlbase.Scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT project_id FROM project_priorities WHERE tenant_id = ? AND group_id = ? ORDER BY position`, tenantID, groupID)
}

// SetProjectPriorities replaces a group's project priority and ranks its
// unfinished tasks again, as store.Queries documents. Placed and running
// tasks are ranked too, so a task sent back to its queue later waits by
// the priority of the day.
func (q *queries) SetProjectPriorities(ctx context.Context, tenantID, groupID string, projectIDs []string) error {
	what := "set the project priority of group " + groupID
	if len(projectIDs) > model.MaxProjectPriorities {
		return fmt.Errorf("%s: %d projects, at most %d", what, len(projectIDs), model.MaxProjectPriorities)
	}
	return q.atomic(ctx, func(q *queries) error {
		if _, err := q.Write(ctx, what, nil, `DELETE FROM project_priorities WHERE tenant_id = ? AND group_id = ?`, tenantID, groupID); err != nil {
			return err
		}
		for start := 0; start < len(projectIDs); start += sqlbase.BatchRows {
			part := projectIDs[start:min(len(projectIDs), start+sqlbase.BatchRows)]
			var args []any
			values := ""
			for i, id := range part {
				if i > 0 {
					values += ", "
				}
				values += "(?, ?, ?, ?)"
				args = append(args, tenantID, groupID, id, start+i)
			}
			if _, err := q.Write(ctx, what, store.ErrNotFound,
				`INSERT INTO project_priorities (tenant_id, group_id, project_id, position) VALUES `+values, args...); err != nil {
				return err
			}
		}
		_, err := q.Write(ctx, what, nil, `UPDATE tasks SET queue_rank = COALESCE((SELECT pp.position FROM project_priorities pp
				WHERE pp.tenant_id = tasks.tenant_id AND pp.group_id = tasks.group_id AND pp.project_id = tasks.project_id), ?)
			WHERE tenant_id = ? AND group_id = ? AND status IN (?, ?, ?)`,
			model.QueueRankUnlisted, tenantID, groupID, string(model.TaskQueued), string(model.TaskPlaced), string(model.TaskRunning))
		return err
	})
}

// queued is a task's queue and place, as a move reads them.
type queued struct {
	ID, ComputeResourceID string
	Status                model.TaskStatus
	Place                 store.QueuePlace
}

func scanQueued(r sqlbase.Scanner) (queued, error) {
	var t queued
	var status string
	err := r.Scan(&t.ID, &t.ComputeResourceID, &status, &t.Place.Rank, &t.Place.Order, &t.Place.Seq)
	t.Status = model.TaskStatus(status)
	return t, err
}

const queuedColumns = `SELECT id, compute_resource_id, status, queue_rank, queue_order, queue_seq FROM tasks`

// neighbour is the queued task of cr next to at (ahead of it when ahead is
// set), or the queue's first (last) task when at is nil; the task moving
// (except) is passed over. ok is false when there is none.
func (q *queries) neighbour(ctx context.Context, tenantID, cr, except string, at *store.QueuePlace, ahead bool) (queued, bool, error) {
	query := queuedColumns + ` WHERE tenant_id = ? AND compute_resource_id = ? AND status = ? AND id <> ?`
	args := []any{tenantID, cr, string(model.TaskQueued), except}
	order := inOrder
	if at != nil {
		cmp := behind
		if ahead {
			cmp = aheadOf
		}
		query += ` AND ` + cmp
		args = append(args, placeArgs(*at)...)
	}
	if at != nil && ahead || at == nil && !ahead {
		order = reverse
	}
	n, err := sqlbase.GetOne(ctx, q.Q, "read the queue of compute resource "+cr, scanQueued, query+order+` LIMIT 1`, args...)
	if errors.Is(err, store.ErrNotFound) {
		return queued{}, false, nil
	}
	return n, err == nil, err
}

// MoveQueuedTask moves a queued task in its queue, as store.Queries
// documents. The task takes the anchor's rank and an order between the
// anchor's and its neighbour's; when the two are adjacent, the tasks on
// the neighbour's side (in the anchor's rank) shift by 2 to make room, in
// one UPDATE. A move to the front or the back takes the end task's rank
// and an order just past it. The task's queue sequence number never
// changes, so task lists keep their order and their cursors.
func (q *queries) MoveQueuedTask(ctx context.Context, tenantID string, m store.QueueMove) (from, to int, err error) {
	what := "move task " + m.TaskID
	err = q.atomic(ctx, func(q *queries) error {
		t, err := sqlbase.GetOne(ctx, q.Q, what, scanQueued, queuedColumns+` WHERE tenant_id = ? AND id = ?`, tenantID, m.TaskID)
		if err != nil {
			return err
		}
		if t.Status != model.TaskQueued {
			return fmt.Errorf("%s: it is %s, not queued: %w", what, t.Status, store.ErrConflict)
		}
		if from, err = q.CountQueuedAhead(ctx, tenantID, t.ComputeResourceID, t.Place); err != nil {
			return err
		}
		from++
		place, err := q.moveTo(ctx, tenantID, t, m)
		if err != nil {
			return err
		}
		if place == nil {
			to = from
			return nil
		}
		if err := q.WriteOne(ctx, what, nil, `UPDATE tasks SET queue_rank = ?, queue_order = ? WHERE tenant_id = ? AND id = ? AND status = ?`,
			place.Rank, place.Order, tenantID, t.ID, string(model.TaskQueued)); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%s: it is no longer queued: %w", what, store.ErrConflict)
			}
			return err
		}
		if to, err = q.CountQueuedAhead(ctx, tenantID, t.ComputeResourceID, *place); err != nil {
			return err
		}
		to++
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return from, to, nil
}

// moveTo finds the task's new place (nil: it is alone in its queue),
// shifting its new neighbours when there is no room between them.
func (q *queries) moveTo(ctx context.Context, tenantID string, t queued, m store.QueueMove) (*store.QueuePlace, error) {
	cr := t.ComputeResourceID
	step := int64(1)
	if m.Ahead {
		step = -1
	}
	if m.AnchorID == "" {
		end, ok, err := q.neighbour(ctx, tenantID, cr, t.ID, nil, m.Ahead)
		if err != nil || !ok {
			return nil, err
		}
		return &store.QueuePlace{Rank: end.Place.Rank, Order: end.Place.Order + step, Seq: t.Place.Seq}, nil
	}
	a, err := sqlbase.GetOne(ctx, q.Q, "move next to task "+m.AnchorID, scanQueued, queuedColumns+` WHERE tenant_id = ? AND id = ?`, tenantID, m.AnchorID)
	if err != nil {
		return nil, err
	}
	switch {
	case a.ID == t.ID:
		return nil, fmt.Errorf("move task %s next to itself: %w", t.ID, store.ErrConflict)
	case a.Status != model.TaskQueued:
		return nil, fmt.Errorf("move next to task %s: it is %s, not queued: %w", a.ID, a.Status, store.ErrConflict)
	case a.ComputeResourceID != cr:
		return nil, fmt.Errorf("move next to task %s: it waits in another compute resource: %w", a.ID, store.ErrConflict)
	}
	n, ok, err := q.neighbour(ctx, tenantID, cr, t.ID, &a.Place, m.Ahead)
	if err != nil {
		return nil, err
	}
	place := &store.QueuePlace{Rank: a.Place.Rank, Order: a.Place.Order + step, Seq: t.Place.Seq}
	if !ok || n.Place.Rank != a.Place.Rank {
		return place, nil
	}
	if gap := (a.Place.Order - n.Place.Order) * -step; gap >= 2 {
		place.Order = n.Place.Order + (a.Place.Order-n.Place.Order)/2
		return place, nil
	}
	side := `(queue_order, queue_seq) >= (?, ?)`
	if m.Ahead {
		side = `(queue_order, queue_seq) <= (?, ?)`
	}
	if _, err := q.Write(ctx, "make room in the queue of compute resource "+cr, nil,
		`UPDATE tasks SET queue_order = queue_order + ? WHERE tenant_id = ? AND compute_resource_id = ? AND status = ?
			AND queue_rank = ? AND id <> ? AND `+side,
		2*step, tenantID, cr, string(model.TaskQueued), a.Place.Rank, t.ID, n.Place.Order, n.Place.Seq); err != nil {
		return nil, err
	}
	return place, nil
}
