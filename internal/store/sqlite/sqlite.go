// Package sqlite is the embedded store driver: a single SQLite file (or a
// private in-memory database) through modernc.org/sqlite, a pure Go SQLite,
// so the control plane needs no C toolchain and no database server.
//
// The queries are shared with the PostgreSQL driver (package sqlstore); this
// package holds the schema, the connection settings and the Dialect.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Memory is the path of a private in-memory database: gone when the store
// closes, and not shared with any other Open.
const Memory = ":memory:"

// maxOpenConns bounds the connections to a database file. SQLite has one
// writer at a time whatever the pool size; in WAL mode readers run beside it,
// so a few connections let reads go on while a write transaction is open.
const maxOpenConns = 8

// Open opens (creating if needed) the SQLite database at path and brings its
// schema up to date. Path is a file system path, or Memory.
//
// Every connection runs with foreign keys on, a 10 s busy timeout, WAL
// journaling with synchronous=NORMAL (durable across process crashes; a power
// cut can lose the last commits, not corrupt the file) and transactions that
// begin IMMEDIATE: a transaction takes the write lock when it starts rather
// than on its first write, so two transactions can never each hold a read
// lock while waiting for the other to let go (a deadlock SQLite answers with
// SQLITE_BUSY at once, whatever the busy timeout).
func Open(ctx context.Context, path string) (store.Store, error) {
	if path == "" {
		return nil, errors.New(`open sqlite: the path is empty; give a file path or ":memory:" for a private in-memory database`)
	}
	var dsn string
	if path == Memory {
		// Each connection to :memory: is its own database, so the pool
		// holds exactly one connection and never lets it go.
		dsn = Memory + "?_pragma=foreign_keys(1)&_txlock=immediate"
	} else {
		// The driver takes everything after '?' as parameters, and treats
		// a "file:" prefix as a URI; neither can be a plain path here.
		if strings.Contains(path, "?") || strings.HasPrefix(path, "file:") {
			return nil, fmt.Errorf("open sqlite %q: the path may not contain '?' or start with \"file:\"", path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("open sqlite %q: create directory: %w", path, err)
		}
		dsn = path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)" +
			"&_pragma=synchronous(NORMAL)&_pragma=cache_size(-32000)&_pragma=mmap_size(268435456)&_txlock=immediate"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	if path == Memory {
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
	} else {
		db.SetMaxOpenConns(maxOpenConns)
		db.SetMaxIdleConns(maxOpenConns)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	d := Dialect{}
	// SQLite serialises write transactions, so migrations need no lock.
	if err := sqlstore.Migrate(ctx, db, d, migrations, "migrations", nil); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	return sqlstore.New(db, d), nil
}

// Dialect is SQLite's sqlstore.Dialect.
type Dialect struct{}

var _ sqlstore.Dialect = Dialect{}

// Name returns "sqlite".
func (Dialect) Name() string { return "sqlite" }

// Placeholder returns "?": SQLite takes '?' as written.
func (Dialect) Placeholder(n int) string { return sqlstore.QuestionPlaceholder(n) }

// Classify reads SQLite's extended result codes, which the driver turns on
// for every connection.
//
// A missing parent fails with SQLITE_CONSTRAINT_FOREIGNKEY, but deleting a
// parent that an ON DELETE RESTRICT key still points at fails with
// SQLITE_CONSTRAINT_TRIGGER (SQLite runs RESTRICT as a built-in trigger),
// with the same "FOREIGN KEY constraint failed" message; the schema has no
// triggers of its own, so the message tells the two apart from a RAISE.
func (Dialect) Classify(err error) sqlstore.ErrorKind {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return sqlstore.ErrOther
	}
	switch e.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return sqlstore.ErrUniqueViolation
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return sqlstore.ErrForeignKeyViolation
	case sqlite3.SQLITE_CONSTRAINT_TRIGGER:
		if strings.Contains(e.Error(), "FOREIGN KEY constraint failed") {
			return sqlstore.ErrForeignKeyViolation
		}
	}
	return sqlstore.ErrOther
}

// NextSeq increments a counter row of the seqs table. The update takes the
// write lock, which the transaction keeps until it commits, so values are
// strictly increasing in commit order too.
func (Dialect) NextSeq(ctx context.Context, c sqlstore.Conn, seq sqlstore.Sequence) (int64, error) {
	var v int64
	err := c.QueryRowContext(ctx, `UPDATE seqs SET value = value + 1 WHERE name = ? RETURNING value`, string(seq)).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("next %s: %w", seq, err)
	}
	return v, nil
}

// LockTenant needs no lock: write transactions begin IMMEDIATE, so SQLite
// runs them one at a time already.
func (Dialect) LockTenant(context.Context, sqlstore.Conn, string) error { return nil }

// LockTenantShared needs no lock either.
func (Dialect) LockTenantShared(context.Context, sqlstore.Conn, string) error { return nil }

// NextSeqs raises a counter by n in one statement; the write lock makes the
// n values ours.
func (Dialect) NextSeqs(ctx context.Context, c sqlstore.Conn, seq sqlstore.Sequence, n int) ([]int64, error) {
	var last int64
	if err := c.QueryRowContext(ctx, `UPDATE seqs SET value = value + ? WHERE name = ? RETURNING value`, n, string(seq)).Scan(&last); err != nil {
		return nil, fmt.Errorf("next %d of %s: %w", n, seq, err)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = last - int64(n-1-i)
	}
	return out, nil
}

// SkipLocked is empty: SQLite runs write transactions one at a time.
func (Dialect) SkipLocked() string { return "" }

// QueueHeadsQuery reads each compute resource's first queued tasks with a
// correlated subquery that walks the queue index, LIMIT rows per resource.
func (Dialect) QueueHeadsQuery() string {
	return `SELECT ` + sqlstore.SchedColumns("t") + ` FROM compute_resources cr JOIN tasks t ON t.id IN (
		SELECT q.id FROM tasks q WHERE q.tenant_id = cr.tenant_id AND q.compute_resource_id = cr.id AND q.status = 'queued'
		ORDER BY q.queue_rank, q.queue_order, q.queue_seq LIMIT ?2)
	WHERE cr.tenant_id = ?1`
}

// AdvanceSeq raises a counter to at least atLeast.
func (Dialect) AdvanceSeq(ctx context.Context, c sqlstore.Conn, seq sqlstore.Sequence, atLeast int64) error {
	if _, err := c.ExecContext(ctx, `UPDATE seqs SET value = MAX(value, ?) WHERE name = ?`, atLeast, string(seq)); err != nil {
		return fmt.Errorf("advance %s: %w", seq, err)
	}
	return nil
}

// PrepareStatements is true: modernc SQLite parses each statement it is
// given, which costs more than running most of them.
func (Dialect) PrepareStatements() bool { return true }

// SeqExpr is "": a counter row is raised by a statement of its own.
func (Dialect) SeqExpr(sqlstore.Sequence) (next, again string) { return "", "" }
