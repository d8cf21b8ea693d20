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
	var doc string
	err := q.queryRow(ctx, `SELECT doc FROM app_catalogues WHERE tenant_id = ?`, tenantID).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return &model.AppCatalogue{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get app catalogue: %w", err)
	}
	var c model.AppCatalogue
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		return nil, fmt.Errorf("get app catalogue: decode JSON: %w", err)
	}
	return &c, nil
}

// PutApps stores a tenant's app catalogue whole.
func (q *queries) PutApps(ctx context.Context, tenantID string, c *model.AppCatalogue, at time.Time) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("put app catalogue: encode JSON: %w", err)
	}
	_, err = q.write(ctx, "put app catalogue", store.ErrNotFound,
		`INSERT INTO app_catalogues (tenant_id, doc, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at`, tenantID, string(doc), micros(at))
	return err
}
