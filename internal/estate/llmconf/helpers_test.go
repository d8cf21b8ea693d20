package llmconf_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
)

// The gateway's rules are tested as people meet them: through an estate
// file applied to an estate, the estate's validation and its diff. So these
// helpers are a small copy of estate's: a file's header, an estate that
// holds what the gateway's objects name, and readers of problems and
// changes.

const header = "apiVersion: klique/v1\nkind: Estate\n"

// testNow stamps every object the tests create.
var testNow = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

// seqIDs returns an id maker that hands out "id-1", "id-2", … so that
// objects made by Apply have predictable ids.
func seqIDs(prefix string) func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
}

// baseEstate is a valid estate holding what the gateway's objects name:
// groups research and vision, projects fraud (of research) and shared.
func baseEstate() *estate.Estate {
	return &estate.Estate{
		Groups: []*model.Group{
			{ID: "g-research", TenantID: "t", Name: "research"},
			{ID: "g-vision", TenantID: "t", Name: "vision"},
		},
		Projects: []*model.Project{
			{ID: "prj-fraud", TenantID: "t", Name: "fraud", GroupID: "g-research"},
			{ID: "prj-shared", TenantID: "t", Name: "shared"},
		},
	}
}

// parseYAML parses a document that must be valid YAML of the right shape.
func parseYAML(t testing.TB, text string) *estate.Document {
	t.Helper()
	doc, err := estate.ParseDocument([]byte(text))
	if err != nil {
		t.Fatalf("parse:\n%s\n=> %v", text, err)
	}
	return doc
}

func applyTo(t *testing.T, cur *estate.Estate, text string) *estate.Estate {
	t.Helper()
	e, err := parseYAML(t, text).Apply(cur, "t", seqIDs("a"), testNow)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return e
}

// problemsOf returns the problems of a validation error, failing the test
// when err is something else.
func problemsOf(t testing.TB, err error) []basis.Problem {
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

// findProblem returns the first problem whose text holds every one of want.
func findProblem(problems []basis.Problem, want ...string) (basis.Problem, bool) {
	for _, p := range problems {
		if containsAll(p.String(), want...) {
			return p, true
		}
	}
	return basis.Problem{}, false
}

func containsAll(s string, want ...string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

func problemList(ps []basis.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

func changeList(cs []estate.Change) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("\n  - ")
		b.WriteString(c.String())
	}
	return b.String()
}
