package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// UpdateLocalRun writes a change to a run that is still running locally,
// as store.Queries documents: the row is changed only while its status is
// local, so an end, a move to a queue and the stale sweep racing on one
// run leave one winner and never move an ended or queued task back.
func (q *queries) UpdateLocalRun(ctx context.Context, t *model.Task) error {
	what := "update local run " + t.ID
	spec, err := sqlbase.MarshalJSON(t.Spec, "{}")
	if err != nil {
		return fmt.Errorf("%s: encode spec: %w", what, err)
	}
	return q.atomic(ctx, func(q *queries) error {
		if t.Status == model.TaskQueued {
			// Sent to a queue, it waits behind what was enqueued before
			// now, not before it started running locally.
			seq, err := q.Dialect().NextSeq(ctx, q.Conn(), SeqTaskQueue)
			if err != nil {
				return fmt.Errorf("%s: next queue sequence number: %w", what, err)
			}
			t.QueueSeq, t.QueueOrder = seq, seq
			if t.QueueRank, err = q.projectRank(ctx, t.TenantID, t.GroupID, t.ProjectID); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		n, err := q.Write(ctx, what, store.ErrNotFound,
			`UPDATE tasks SET name = ?, spec = ?, size_nodes = ?, size_per_node_milli = ?, status = ?, reason = ?,
				compute_resource_id = ?, policy_id = ?, profile_id = ?, group_id = ?, queue_seq = ?,
				queue_rank = ?, queue_order = ?, updated_at = ?, finished_at = ?, exit_code = ?
			WHERE tenant_id = ? AND id = ? AND status = ?`,
			t.Name, spec, t.Size.Nodes, int64(t.Size.PerNode), string(t.Status), t.Reason,
			t.ComputeResourceID, t.PolicyID, t.ProfileID, t.GroupID, t.QueueSeq,
			t.QueueRank, t.QueueOrder, sqlbase.Micros(t.UpdatedAt), sqlbase.NullMicros(t.FinishedAt), sqlbase.NullInt(t.Run.ExitCode),
			t.TenantID, t.ID, string(model.TaskLocal))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: it is not running locally: %w", what, store.ErrConflict)
		}
		return nil
	})
}

// TouchLocalRun notes that a local run reported at at, as store.Queries
// documents.
func (q *queries) TouchLocalRun(ctx context.Context, tenantID, id string, at time.Time) (bool, error) {
	n, err := q.Write(ctx, "touch local run "+id, nil,
		`UPDATE tasks SET updated_at = ? WHERE tenant_id = ? AND id = ? AND status = ? AND updated_at < ?`,
		sqlbase.Micros(at), tenantID, id, string(model.TaskLocal), sqlbase.Micros(at))
	return n > 0, err
}
