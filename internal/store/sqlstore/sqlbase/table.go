package sqlbase

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
)

// Col is one column of a table and the field of a T it holds. Field
// returns where a Scan stores the column: a pointer to the field when the
// database holds it as it is (*string, *int, *int64, *bool, *float64,
// *[]byte), or one of the converters of this package (Time, JSON, ...),
// which scan and store it in its stored form. Writes take the same field's
// value, so a column's read and write cannot drift apart.
type Col[T any] struct {
	Name  string
	Field func(*T) any
}

// C is a Col: one line of a table's declaration.
func C[T any](name string, field func(*T) any) Col[T] { return Col[T]{name, field} }

// Table is the columns of a table in the order its statements list them.
// SELECT lists (List), INSERT column and placeholder lists (Insert), UPDATE
// assignments (Assign), the arguments of a write (Values) and the
// destinations of a Scan all come from it, so no statement lists columns
// by position by hand.
type Table[T any] []Col[T]

// List is the comma-separated column names.
func (t Table[T]) List() string { return t.As("") }

// As is List with every name qualified by a table alias ("t" gives "t.a,
// t.b"); "" leaves them bare.
func (t Table[T]) As(alias string) string {
	if alias != "" {
		alias += "."
	}
	names := make([]string, len(t))
	for i, c := range t {
		names[i] = alias + c.Name
	}
	return strings.Join(names, ", ")
}

// Insert is the INSERT statement of every column of t into table.
func (t Table[T]) Insert(table string) string {
	return `INSERT INTO ` + table + ` (` + t.List() + `) VALUES (` + Placeholders(len(t)) + `)`
}

// Assign is the SET list of an UPDATE of every column of t: "a = ?, b = ?".
func (t Table[T]) Assign() string {
	sets := make([]string, len(t))
	for i, c := range t {
		sets[i] = c.Name + " = ?"
	}
	return strings.Join(sets, ", ")
}

// Values are the arguments that write v's fields into t's columns, in
// order; more may be appended (a WHERE clause's).
func (t Table[T]) Values(v *T, more ...any) []any {
	out := make([]any, len(t), len(t)+len(more))
	for i, c := range t {
		out[i] = value(c.Field(v))
	}
	return append(out, more...)
}

// Scan reads a row of t's columns (in t's order) into a new T.
func (t Table[T]) Scan(r Scanner) (*T, error) {
	v := new(T)
	if err := r.Scan(t.Dest(v)...); err != nil {
		return nil, err
	}
	return v, nil
}

// Dest are the Scan destinations of t's columns in v, for a row that
// selects more than t (a join).
func (t Table[T]) Dest(v *T) []any {
	dest := make([]any, len(t))
	for i, c := range t {
		dest[i] = c.Field(v)
	}
	return dest
}

// Only is the columns of t named, in the order named. A name t lacks is a
// mistake in a declaration, found when the package loads.
func (t Table[T]) Only(names ...string) Table[T] {
	out := make(Table[T], 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(t, func(c Col[T]) bool { return c.Name == n })
		if i < 0 {
			panic(fmt.Sprintf("sqlbase: no column %q", n))
		}
		out = append(out, t[i])
	}
	return out
}

// Without is t less the columns named.
func (t Table[T]) Without(names ...string) Table[T] {
	t.Only(names...) // the names must be t's
	return slices.DeleteFunc(slices.Clone(t), func(c Col[T]) bool { return slices.Contains(names, c.Name) })
}

// value is what a write stores from a field Col.Field returned: the
// pointed-to value, or the converter itself, which the driver asks for its
// value (database/sql calls driver.Valuer; pgx does too).
func value(field any) any {
	switch p := field.(type) {
	case *string:
		return *p
	case *int:
		return *p
	case *int64:
		return *p
	case *bool:
		return *p
	case *float64:
		return *p
	case *[]byte:
		return *p
	case driver.Valuer:
		return p
	}
	panic(fmt.Sprintf("sqlbase: a field of type %T is neither plain nor a converter", field))
}

// InsertNumbered inserts v into table with its column col numbered from
// the counter seq, and stores the number taken in *num. Where the dialect
// can take the number inside the INSERT (Dialect.SeqExpr) it is one round
// trip rather than two: an enqueue's and an audit entry's.
func InsertNumbered[T any](ctx context.Context, q *Q, what string, onForeignKey error, t Table[T], table string, v *T, col string, seq Sequence, num *int64) error {
	expr, _ := q.Dialect().SeqExpr(seq)
	if expr == "" {
		n, err := q.Dialect().NextSeq(ctx, q.Conn(), seq)
		if err != nil {
			return fmt.Errorf("%s: next %s: %w", what, seq, err)
		}
		*num = n
		_, err = q.Write(ctx, what, onForeignKey, t.Insert(table), t.Values(v)...)
		return err
	}
	rest := t.Without(col)
	query := `INSERT INTO ` + table + ` (` + rest.List() + `, ` + col + `) VALUES (` + Placeholders(len(rest)) + `, ` + expr + `) RETURNING ` + col
	if err := q.QueryRow(ctx, query, rest.Values(v)...).Scan(num); err != nil {
		return q.MapErr(err, what, onForeignKey)
	}
	return nil
}
