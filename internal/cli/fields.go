package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// MutationRetry is how long a creating command sends its mutation again
// while the server cannot be reached or its answer is lost. Each try
// carries the same idempotency key, so the server creates the thing once.
const MutationRetry = time.Minute

// NewIdempotencyKey is the key of one command run: made once, before the
// first try, and sent with every retry of it.
func NewIdempotencyKey() string { return uuid.NewString() }

// Text writes a value the server sent as a table cell: a number as the
// API wrote it (3, 2.5), a boolean as true or false, and nothing for nil.
func Text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// Opt writes a nullable value (a pointer of a generated type) as Text
// writes it, and nothing when the server sent null.
func Opt[T any](p *T) string {
	if p == nil {
		return ""
	}
	return Text(*p)
}

// Ptr is a pointer to v, or nil for its zero value: a flag left unset is
// an input field or variable sent as null.
func Ptr[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
