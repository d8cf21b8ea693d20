package sqlstore

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// CreateIdempotencyKey records a key's first use; the primary key makes a
// second use of it ErrConflict.
func (q *queries) CreateIdempotencyKey(ctx context.Context, k *model.IdempotencyKey) error {
	_, err := q.Write(ctx, "record idempotency key "+k.Key, store.ErrNotFound,
		`INSERT INTO idempotency_keys (tenant_id, user_id, operation, key, request_hash, result_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.TenantID, k.UserID, k.Operation, k.Key, k.RequestHash, k.ResultID, sqlbase.Micros(k.CreatedAt))
	return err
}

func (q *queries) GetIdempotencyKey(ctx context.Context, tenantID, userID, operation, key string) (*model.IdempotencyKey, error) {
	return sqlbase.GetOne(ctx, q.Q, "get idempotency key "+key, func(r sqlbase.Scanner) (*model.IdempotencyKey, error) {
		k := model.IdempotencyKey{TenantID: tenantID, UserID: userID, Operation: operation, Key: key}
		var created int64
		err := r.Scan(&k.RequestHash, &k.ResultID, &created)
		k.CreatedAt = sqlbase.FromMicros(created)
		return &k, err
	}, `SELECT request_hash, result_id, created_at FROM idempotency_keys WHERE tenant_id = ? AND user_id = ? AND operation = ? AND key = ?`,
		tenantID, userID, operation, key)
}

func (q *queries) PruneIdempotencyKeys(ctx context.Context, before time.Time) (int64, error) {
	return q.Write(ctx, "prune idempotency keys", store.ErrConflict, `DELETE FROM idempotency_keys WHERE created_at < ?`, sqlbase.Micros(before))
}
