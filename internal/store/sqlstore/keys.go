package sqlstore

import (
	"bytes"
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// apiKeyTable is the api_keys table.
var apiKeyTable = sqlbase.Table[model.APIKey]{
	sqlbase.C("id", func(k *model.APIKey) any { return &k.ID }),
	sqlbase.C("tenant_id", func(k *model.APIKey) any { return &k.TenantID }),
	sqlbase.C("user_id", func(k *model.APIKey) any { return &k.UserID }),
	sqlbase.C("name", func(k *model.APIKey) any { return &k.Name }),
	sqlbase.C("prefix", func(k *model.APIKey) any { return &k.Prefix }),
	sqlbase.C("hash", func(k *model.APIKey) any { return hashCol{&k.Hash} }),
	sqlbase.C("project_id", func(k *model.APIKey) any { return sqlbase.Ref(&k.ProjectID) }),
	sqlbase.C("created_at", func(k *model.APIKey) any { return sqlbase.Time(&k.CreatedAt) }),
	sqlbase.C("expires_at", func(k *model.APIKey) any { return sqlbase.TimePtr(&k.ExpiresAt) }),
	sqlbase.C("last_used_at", func(k *model.APIKey) any { return sqlbase.TimePtr(&k.LastUsedAt) }),
	sqlbase.C("revoked_at", func(k *model.APIKey) any { return sqlbase.TimePtr(&k.RevokedAt) }),
}

// hashCol is a key's hash: the column is NOT NULL, so a nil hash is stored
// empty rather than as NULL.
type hashCol struct{ p *[]byte }

func (c hashCol) Value() (driver.Value, error) {
	if *c.p == nil {
		return []byte{}, nil
	}
	return *c.p, nil
}

func (c hashCol) Scan(src any) error {
	switch b := src.(type) {
	case nil:
		*c.p = nil
	case []byte:
		*c.p = bytes.Clone(b)
	default:
		return fmt.Errorf("a hash stored as %T", src)
	}
	return nil
}

// CreateAPIKey inserts a key. Hashes are unique across the store. The user
// and, when set, the project must exist in the key's tenant; a project with
// keys scoped to it cannot be deleted.
func (q *queries) CreateAPIKey(ctx context.Context, k *model.APIKey) error {
	undo := sqlbase.AssignID(&k.ID)
	_, err := q.Write(ctx, fmt.Sprintf("create API key %q", k.Name), store.ErrNotFound, apiKeyTable.Insert("api_keys"), apiKeyTable.Values(k)...)
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) GetAPIKey(ctx context.Context, tenantID, id string) (*model.APIKey, error) {
	return sqlbase.GetOne(ctx, q.Q, "get API key "+id, apiKeyTable.Scan,
		`SELECT `+apiKeyTable.List()+` FROM api_keys WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// GetAPIKeyByHash finds a key in any tenant: authentication starts from the
// secret alone.
func (q *queries) GetAPIKeyByHash(ctx context.Context, hash []byte) (*model.APIKey, error) {
	if len(hash) == 0 {
		return nil, fmt.Errorf("get API key by hash: empty hash: %w", store.ErrNotFound)
	}
	return sqlbase.GetOne(ctx, q.Q, "get API key by hash", apiKeyTable.Scan,
		`SELECT `+apiKeyTable.List()+` FROM api_keys WHERE hash = ?`, hash)
}

// ListAPIKeys lists a tenant's keys, or one user's, newest first (ties by id,
// newest first too).
func (q *queries) ListAPIKeys(ctx context.Context, tenantID, userID string) ([]*model.APIKey, error) {
	query := `SELECT ` + apiKeyTable.List() + ` FROM api_keys WHERE tenant_id = ?`
	args := []any{tenantID}
	if userID != "" {
		query += ` AND user_id = ?`
		args = append(args, userID)
	}
	query += ` ORDER BY created_at DESC, id DESC`
	return sqlbase.GetAll(ctx, q.Q, "list API keys", apiKeyTable.Scan, query, args...)
}

// RevokeAPIKey marks a key revoked at at. Revoking a revoked key succeeds
// and keeps the first revocation time, so the record says when the key
// stopped working.
func (q *queries) RevokeAPIKey(ctx context.Context, tenantID, id string, at time.Time) error {
	return q.WriteOne(ctx, "revoke API key "+id, store.ErrNotFound,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE tenant_id = ? AND id = ?`,
		sqlbase.Micros(at), tenantID, id)
}

// TouchAPIKey records the last use of a key. Like GetAPIKeyByHash it takes no
// tenant: it runs right after authentication by hash.
func (q *queries) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	return q.WriteOne(ctx, "touch API key "+id, store.ErrNotFound,
		`UPDATE api_keys SET last_used_at = ? WHERE id = ?`, sqlbase.Micros(at), id)
}
