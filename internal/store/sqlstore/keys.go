package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const apiKeyColumns = `id, tenant_id, user_id, name, prefix, hash, project_id, created_at, expires_at, last_used_at, revoked_at`

func scanAPIKey(r sqlbase.Scanner) (*model.APIKey, error) {
	var k model.APIKey
	var project sql.NullString
	var created int64
	var expires, lastUsed, revoked sql.NullInt64
	if err := r.Scan(&k.ID, &k.TenantID, &k.UserID, &k.Name, &k.Prefix, &k.Hash, &project,
		&created, &expires, &lastUsed, &revoked); err != nil {
		return nil, err
	}
	k.ProjectID = project.String
	k.CreatedAt = sqlbase.FromMicros(created)
	k.ExpiresAt, k.LastUsedAt, k.RevokedAt = sqlbase.NullTime(expires), sqlbase.NullTime(lastUsed), sqlbase.NullTime(revoked)
	return &k, nil
}

// CreateAPIKey inserts a key. Hashes are unique across the store. The user
// and, when set, the project must exist in the key's tenant; a project with
// keys scoped to it cannot be deleted.
func (q *queries) CreateAPIKey(ctx context.Context, k *model.APIKey) error {
	undo := sqlbase.AssignID(&k.ID)
	hash := k.Hash
	if hash == nil {
		hash = []byte{} // the column is NOT NULL; nil would be NULL
	}
	_, err := q.Write(ctx, fmt.Sprintf("create API key %q", k.Name), store.ErrNotFound,
		`INSERT INTO api_keys (`+apiKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.TenantID, k.UserID, k.Name, k.Prefix, hash, sqlbase.NullString(k.ProjectID),
		sqlbase.Micros(k.CreatedAt), sqlbase.NullMicros(k.ExpiresAt), sqlbase.NullMicros(k.LastUsedAt), sqlbase.NullMicros(k.RevokedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) GetAPIKey(ctx context.Context, tenantID, id string) (*model.APIKey, error) {
	return sqlbase.GetOne(ctx, q.Q, "get API key "+id, scanAPIKey,
		`SELECT `+apiKeyColumns+` FROM api_keys WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// GetAPIKeyByHash finds a key in any tenant: authentication starts from the
// secret alone.
func (q *queries) GetAPIKeyByHash(ctx context.Context, hash []byte) (*model.APIKey, error) {
	if len(hash) == 0 {
		return nil, fmt.Errorf("get API key by hash: empty hash: %w", store.ErrNotFound)
	}
	return sqlbase.GetOne(ctx, q.Q, "get API key by hash", scanAPIKey,
		`SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = ?`, hash)
}

// ListAPIKeys lists a tenant's keys, or one user's, newest first (ties by id,
// newest first too).
func (q *queries) ListAPIKeys(ctx context.Context, tenantID, userID string) ([]*model.APIKey, error) {
	query := `SELECT ` + apiKeyColumns + ` FROM api_keys WHERE tenant_id = ?`
	args := []any{tenantID}
	if userID != "" {
		query += ` AND user_id = ?`
		args = append(args, userID)
	}
	query += ` ORDER BY created_at DESC, id DESC`
	return sqlbase.GetAll(ctx, q.Q, "list API keys", scanAPIKey, query, args...)
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
