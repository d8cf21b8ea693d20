package sqlstore

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// GetApps reads a tenant's app catalogue.
func (q *queries) GetApps(ctx context.Context, tenantID string) (*model.AppCatalogue, error) {
	var c model.AppCatalogue
	if err := q.GetDoc(ctx, "app_catalogues", "app catalogue", tenantID, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// PutApps stores a tenant's app catalogue whole.
func (q *queries) PutApps(ctx context.Context, tenantID string, c *model.AppCatalogue, at time.Time) error {
	return q.PutDoc(ctx, "app_catalogues", "app catalogue", tenantID, c, at)
}
