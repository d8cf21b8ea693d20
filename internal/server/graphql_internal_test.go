package server

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/klique-ai/klique/graph"
)

func TestStrictNumbers(t *testing.T) {
	s := strictNumbers{schema: graph.NewExecutableSchema(graph.Config{}).Schema()}
	intT := &ast.Type{NamedType: "Int"}
	listOf := func(e *ast.Type) *ast.Type { return &ast.Type{Elem: e} }
	pool := &ast.Type{NamedType: "PoolInput", NonNull: true}

	for _, c := range []struct {
		name  string
		typ   *ast.Type
		value any
		// want is where the error points, "" for no error.
		want string
	}{
		{"a JSON number for an Int passes", intT, json.Number("4"), ""},
		{"a coerced int64 for an Int passes", intT, int64(4), ""},
		{"null passes", intT, nil, ""},
		{"a string for an Int is refused", intT, "4", `$v must be a number (Int), not the string "4"`},
		{"a string for a Float is refused", &ast.Type{NamedType: "Float"}, "0.5", `$v must be a number (Float)`},
		{"a string for a String passes", &ast.Type{NamedType: "String"}, "4", ""},
		{"a string in a list of Ints is refused with its index", listOf(intT), []any{json.Number("1"), "2"}, "$v[1] must be a number"},
		{"one string given for a list of Ints is refused", listOf(intT), "2", "$v must be a number"},
		{"a string in an input object field is refused with its path", pool,
			map[string]any{"name": "p", "capacityGpus": "4"}, "$v.capacityGpus must be a number (Int)"},
		{"numbers in an input object pass", pool,
			map[string]any{"name": "p", "capacityGpus": json.Number("4"), "gpuMemoryGb": json.Number("80")}, ""},
		{"an unknown type is left to the validator", &ast.Type{NamedType: "Nope"}, "x", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.check(c.typ, c.value, "$v")
			switch {
			case c.want == "" && err != nil:
				t.Errorf("check = %v, want no error", err)
			case c.want != "" && err == nil:
				t.Errorf("check passed, want an error at %q", c.want)
			case c.want != "" && !strings.Contains(err.Message, c.want):
				t.Errorf("check = %q, want it to say %q", err.Message, c.want)
			case err != nil && err.Extensions["code"] != "GRAPHQL_VALIDATION_FAILED":
				t.Errorf("code = %v, want GRAPHQL_VALIDATION_FAILED", err.Extensions["code"])
			}
		})
	}
}

// A refusal's close reason names the refusal, and a long message is cut to
// what a close frame holds, at a rune boundary: a longer reason would make
// the close frame itself fail to go out.
func TestInitCloseReason(t *testing.T) {
	long := errors.New(strings.Repeat("é", 100) + "; close one")
	for _, c := range []struct {
		code   int
		err    error
		prefix string
	}{
		{closeForbidden, errors.New("you have 5 subscription connections open, the most allowed; close one"), "forbidden: you have 5"},
		{closeUnauthorized, long, "unauthenticated: éé"},
		{closeInternal, errors.New("could not check the credential right now; try again"), "unavailable: could not check"},
	} {
		got := initCloseReason(c.code, c.err)
		if !strings.HasPrefix(got, c.prefix) || len(got) > maxCloseReason || !utf8.ValidString(got) {
			t.Errorf("initCloseReason(%d, %q) = %q (%d bytes): want it to start %q, fit %d bytes and be valid UTF-8",
				c.code, c.err, got, len(got), c.prefix, maxCloseReason)
		}
	}
}
