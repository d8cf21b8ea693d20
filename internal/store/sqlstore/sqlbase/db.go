// Package sqlbase is what every query of the SQL store stands on: the
// Dialect the drivers plug in, the connection a query runs on (Q) with its
// writes that map constraint violations onto the store's errors, the
// prepared-statement and placeholder caches, the conventions of stored
// values (times in unix microseconds, optional references as NULL, maps
// and slices as JSON), and the tables (Table) that pair each column with
// the field it holds, so that a SELECT list, an INSERT and a Scan are
// built from one declaration instead of positional lists counted by hand.
//
// Package sqlstore composes the store from it and from the packages of
// its domains; see sqlstore's documentation for the conventions.
package sqlbase

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klique-ai/klique/internal/store"
)

// ErrorKind classifies a driver error for the store's error mapping.
type ErrorKind int

const (
	// ErrOther is any error the store passes through unchanged.
	ErrOther ErrorKind = iota
	// ErrUniqueViolation is a unique or primary key constraint failure.
	ErrUniqueViolation
	// ErrForeignKeyViolation is a foreign key constraint failure, on either
	// side of the reference.
	ErrForeignKeyViolation
)

// Conn is what queries run on: a *sql.DB, a *sql.Conn or a *sql.Tx.
type Conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Sequence names the store's counters. Each dialect keeps them in its own way
// (a SEQUENCE on PostgreSQL, a counter row on SQLite) under these names.
type Sequence string

const (
	// SeqTaskQueue orders tasks in their queues (Task.QueueSeq).
	SeqTaskQueue Sequence = "task_queue_seq"
	// SeqAudit orders the audit trail (AuditEntry.Seq).
	SeqAudit Sequence = "audit_seq"
)

// Dialect is what differs between the databases behind the store.
type Dialect interface {
	// Name is the driver name Store.Driver reports.
	Name() string
	// Placeholder returns the bind marker of the n-th (1-based) argument.
	// Queries are written with '?' and rebound through it once per query
	// text.
	Placeholder(n int) string
	// Classify tells uniqueness and foreign key violations apart from other
	// errors.
	Classify(err error) ErrorKind
	// NextSeq returns the next value of a counter. Values are strictly
	// increasing and never reused, also across concurrent transactions; they
	// may have gaps.
	NextSeq(ctx context.Context, c Conn, seq Sequence) (int64, error)
	// AdvanceSeq makes sure NextSeq returns more than atLeast from now on. It
	// is used when a caller supplies its own sequence number (an import), so
	// that later numbers still sort after it.
	AdvanceSeq(ctx context.Context, c Conn, seq Sequence, atLeast int64) error
	// LockTenant takes a lock on a tenant that holds until the transaction
	// on c ends (see store.Queries.LockTenant).
	LockTenant(ctx context.Context, c Conn, tenantID string) error
	// LockTenantShared takes the shared form of LockTenant's lock.
	LockTenantShared(ctx context.Context, c Conn, tenantID string) error
	// NextSeqs returns n values of a counter, increasing, as NextSeq would
	// one at a time, in one round trip.
	NextSeqs(ctx context.Context, c Conn, seq Sequence, n int) ([]int64, error)
	// SeqExpr is an SQL expression that takes the next value of a counter
	// within the statement it is written in, as NextSeq would (nextval on
	// PostgreSQL), so that an insert takes its number in its own round
	// trip, and again one that is the value next took, for a later column
	// of the same row (currval); both "" where a counter needs a statement
	// of its own (SQLite).
	SeqExpr(seq Sequence) (next, again string)
	// SkipLocked is the clause that makes a subquery pick a row no other
	// transaction holds (" FOR UPDATE SKIP LOCKED"), or "" where writers
	// are serialised anyway.
	SkipLocked() string
	// QueueHeadsQuery selects the first (second argument) queued tasks of
	// every compute resource of a tenant (first argument), in the columns
	// of schedColumns, using the queue index rather than reading every
	// queued task.
	QueueHeadsQuery() string
	// PrepareStatements is true when the driver parses every statement it
	// is given afresh (modernc SQLite), so the store keeps them prepared
	// per connection; false when the driver caches them itself (pgx).
	PrepareStatements() bool
}

// DB is a database and its dialect, with the caches every query on it
// shares.
type DB struct {
	db      *sql.DB
	dialect Dialect
	binder  *binder
	stmts   *stmtCache
}

// NewDB wraps db, whose statements are kept prepared when the dialect asks
// for it.
func NewDB(db *sql.DB, d Dialect) *DB {
	b := &DB{db: db, dialect: d, binder: newBinder(d)}
	if d.PrepareStatements() {
		b.stmts = &stmtCache{db: db}
	}
	return b
}

// SQL is the database under b.
func (b *DB) SQL() *sql.DB { return b.db }

// Dialect is b's dialect.
func (b *DB) Dialect() Dialect { return b.dialect }

// Close closes the prepared statements and the database.
func (b *DB) Close() error {
	b.stmts.close()
	return b.db.Close()
}

// Q is the connection pool's queries, outside any transaction.
func (b *DB) Q() *Q { return &Q{b: b, c: b.db} }

// OnTx returns queries that run in tx, which the caller ends.
func (b *DB) OnTx(tx *sql.Tx) *Q { return &Q{b: b, c: tx, tx: tx, inTx: true} }

// Unprepared returns queries on c that never use prepared statements (a
// test's recorder: a prepared statement would bypass c).
func (b *DB) Unprepared(c Conn) *Q {
	u := *b
	u.stmts = nil
	return &Q{b: &u, c: c}
}

// InTx runs fn in one transaction. It commits when fn returns nil and rolls
// back when fn returns an error, which it returns unchanged so that callers
// can test for their own sentinel errors. When fn panics the deferred
// rollback runs before the panic carries on up the stack.
func (b *DB) InTx(ctx context.Context, fn func(q *Q) error) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	done := false
	defer func() {
		if !done {
			// Reached on error and on panic. The rollback error is of no
			// use to the caller: fn's error or the panic says what failed.
			_ = tx.Rollback()
		}
	}()
	if err := fn(b.OnTx(tx)); err != nil {
		return err
	}
	done = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// Q runs queries on a connection: the pool, or a transaction.
type Q struct {
	b    *DB
	c    Conn
	tx   *sql.Tx // set in a transaction of the store's own
	inTx bool
}

// Conn is the connection q runs on, for the dialect's own statements.
func (q *Q) Conn() Conn { return q.c }

// Dialect is the dialect of q's database.
func (q *Q) Dialect() Dialect { return q.b.dialect }

// InTransaction says whether q runs in a transaction.
func (q *Q) InTransaction() bool { return q.inTx }

// Atomic runs fn so that all of its statements commit together: in the
// caller's transaction if there is one, else in a new one. Writes that touch
// several rows (a profile and its pool links, a counter and a task) use it.
func (q *Q) Atomic(ctx context.Context, fn func(q *Q) error) error {
	if q.inTx {
		return fn(q)
	}
	return q.b.InTx(ctx, fn)
}

// Exec runs a statement.
func (q *Q) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.prepared(ctx, query, len(args)); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.c.ExecContext(ctx, q.b.binder.bind(query), args...)
}

// Query runs a query for rows.
func (q *Q) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.prepared(ctx, query, len(args)); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.c.QueryContext(ctx, q.b.binder.bind(query), args...)
}

// QueryRow runs a query for one row.
func (q *Q) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.prepared(ctx, query, len(args)); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.c.QueryRowContext(ctx, q.b.binder.bind(query), args...)
}

// ExecKept is Exec for a statement text that is one of a fixed few
// however many arguments it takes (the model-call batch inserts): it is
// kept prepared even past maxStmtArgs.
func (q *Q) ExecKept(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.prepared(ctx, query, 0); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.c.ExecContext(ctx, q.b.binder.bind(query), args...)
}

// prepared returns the statement for query, prepared once and reused on
// every connection, bound to the transaction when there is one; nil when
// the store does not prepare statements or the query is not worth keeping
// (nargs past maxStmtArgs: a text built for a long list).
func (q *Q) prepared(ctx context.Context, query string, nargs int) *sql.Stmt {
	st := q.b.stmts.get(ctx, q.b.binder.bind(query), nargs, q.tx != nil)
	if st == nil || q.tx == nil {
		return st
	}
	return q.tx.StmtContext(ctx, st)
}

// Write runs an insert, update or delete and maps constraint violations onto
// the store's errors: a unique violation is a conflict; a foreign key
// violation is onForeignKey (ErrNotFound when the write names a missing
// object, ErrConflict when a delete would orphan a reference). It returns the
// number of rows affected.
func (q *Q) Write(ctx context.Context, what string, onForeignKey error, query string, args ...any) (int64, error) {
	res, err := q.Exec(ctx, query, args...)
	if err != nil {
		return 0, q.MapErr(err, what, onForeignKey)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

// WriteOne is Write for statements that must affect exactly one existing
// row: none affected means the row (in that tenant) does not exist.
func (q *Q) WriteOne(ctx context.Context, what string, onForeignKey error, query string, args ...any) error {
	n, err := q.Write(ctx, what, onForeignKey, query, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}

// MapErr maps a driver error as Write does, with what as context.
func (q *Q) MapErr(err error, what string, onForeignKey error) error {
	switch q.b.dialect.Classify(err) {
	case ErrUniqueViolation:
		return fmt.Errorf("%s: %w: %w", what, store.ErrConflict, err)
	case ErrForeignKeyViolation:
		if errors.Is(onForeignKey, store.ErrConflict) {
			return fmt.Errorf("%s: still referenced: %w: %w", what, store.ErrConflict, err)
		}
		return fmt.Errorf("%s: a referenced object: %w: %w", what, store.ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// stmtCache keeps prepared statements by query text. database/sql
// prepares a cached *sql.Stmt lazily on each connection it runs on and
// remembers it there, so a statement is parsed once per connection rather
// than on every call. Query texts built at run time with long argument
// lists (IN lists) are not kept, and the cache stops growing at a bound.
//
// Preparing takes a connection from the pool. A transaction already holds
// one, and waiting for another could wait forever (the pool may be one
// connection), so a statement first met inside a transaction runs
// unprepared and is prepared in the background for the next call.
type stmtCache struct {
	db      *sql.DB
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool
	closed  bool
	// preparing counts background prepares, which Close waits for: one
	// may be opening a connection, and nothing may touch the database
	// after it is closed.
	preparing sync.WaitGroup
}

const (
	maxStmtCache = 1024
	// maxStmtArgs leaves out statements built for long lists.
	maxStmtArgs = 24
)

// get returns the prepared statement for query, or nil. inTx says the
// caller holds a connection, so the statement must not be prepared now.
func (c *stmtCache) get(ctx context.Context, query string, nargs int, inTx bool) *sql.Stmt {
	if c == nil || nargs > maxStmtArgs {
		return nil
	}
	c.mu.Lock()
	st, ok := c.stmts[query]
	if ok || c.closed || c.pending[query] || len(c.stmts)+len(c.pending) >= maxStmtCache {
		c.mu.Unlock()
		return st
	}
	if c.pending == nil {
		c.stmts, c.pending = map[string]*sql.Stmt{}, map[string]bool{}
	}
	c.pending[query] = true
	if inTx {
		c.preparing.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.preparing.Done()
			c.prepare(context.Background(), query)
		}()
		return nil
	}
	c.mu.Unlock()
	return c.prepare(ctx, query)
}

// prepare prepares query on the pool and keeps it. A statement that fails
// to prepare is left to the plain path, which reports the error with its
// context, and is tried again on its next use.
func (c *stmtCache) prepare(ctx context.Context, query string) *sql.Stmt {
	st, err := c.db.PrepareContext(context.WithoutCancel(ctx), query)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, query)
	if err != nil {
		return nil
	}
	if c.closed {
		_ = st.Close()
		return nil
	}
	c.stmts[query] = st
	return st
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.preparing.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		_ = st.Close()
	}
	c.stmts = nil
}

// binder rewrites '?' placeholders into the dialect's style. Static query
// texts are rewritten once and cached; the cache stops growing at a bound so
// that queries built at run time (IN lists of any length) cannot grow it
// without limit.
type binder struct {
	d        Dialect
	identity bool
	cache    sync.Map // string -> string
	size     atomic.Int64
}

const maxBindCache = 1024

func newBinder(d Dialect) *binder {
	return &binder{d: d, identity: d.Placeholder(1) == "?"}
}

func (b *binder) bind(query string) string {
	if b.identity {
		return query
	}
	if v, ok := b.cache.Load(query); ok {
		return v.(string)
	}
	out := Rebind(query, b.d.Placeholder)
	if b.size.Load() < maxBindCache {
		if _, loaded := b.cache.LoadOrStore(query, out); !loaded {
			b.size.Add(1)
		}
	}
	return out
}

// Rebind replaces each '?' outside quoted strings and identifiers with
// placeholder(n), counting from 1.
func Rebind(query string, placeholder func(n int) string) string {
	var sb strings.Builder
	sb.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '?':
			n++
			sb.WriteString(placeholder(n))
			continue
		}
		sb.WriteByte(ch)
	}
	return sb.String()
}

// DollarPlaceholder is PostgreSQL's placeholder style: $1, $2, ...
func DollarPlaceholder(n int) string { return "$" + strconv.Itoa(n) }

// QuestionPlaceholder is SQLite's placeholder style: ?.
func QuestionPlaceholder(int) string { return "?" }
