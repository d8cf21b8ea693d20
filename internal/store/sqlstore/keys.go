package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

const apiKeyColumns = `id, tenant_id, user_id, name, prefix, hash, project_id, created_at, expires_at, last_used_at, revoked_at`

func scanAPIKey(r scanner) (*model.APIKey, error) {
	var k model.APIKey
	var project sql.NullString
	var created int64
	var expires, lastUsed, revoked sql.NullInt64
	if err := r.Scan(&k.ID, &k.TenantID, &k.UserID, &k.Name, &k.Prefix, &k.Hash, &project,
		&created, &expires, &lastUsed, &revoked); err != nil {
		return nil, err
	}
	k.ProjectID = project.String
	k.CreatedAt = fromMicros(created)
	k.ExpiresAt, k.LastUsedAt, k.RevokedAt = timePtr(expires), timePtr(lastUsed), timePtr(revoked)
	return &k, nil
}

// CreateAPIKey inserts a key. Hashes are unique across the store. The user
// and, when set, the project must exist in the key's tenant; a project with
// keys scoped to it cannot be deleted.
func (q *queries) CreateAPIKey(ctx context.Context, k *model.APIKey) error {
	undo := assignID(&k.ID)
	hash := k.Hash
	if hash == nil {
		hash = []byte{} // the column is NOT NULL; nil would be NULL
	}
	_, err := q.write(ctx, fmt.Sprintf("create API key %q", k.Name), store.ErrNotFound,
		`INSERT INTO api_keys (`+apiKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.TenantID, k.UserID, k.Name, k.Prefix, hash, nullString(k.ProjectID),
		micros(k.CreatedAt), nullMicros(k.ExpiresAt), nullMicros(k.LastUsedAt), nullMicros(k.RevokedAt))
	if err != nil {
		undo()
	}
	return err
}

func (q *queries) GetAPIKey(ctx context.Context, tenantID, id string) (*model.APIKey, error) {
	return getOne(ctx, q, "get API key "+id, scanAPIKey,
		`SELECT `+apiKeyColumns+` FROM api_keys WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// GetAPIKeyByHash finds a key in any tenant: authentication starts from the
// secret alone.
func (q *queries) GetAPIKeyByHash(ctx context.Context, hash []byte) (*model.APIKey, error) {
	if len(hash) == 0 {
		return nil, fmt.Errorf("get API key by hash: empty hash: %w", store.ErrNotFound)
	}
	return getOne(ctx, q, "get API key by hash", scanAPIKey,
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
	return getAll(ctx, q, "list API keys", scanAPIKey, query, args...)
}

// RevokeAPIKey marks a key revoked at at. Revoking a revoked key succeeds
// and keeps the first revocation time, so the record says when the key
// stopped working.
func (q *queries) RevokeAPIKey(ctx context.Context, tenantID, id string, at time.Time) error {
	return q.writeOne(ctx, "revoke API key "+id, store.ErrNotFound,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE tenant_id = ? AND id = ?`,
		micros(at), tenantID, id)
}

// TouchAPIKey records the last use of a key. Like GetAPIKeyByHash it takes no
// tenant: it runs right after authentication by hash.
func (q *queries) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	return q.writeOne(ctx, "touch API key "+id, store.ErrNotFound,
		`UPDATE api_keys SET last_used_at = ? WHERE id = ?`, micros(at), id)
}
