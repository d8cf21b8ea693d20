package cli

import (
	"fmt"
	"strconv"
	"strings"
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

func AsList(v any) []any {
	l, _ := v.([]any)
	return l
}

// Nodes takes the items of a connection ({edges: [{node}]}) or a plain list.
func Nodes(v any) []map[string]any {
	var out []map[string]any
	if m, ok := v.(map[string]any); ok {
		for _, e := range AsList(m["edges"]) {
			if em, ok := e.(map[string]any); ok {
				if n, ok := em["node"].(map[string]any); ok {
					out = append(out, n)
				}
			}
		}
		return out
	}
	for _, x := range AsList(v) {
		if n, ok := x.(map[string]any); ok {
			out = append(out, n)
		}
	}
	return out
}

// Str reads a nested field as text.
func Str(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[p]
	}
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

// Names joins the names of a list of objects.
func Names(m map[string]any, field string) string {
	var out []string
	for _, x := range AsList(m[field]) {
		if mm, ok := x.(map[string]any); ok {
			out = append(out, Str(mm, "name"))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}
