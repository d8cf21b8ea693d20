package estate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/docbudget"
	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
	"github.com/klique-ai/klique/internal/estate"
)

// An estate file that nests anchors 8 levels deep, 10 aliases a level, in
// an app's launch form (issue 39: 910 bytes took 20.6 s of CPU and 720 MB)
// is refused by its budget before it is decoded, with a message that
// names the limit. Anchors used within the budget still read.
func TestEstateBudget(t *testing.T) {
	t.Parallel()
	t.Run("the alias bomb is refused before it is decoded", func(t *testing.T) {
		t.Parallel()
		doc, err := estate.ParseDocument([]byte(docbudgettest.Estate(8, 10)))
		var over *docbudget.Error
		if !errors.As(err, &over) || doc != nil {
			t.Fatalf("ParseDocument = %v, %v: want a budget refusal", doc, err)
		}
		if !strings.HasPrefix(err.Error(), "estate file: ") || !strings.Contains(err.Error(), "aliases expanded; the limit is 10,000: use fewer anchors and aliases") {
			t.Fatalf("message %q", err)
		}
	})
	t.Run("a misused anchor is refused with its line", func(t *testing.T) {
		t.Parallel()
		_, err := estate.ParseDocument([]byte("apiVersion: klique/v1\nkind: Estate\nprojects:\n  - {name: a, description: *d}\n"))
		if err == nil || !strings.Contains(err.Error(), "estate file: alias *d (line 4) comes before any anchor &d") {
			t.Fatalf("ParseDocument = %v", err)
		}
	})
	t.Run("anchors within the budget read as before", func(t *testing.T) {
		t.Parallel()
		doc, err := estate.ParseDocument([]byte("apiVersion: klique/v1\nkind: Estate\nprojects:\n  - {name: a, description: &d shared}\n  - {name: b, description: *d}\n"))
		if err != nil || len(doc.Projects) != 2 || doc.Projects[1].Description != "shared" {
			t.Fatalf("ParseDocument = %+v, %v", doc, err)
		}
	})
	t.Run("a syntax error still gives its line", func(t *testing.T) {
		t.Parallel()
		_, err := estate.ParseDocument([]byte("apiVersion: klique/v1\nkind: Estate\nprojects: [a\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "estate file: [3:") {
			t.Fatalf("ParseDocument = %v", err)
		}
	})
}
