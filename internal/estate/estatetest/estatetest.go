// Package estatetest holds what the tests of estate and of its parts
// (llmconf) share: an estate file read and applied onto an estate, and the
// problems and changes that come back, read and listed. The parts' rules
// are tested through the estate file, as people meet them, so their tests
// need the same few steps as estate's own.
package estatetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
)

// Header heads every estate file.
const Header = "apiVersion: " + estate.APIVersion + "\nkind: " + estate.Kind + "\n"

// Now stamps every object the tests create.
var Now = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// SeqIDs returns an id maker that hands out "prefix-1", "prefix-2", … so
// that objects made by Apply have predictable ids.
func SeqIDs(prefix string) func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
}

// Parse parses a document that must be valid YAML of the right shape.
func Parse(t testing.TB, text string) *estate.Document {
	t.Helper()
	doc, err := estate.ParseDocument([]byte(text))
	if err != nil {
		t.Fatalf("parse:\n%s\n=> %v", text, err)
	}
	return doc
}

// Apply parses a document and applies it onto cur, failing the test when
// either refuses it.
func Apply(t testing.TB, cur *estate.Estate, text string) *estate.Estate {
	t.Helper()
	e, err := Parse(t, text).Apply(cur, "t", SeqIDs("a"), Now)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return e
}

// Problems returns the problems of a validation error, failing the test
// when err is something else.
func Problems(t testing.TB, err error) []basis.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *estate.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *estate.ValidationError", err, err)
	}
	if len(ve.Problems) == 0 {
		t.Fatal("a ValidationError with no problems")
	}
	return ve.Problems
}

// FindProblem returns the first problem whose text holds every one of want.
func FindProblem(problems []basis.Problem, want ...string) (basis.Problem, bool) {
	for _, p := range problems {
		if ContainsAll(p.String(), want...) {
			return p, true
		}
	}
	return basis.Problem{}, false
}

// ContainsAll reports whether s holds every one of want.
func ContainsAll(s string, want ...string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// ProblemList writes problems one a line, for a failure message.
func ProblemList(ps []basis.Problem) string { return list(ps) }

// ChangeList writes changes one a line, for a failure message.
func ChangeList(cs []estate.Change) string { return list(cs) }

func list[T fmt.Stringer](items []T) string {
	var b strings.Builder
	for _, v := range items {
		b.WriteString("\n  - ")
		b.WriteString(v.String())
	}
	return b.String()
}
