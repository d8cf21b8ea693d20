package sqlstore

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// idempotencyKeyTable is the idempotency_keys table.
var idempotencyKeyTable = sqlbase.Table[model.IdempotencyKey]{
	sqlbase.C("tenant_id", func(k *model.IdempotencyKey) any { return &k.TenantID }),
	sqlbase.C("user_id", func(k *model.IdempotencyKey) any { return &k.UserID }),
	sqlbase.C("operation", func(k *model.IdempotencyKey) any { return &k.Operation }),
	sqlbase.C("key", func(k *model.IdempotencyKey) any { return &k.Key }),
	sqlbase.C("request_hash", func(k *model.IdempotencyKey) any { return &k.RequestHash }),
	sqlbase.C("result_id", func(k *model.IdempotencyKey) any { return &k.ResultID }),
	sqlbase.C("created_at", func(k *model.IdempotencyKey) any { return sqlbase.Time(&k.CreatedAt) }),
}

// CreateIdempotencyKey records a key's first use; the primary key makes a
// second use of it ErrConflict.
func (q *queries) CreateIdempotencyKey(ctx context.Context, k *model.IdempotencyKey) error {
	_, err := q.Write(ctx, "record idempotency key "+k.Key, store.ErrNotFound,
		idempotencyKeyTable.Insert("idempotency_keys"), idempotencyKeyTable.Values(k)...)
	return err
}

func (q *queries) GetIdempotencyKey(ctx context.Context, tenantID, userID, operation, key string) (*model.IdempotencyKey, error) {
	return sqlbase.GetOne(ctx, q.Q, "get idempotency key "+key, idempotencyKeyTable.Scan,
		`SELECT `+idempotencyKeyTable.List()+` FROM idempotency_keys WHERE tenant_id = ? AND user_id = ? AND operation = ? AND key = ?`,
		tenantID, userID, operation, key)
}

func (q *queries) PruneIdempotencyKeys(ctx context.Context, before time.Time) (int64, error) {
	return q.Write(ctx, "prune idempotency keys", store.ErrConflict, `DELETE FROM idempotency_keys WHERE created_at < ?`, sqlbase.Micros(before))
}
