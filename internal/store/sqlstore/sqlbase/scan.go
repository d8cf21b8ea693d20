package sqlbase

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Scanner is a *sql.Row or *sql.Rows.
type Scanner interface {
	Scan(dest ...any) error
}

// GetOne runs a query for one row. No row is store.ErrNotFound, with what as
// context ("get pool 0193…").
func GetOne[T any](ctx context.Context, q *Q, what string, scan func(Scanner) (T, error), query string, args ...any) (T, error) {
	v, err := scan(q.QueryRow(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// GetAll runs a query and scans every row. An empty result is an empty,
// non-nil slice.
func GetAll[T any](ctx context.Context, q *Q, what string, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Micros is how every time is stored: unix microseconds, UTC.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros reads a stored time back.
func FromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// NullMicros stores an optional time: nil is NULL.
func NullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// NullString stores an optional reference: "" is NULL, so that the foreign
// key does not apply.
func NullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// MarshalJSON stores a map, slice or struct as JSON text. Nil maps and slices
// are stored as their empty forms so that the column never holds "null".
func MarshalJSON[T any](v T, empty string) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if string(b) == "null" {
		return empty, nil
	}
	return string(b), nil
}

// AssignID sets *id to a new model.NewID() when it is empty, and returns a
// function that undoes that. Creates call the undo when the insert fails, so
// that a caller retrying passes what it passed the first time.
func AssignID(id *string) (undo func()) {
	if *id != "" {
		return func() {}
	}
	*id = model.NewID()
	return func() { *id = "" }
}

// NullInt stores an optional number: nil is NULL.
func NullInt(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}
