package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// GetApps reads a tenant's app catalogue.
func (q *queries) GetApps(ctx context.Context, tenantID string) (*model.AppCatalogue, error) {
	var c model.AppCatalogue
	if err := q.getDoc(ctx, "app_catalogues", "app catalogue", tenantID, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// PutApps stores a tenant's app catalogue whole.
func (q *queries) PutApps(ctx context.Context, tenantID string, c *model.AppCatalogue, at time.Time) error {
	return q.putDoc(ctx, "app_catalogues", "app catalogue", tenantID, c, at)
}

// getDoc reads a tenant's document from table (tenant_id, doc,
// updated_at) into out, leaving out as it is when there is none. The
// table name is a constant of the caller's, never input.
func (q *queries) getDoc(ctx context.Context, table, what, tenantID string, out any) error {
	var doc string
	err := q.queryRow(ctx, `SELECT doc FROM `+table+` WHERE tenant_id = ?`, tenantID).Scan(&doc)
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

// putDoc stores a tenant's document in table whole.
func (q *queries) putDoc(ctx context.Context, table, what, tenantID string, v any, at time.Time) error {
	doc, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("put %s: encode JSON: %w", what, err)
	}
	_, err = q.write(ctx, "put "+what, store.ErrNotFound,
		`INSERT INTO `+table+` (tenant_id, doc, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at`, tenantID, string(doc), micros(at))
	return err
}
