package sqlstore

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// GetSetting reads a server-wide setting; ErrNotFound when it is unset.
func (q *queries) GetSetting(ctx context.Context, key string) (string, error) {
	return sqlbase.GetOne(ctx, q.Q, fmt.Sprintf("get setting %q", key), scanString,
		`SELECT value FROM settings WHERE name = ?`, key)
}

func scanString(r sqlbase.Scanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}

// PutSetting stores a setting, replacing any value it had.
func (q *queries) PutSetting(ctx context.Context, key, value string) error {
	_, err := q.Write(ctx, fmt.Sprintf("put setting %q", key), store.ErrNotFound,
		`INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
		key, value)
	return err
}

// PutSettingIfAbsent stores value unless the key is set, then reads what the
// store holds. The insert does nothing on a conflict instead of failing, so
// callers racing each other all succeed and all read the one winning value:
// on PostgreSQL the losing insert waits for the winner's commit and the
// SELECT that follows sees it (each statement takes a new snapshot under
// READ COMMITTED); on SQLite writers are serialised.
func (q *queries) PutSettingIfAbsent(ctx context.Context, key, value string) (string, error) {
	what := fmt.Sprintf("put setting %q if absent", key)
	if _, err := q.Write(ctx, what, store.ErrNotFound,
		`INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, key, value); err != nil {
		return "", err
	}
	return sqlbase.GetOne(ctx, q.Q, what, scanString, `SELECT value FROM settings WHERE name = ?`, key)
}
