package sqlbase

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/store"
)

// Placeholders returns n comma-separated '?'.
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// WithLimit adds LIMIT for a positive limit; zero or less lists everything.
func WithLimit(query string, args []any, limit int) (string, []any) {
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	return query, args
}

// PageByName completes a query over one tenant's objects with keyset
// pagination on the unique name.
func PageByName(query string, args []any, page store.Page) (string, []any) {
	if page.After != "" {
		query += ` AND name > ?`
		args = append(args, page.After)
	}
	query += ` ORDER BY name`
	return WithLimit(query, args, page.Limit)
}

// VisibleTo is TaskFilter's group rule on the group_id and owner_id of
// table alias t ("" or "t."): the groups' rows or the user's own.
func VisibleTo(t string, restrict bool, groupIDs []string, userID string) (string, []any) {
	if !restrict && len(groupIDs) == 0 {
		return "", nil
	}
	or, args := []string(nil), []any(nil)
	if len(groupIDs) > 0 {
		or = append(or, t+`group_id IN (`+Placeholders(len(groupIDs))+`)`)
		for _, g := range groupIDs {
			args = append(args, g)
		}
	}
	if userID != "" {
		or, args = append(or, t+`owner_id = ?`), append(args, userID)
	}
	if len(or) == 0 {
		or = []string{`1 = 0`}
	}
	return ` AND (` + strings.Join(or, ` OR `) + `)`, args
}

// BatchRows is how many rows one multi-row statement writes: far under
// SQLite's and PostgreSQL's limits on bound parameters.
const BatchRows = 400

// InsertBatches writes n rows of cols columns each with multi-row INSERT
// statements, row(i) giving the values of row i.
func InsertBatches(ctx context.Context, q *Q, what, head string, cols, n int, row func(i int) []any) error {
	one := "(" + Placeholders(cols) + ")"
	for start := 0; start < n; start += BatchRows {
		end := min(n, start+BatchRows)
		var sb strings.Builder
		sb.WriteString(head)
		args := make([]any, 0, (end-start)*cols)
		for i := start; i < end; i++ {
			if i > start {
				sb.WriteString(", ")
			}
			sb.WriteString(one)
			args = append(args, row(i)...)
		}
		if _, err := q.Write(ctx, what, store.ErrNotFound, sb.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// NullFloat stores an optional number: nil is NULL.
func NullFloat(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// GetDoc reads a tenant's document from table (tenant_id, doc,
// updated_at) into out, leaving out as it is when there is none. The
// table name is a constant of the caller's, never input.
func (q *Q) GetDoc(ctx context.Context, table, what, tenantID string, out any) error {
	var doc string
	err := q.QueryRow(ctx, `SELECT doc FROM `+table+` WHERE tenant_id = ?`, tenantID).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", what, err)
	}
	if err := json.Unmarshal([]byte(doc), out); err != nil {
		return fmt.Errorf("get %s: decode JSON: %w", what, err)
	}
	return nil
}

// PutDoc stores a tenant's document in table whole.
func (q *Q) PutDoc(ctx context.Context, table, what, tenantID string, v any, at time.Time) error {
	doc, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("put %s: encode JSON: %w", what, err)
	}
	_, err = q.Write(ctx, "put "+what, store.ErrNotFound,
		`INSERT INTO `+table+` (tenant_id, doc, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at`, tenantID, string(doc), Micros(at))
	return err
}
