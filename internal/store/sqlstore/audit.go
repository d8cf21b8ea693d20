package sqlstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// auditTable is the audit trail, audit_log.
var auditTable = sqlbase.Table[model.AuditEntry]{
	sqlbase.C("seq", func(e *model.AuditEntry) any { return &e.Seq }),
	sqlbase.C("id", func(e *model.AuditEntry) any { return &e.ID }),
	sqlbase.C("tenant_id", func(e *model.AuditEntry) any { return &e.TenantID }),
	sqlbase.C("at", func(e *model.AuditEntry) any { return sqlbase.Time(&e.At) }),
	sqlbase.C("actor_id", func(e *model.AuditEntry) any { return &e.ActorID }),
	sqlbase.C("actor_name", func(e *model.AuditEntry) any { return &e.ActorName }),
	sqlbase.C("channel", func(e *model.AuditEntry) any { return &e.Channel }),
	sqlbase.C("action", func(e *model.AuditEntry) any { return &e.Action }),
	sqlbase.C("object_kind", func(e *model.AuditEntry) any { return &e.ObjectKind }),
	sqlbase.C("object_id", func(e *model.AuditEntry) any { return &e.ObjectID }),
	sqlbase.C("object_name", func(e *model.AuditEntry) any { return &e.ObjectName }),
	sqlbase.C("detail", func(e *model.AuditEntry) any { return &e.Detail }),
}

// InsertAudit appends an entry to the audit trail. It assigns Seq from a
// counter when Seq is 0 (a caller-supplied Seq, from an import, is kept and
// the counter moves past it) and a new ID when ID is empty. The tenant must
// exist (ErrNotFound).
func (q *queries) InsertAudit(ctx context.Context, e *model.AuditEntry) error {
	what := fmt.Sprintf("insert audit entry %q", e.Action)
	undo := sqlbase.AssignID(&e.ID)
	assignSeq := e.Seq == 0
	err := q.atomic(ctx, func(q *queries) error {
		if assignSeq {
			return sqlbase.InsertNumbered(ctx, q.Q, what, store.ErrNotFound, auditTable, "audit_log", e, "seq", SeqAudit, &e.Seq)
		}
		if err := q.Dialect().AdvanceSeq(ctx, q.Conn(), SeqAudit, e.Seq); err != nil {
			return fmt.Errorf("%s: advance audit sequence: %w", what, err)
		}
		_, err := q.Write(ctx, what, store.ErrNotFound,
			auditTable.Insert("audit_log"), auditTable.Values(e)...)
		return err
	})
	if err != nil {
		undo()
		if assignSeq {
			e.Seq = 0
		}
	}
	return err
}

// ListAudit lists a tenant's audit entries newest first, with keyset
// pagination on Seq. Since is inclusive and Until exclusive, so consecutive
// windows neither overlap nor leave gaps.
func (q *queries) ListAudit(ctx context.Context, tenantID string, f store.AuditFilter, page store.Page) ([]*model.AuditEntry, error) {
	query := `SELECT ` + auditTable.List() + ` FROM audit_log WHERE tenant_id = ?`
	args := []any{tenantID}
	if f.ActorID != "" {
		query += ` AND actor_id = ?`
		args = append(args, f.ActorID)
	}
	if f.ObjectKind != "" {
		query += ` AND object_kind = ?`
		args = append(args, f.ObjectKind)
	}
	if f.ObjectID != "" {
		query += ` AND object_id = ?`
		args = append(args, f.ObjectID)
	}
	if !f.Since.IsZero() {
		query += ` AND at >= ?`
		args = append(args, sqlbase.Micros(f.Since))
	}
	if !f.Until.IsZero() {
		query += ` AND at < ?`
		args = append(args, sqlbase.Micros(f.Until))
	}
	if page.After != "" {
		after, err := strconv.ParseInt(page.After, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("list audit: page after %q is not an audit sequence number", page.After)
		}
		query += ` AND seq < ?`
		args = append(args, after)
	}
	query += ` ORDER BY seq DESC`
	query, args = sqlbase.WithLimit(query, args, page.Limit)
	return sqlbase.GetAll(ctx, q.Q, "list audit", auditTable.Scan, query, args...)
}

// InsertAudits inserts entries in batches: one round trip for their
// sequence numbers and one per batch of rows, so an engine pass that places
// a thousand tasks writes its audit trail in a few statements.
func (q *queries) InsertAudits(ctx context.Context, es []*model.AuditEntry) error {
	if len(es) == 0 {
		return nil
	}
	if len(es) == 1 {
		// One entry (most operations write one) takes its number in its
		// INSERT where the dialect can.
		return q.InsertAudit(ctx, es[0])
	}
	return q.atomic(ctx, func(q *queries) error {
		var need int
		for _, e := range es {
			if e.Seq == 0 {
				need++
			}
		}
		var seqs []int64
		if need > 0 {
			var err error
			if seqs, err = q.Dialect().NextSeqs(ctx, q.Conn(), SeqAudit, need); err != nil {
				return fmt.Errorf("insert audit entries: %w", err)
			}
		}
		for _, e := range es {
			if e.ID == "" {
				e.ID = model.NewID()
			}
			if e.Seq == 0 {
				e.Seq, seqs = seqs[0], seqs[1:]
			} else if err := q.Dialect().AdvanceSeq(ctx, q.Conn(), SeqAudit, e.Seq); err != nil {
				return fmt.Errorf("insert audit entries: %w", err)
			}
		}
		return sqlbase.InsertBatches(ctx, q.Q, "insert audit entries", `INSERT INTO audit_log (`+auditTable.List()+`) VALUES `,
			len(auditTable), len(es), func(i int) []any { return auditTable.Values(es[i]) })
	})
}
