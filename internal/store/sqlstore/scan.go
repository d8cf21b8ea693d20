package sqlstore

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

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// getOne runs a query for one row. No row is store.ErrNotFound, with what as
// context ("get pool 0193…").
func getOne[T any](ctx context.Context, q *queries, what string, scan func(scanner) (T, error), query string, args ...any) (T, error) {
	v, err := scan(q.queryRow(ctx, query, args...))
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

// getAll runs a query and scans every row. An empty result is an empty,
// non-nil slice.
func getAll[T any](ctx context.Context, q *queries, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.query(ctx, query, args...)
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

// micros is how every time is stored: unix microseconds, UTC.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros reads a stored time back.
func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// nullMicros stores an optional time: nil is NULL.
func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// timePtr reads an optional time back.
func timePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// nullString stores an optional reference: "" is NULL, so that the foreign
// key does not apply.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// marshalJSON stores a map, slice or struct as JSON text. Nil maps and slices
// are stored as their empty forms so that the column never holds "null".
func marshalJSON[T any](v T, empty string) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if string(b) == "null" {
		return empty, nil
	}
	return string(b), nil
}

// stringMap reads a JSON object column; empty text or null is an empty map.
func stringMap(text string) (map[string]string, error) {
	m := map[string]string{}
	if text == "" || text == "null" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("decode JSON object: %w", err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

// stringSlice reads a JSON array column; empty text or null is an empty
// slice.
func stringSlice(text string) ([]string, error) {
	s := []string{}
	if text == "" || text == "null" {
		return s, nil
	}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("decode JSON array: %w", err)
	}
	if s == nil {
		s = []string{}
	}
	return s, nil
}

// assignID sets *id to a new model.NewID() when it is empty, and returns a
// function that undoes that. Creates call the undo when the insert fails, so
// that a caller retrying passes what it passed the first time.
func assignID(id *string) (undo func()) {
	if *id != "" {
		return func() {}
	}
	*id = model.NewID()
	return func() { *id = "" }
}

// nullInt stores an optional number: nil is NULL.
func nullInt(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}
