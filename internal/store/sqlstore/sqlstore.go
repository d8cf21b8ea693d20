// Package sqlstore is the one implementation of store.Store over database/sql.
// The SQLite and PostgreSQL drivers (packages sqlite and postgres) differ only
// in their schema migrations and in a small Dialect; every query lives here or
// in a package of its domain that the store embeds (workflow), so both drivers
// behave the same and pass the same conformance suite. All of them stand on
// package sqlbase: the dialect, the connection and its writes, and the tables
// (sqlbase.Table) that pair each column with the field it holds, from which
// statements and scans are built.
//
// Conventions every query follows:
//
//   - Times are BIGINT unix microseconds in UTC and read back as
//     time.UnixMicro(v).UTC(): a time round-trips to microsecond precision
//     (finer digits are dropped, the location becomes UTC). Nil *time.Time
//     fields are NULL.
//   - Optional references (Pool.GPUClassID, Profile.GPUClassID,
//     Project.GroupID, APIKey.ProjectID, Task.ProjectID) are NULL when empty,
//     so that foreign keys only check references that are set, and read back
//     as "".
//   - Maps and slices (Pool.Labels, Pool.ProfileOrder, Profile.QueuingOrder,
//     Task.Spec) are JSON text. Nil and empty are stored alike and read back
//     as empty, non-nil values, so callers can range, index and append
//     without nil checks and JSON APIs print [] and {} rather than null.
//   - Every tenant-scoped query filters on tenant_id, and references between
//     tenant objects are composite foreign keys on (tenant_id, id): an object
//     of one tenant can neither be read through nor refer to another tenant.
//   - Creates assign a new model.NewID() when the ID is empty. Updates write
//     every field except ID, TenantID and CreatedAt (tasks are narrower: see
//     UpdateTask).
//
// Errors: a missing row is store.ErrNotFound; a uniqueness violation is
// store.ErrConflict; a foreign key violation is store.ErrNotFound when a write
// refers to a missing object and store.ErrConflict when a delete would leave
// a reference dangling. The driver's error stays in the chain for errors.As.
//
// On PostgreSQL a failed statement aborts the surrounding transaction, so
// code running in InTx must return the first error it gets rather than carry
// on with more queries.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
	"github.com/klique-ai/klique/internal/store/sqlstore/workflow"
)

// What the drivers plug in, defined in package sqlbase with the machinery
// that uses it.
type (
	// Dialect is what differs between the databases behind the store.
	Dialect = sqlbase.Dialect
	// Conn is what queries run on: a *sql.DB, a *sql.Conn or a *sql.Tx.
	Conn = sqlbase.Conn
	// Sequence names the store's counters.
	Sequence = sqlbase.Sequence
	// ErrorKind classifies a driver error for the store's error mapping.
	ErrorKind = sqlbase.ErrorKind
)

const (
	ErrOther               = sqlbase.ErrOther
	ErrUniqueViolation     = sqlbase.ErrUniqueViolation
	ErrForeignKeyViolation = sqlbase.ErrForeignKeyViolation
	SeqTaskQueue           = sqlbase.SeqTaskQueue
	SeqAudit               = sqlbase.SeqAudit
)

// Rebind replaces each '?' outside quoted strings and identifiers with
// placeholder(n), counting from 1.
func Rebind(query string, placeholder func(n int) string) string {
	return sqlbase.Rebind(query, placeholder)
}

// DollarPlaceholder is PostgreSQL's placeholder style: $1, $2, ...
func DollarPlaceholder(n int) string { return sqlbase.DollarPlaceholder(n) }

// QuestionPlaceholder is SQLite's placeholder style: ?.
func QuestionPlaceholder(n int) string { return sqlbase.QuestionPlaceholder(n) }

// Store implements store.Store over a *sql.DB.
type Store struct {
	queries
	base *sqlbase.DB
}

var _ store.Store = (*Store)(nil)

// New returns a store over db, which must already hold the schema (see
// Migrate). The store owns db: Close closes it.
func New(db *sql.DB, d Dialect) *Store {
	base := sqlbase.NewDB(db, d)
	return &Store{queries: *newQueries(base.Q()), base: base}
}

// Driver names the driver.
func (s *Store) Driver() string { return s.base.Dialect().Name() }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.base.SQL().PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", s.Driver(), err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.base.Close() }

// InTx runs fn in one transaction. It commits when fn returns nil and rolls
// back when fn returns an error, which it returns unchanged so that callers
// can test for their own sentinel errors. When fn panics the deferred
// rollback runs before the panic carries on up the stack.
func (s *Store) InTx(ctx context.Context, fn func(q store.Queries) error) error {
	return s.base.InTx(ctx, func(q *sqlbase.Q) error { return fn(newQueries(q)) })
}

// queries implements store.Queries on a connection: the pool for the Store
// itself, or a transaction inside InTx. The queries of a domain with a
// package of its own are its, embedded.
type queries struct {
	*sqlbase.Q
	workflow.Workflows
}

var _ store.Queries = (*queries)(nil)

func newQueries(q *sqlbase.Q) *queries {
	return &queries{Q: q, Workflows: workflow.Workflows{Q: q}}
}

// atomic is Q.Atomic for the queries of this package.
func (q *queries) atomic(ctx context.Context, fn func(q *queries) error) error {
	return q.Atomic(ctx, func(c *sqlbase.Q) error { return fn(newQueries(c)) })
}

// LockTenant serialises allocation-model changes of one tenant across
// replicas; see store.Queries.LockTenant.
func (q *queries) LockTenant(ctx context.Context, tenantID string) error {
	if !q.InTransaction() {
		return nil
	}
	if err := q.Dialect().LockTenant(ctx, q.Conn(), tenantID); err != nil {
		return fmt.Errorf("lock tenant %s: %w", tenantID, err)
	}
	return nil
}

// LockTenantShared takes the shared form of the tenant lock; see
// store.Queries.LockTenantShared.
func (q *queries) LockTenantShared(ctx context.Context, tenantID string) error {
	if !q.InTransaction() {
		return nil
	}
	if err := q.Dialect().LockTenantShared(ctx, q.Conn(), tenantID); err != nil {
		return fmt.Errorf("lock tenant %s (shared): %w", tenantID, err)
	}
	return nil
}

// EstateVersion returns the version of a tenant's allocation model.
func (q *queries) EstateVersion(ctx context.Context, tenantID string) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `SELECT version FROM estate_versions WHERE tenant_id = ?`, tenantID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("estate version of tenant %s: %w", tenantID, err)
	}
	return v, nil
}

// BumpEstateVersion increments the version of a tenant's allocation model.
func (q *queries) BumpEstateVersion(ctx context.Context, tenantID string) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `INSERT INTO estate_versions (tenant_id, version) VALUES (?, 1)
		ON CONFLICT (tenant_id) DO UPDATE SET version = estate_versions.version + 1 RETURNING version`, tenantID).Scan(&v)
	if err != nil {
		return 0, q.MapErr(err, "bump estate version of tenant "+tenantID, store.ErrNotFound)
	}
	return v, nil
}
