// Package postgres is the PostgreSQL store driver, for deployments that run
// several control plane replicas or want the database managed apart from the
// control plane. It talks to PostgreSQL through pgx's database/sql driver.
//
// The queries are shared with the SQLite driver (package sqlstore); this
// package holds the schema, the connection settings and the Dialect.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// maxOpenConns bounds the connections one control plane process holds, so
// that several replicas fit under the server's max_connections (100 by
// default).
const maxOpenConns = 16

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string) and brings its schema up to date.
//
// The schema lives in the connection's search_path: a "search_path" runtime
// parameter in url (postgres://…/db?search_path=klique) puts it in a schema
// of its own. Several replicas may Open at once: migrations are serialised by
// an advisory lock and applied once.
func Open(ctx context.Context, url string) (store.Store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		// Errors never quote url: it may hold a password.
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns / 2)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	d := Dialect{}
	if err := sqlstore.Migrate(ctx, db, d, migrations, "migrations", lockMigrations); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return sqlstore.New(db, d), nil
}

// lockMigrations takes a transaction-scoped advisory lock, so that replicas
// starting together migrate one after the other. The key is derived from the
// current schema: stores in different schemas of one database (tests run
// that way) do not wait for each other.
func lockMigrations(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx,
		`SELECT pg_advisory_xact_lock(hashtext('klique.migrate:' || COALESCE(current_schema(), '')))`)
	return err
}

// Dialect is PostgreSQL's sqlstore.Dialect.
type Dialect struct{}

var _ sqlstore.Dialect = Dialect{}

// Name returns "postgres".
func (Dialect) Name() string { return "postgres" }

// Placeholder returns $n.
func (Dialect) Placeholder(n int) string { return sqlstore.DollarPlaceholder(n) }

// PostgreSQL error codes (SQLSTATE) the store maps.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// Classify reads the SQLSTATE of a server error.
func (Dialect) Classify(err error) sqlstore.ErrorKind {
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return sqlstore.ErrOther
	}
	switch e.Code {
	case uniqueViolation:
		return sqlstore.ErrUniqueViolation
	case foreignKeyViolation:
		return sqlstore.ErrForeignKeyViolation
	}
	return sqlstore.ErrOther
}

// NextSeq takes nextval of the sequence of that name. Sequences never hand
// out a value twice; a rolled back transaction leaves a gap.
func (Dialect) NextSeq(ctx context.Context, c sqlstore.Conn, seq sqlstore.Sequence) (int64, error) {
	var v int64
	if err := c.QueryRowContext(ctx, `SELECT nextval($1::text::regclass)`, string(seq)).Scan(&v); err != nil {
		return 0, fmt.Errorf("next %s: %w", seq, err)
	}
	return v, nil
}

// LockTenant takes a transaction-scoped advisory lock keyed by the tenant
// id, released at commit or rollback.
func (Dialect) LockTenant(ctx context.Context, c sqlstore.Conn, tenantID string) error {
	_, err := c.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", "tenant:"+tenantID)
	return err
}

// LockTenantShared takes the shared form of LockTenant's advisory lock.
func (Dialect) LockTenantShared(ctx context.Context, c sqlstore.Conn, tenantID string) error {
	_, err := c.ExecContext(ctx, "SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 7))", "tenant:"+tenantID)
	return err
}

// NextSeqs takes n values of a sequence in one round trip.
func (Dialect) NextSeqs(ctx context.Context, c sqlstore.Conn, seq sqlstore.Sequence, n int) ([]int64, error) {
	rows, err := c.QueryContext(ctx, `SELECT nextval($1::text::regclass) FROM generate_series(1, $2)`, string(seq), n)
	if err != nil {
		return nil, fmt.Errorf("next %d of %s: %w", n, seq, err)
	}
	defer rows.Close()
	out := make([]int64, 0, n)
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("next %d of %s: %w", n, seq, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("next %d of %s: %w", n, seq, err)
	}
	// nextval hands out values in call order, but a set's rows need not
	// come back in that order.
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// SkipLocked lets concurrent claims pass over rows another claim holds.
func (Dialect) SkipLocked() string { return " FOR UPDATE SKIP LOCKED" }

// QueueHeadsQuery reads each compute resource's first queued tasks with a
// LATERAL join that walks the queue index, LIMIT rows per resource.
func (Dialect) QueueHeadsQuery() string {
	return `SELECT ` + sqlstore.SchedColumns("t") + ` FROM compute_resources cr CROSS JOIN LATERAL (
		SELECT * FROM tasks q WHERE q.tenant_id = cr.tenant_id AND q.compute_resource_id = cr.id AND q.status = 'queued'
		ORDER BY q.queue_rank, q.queue_order, q.queue_seq LIMIT $2) t
	WHERE cr.tenant_id = $1`
}

// AdvanceSeq moves the sequence to atLeast when it is behind. It is for
// imports: a concurrent nextval between the check and setval could be
// overtaken, so callers should not rely on it while the sequence is busy.
func (Dialect) AdvanceSeq(ctx context.Context, c sqlstore.Conn, seq sqlstore.Sequence, atLeast int64) error {
	_, err := c.ExecContext(ctx,
		`SELECT setval($1::text::regclass, $2)
		WHERE COALESCE(pg_sequence_last_value($1::text::regclass), 0) < $2`,
		string(seq), atLeast)
	if err != nil {
		return fmt.Errorf("advance %s: %w", seq, err)
	}
	return nil
}

// PrepareStatements is false: pgx keeps its own per-connection cache of
// prepared statements.
func (Dialect) PrepareStatements() bool { return false }

// SeqExpr takes nextval within the statement, and currval for a later
// column of the row (PostgreSQL evaluates a row's values in order). The
// name is a constant of the store's (sqlbase.Sequence), never input.
func (Dialect) SeqExpr(seq sqlstore.Sequence) (next, again string) {
	return `nextval('` + string(seq) + `')`, `currval('` + string(seq) + `')`
}
