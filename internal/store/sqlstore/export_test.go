package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/klique-ai/klique/internal/store"
)

// Recorded is a statement a store method would have run, as the database
// would have received it (placeholders bound for its dialect).
type Recorded struct {
	Query string
	Args  []any
}

type recorder struct{ got []Recorded }

var errRecorded = errors.New("sqlstore test: statement recorded, not run")

func (r *recorder) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	r.got = append(r.got, Recorded{query, args})
	return nil, errRecorded
}

func (r *recorder) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	r.got = append(r.got, Recorded{query, args})
	return nil, errRecorded
}

func (r *recorder) QueryRowContext(context.Context, string, ...any) *sql.Row {
	panic("sqlstore test: the recorder answers lists only")
}

// RecordQueries runs fn on queries of s that record the statements they
// would run instead of running them, so a test can EXPLAIN exactly what a
// store method sends.
func RecordQueries(s store.Store, fn func(q store.Queries)) []Recorded {
	r := &recorder{}
	fn(newQueries(s.(*Store).base.Unprepared(r)))
	return r.got
}

// DB is the database under s.
func DB(s store.Store) *sql.DB { return s.(*Store).base.SQL() }
