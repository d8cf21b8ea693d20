package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// Migrate applies the *.sql files of dir in fsys that the database has not
// seen yet, in file name order, and records each in schema_migrations under
// its name without the extension ("0001_init").
//
// Each migration runs in its own transaction, together with its record, so a
// failed migration leaves nothing behind and the next start retries it. lock,
// when not nil, runs first in every transaction and must serialise migrators
// (PostgreSQL takes an advisory lock); the check for an applied migration
// happens after it, so replicas starting together apply each migration once.
// SQLite needs no lock: its write transactions are already serialised.
func Migrate(ctx context.Context, db *sql.DB, d Dialect, fsys fs.FS, dir string, lock func(ctx context.Context, tx *sql.Tx) error) error {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return fmt.Errorf("list migrations: %w", err)
	}
	if len(names) == 0 {
		return fmt.Errorf("list migrations: no *.sql files in %s", dir)
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return fmt.Errorf("read migration %s: %w", name, err)
		}
		version := strings.TrimSuffix(path.Base(name), ".sql")
		if err := migrateOne(ctx, db, d, version, string(body), lock); err != nil {
			return fmt.Errorf("migration %s: %w", version, err)
		}
	}
	return nil
}

func migrateOne(ctx context.Context, db *sql.DB, d Dialect, version, body string, lock func(context.Context, *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if lock != nil {
		if err := lock(ctx, tx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version TEXT PRIMARY KEY,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, Rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, d.Placeholder), version).Scan(&n); err != nil {
		return fmt.Errorf("check schema_migrations: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, Rebind(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, d.Placeholder),
		version, sqlbase.Micros(time.Now())); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return tx.Commit()
}
