package estate_test

import (
	"errors"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
)

// FuzzParseDocument feeds bytes to ParseDocument and, when they parse, to
// Apply on an empty estate and to Validate. Nothing may panic; Apply fails
// only with a *ValidationError; and a document that validates cleanly must
// export to a file that parses and re-applies with no change.
//
// Seeds live in testdata/fuzz/FuzzParseDocument; run it with
//
//	go test -run '^$' -fuzz FuzzParseDocument -fuzztime 60s ./internal/estate
func FuzzParseDocument(f *testing.F) {
	f.Add(readExample(f))
	f.Add([]byte(smallDoc))
	f.Add([]byte(estatetest.Header))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := estate.ParseDocument(data)
		if err != nil {
			if doc != nil {
				t.Fatalf("ParseDocument returned a document with its error %v", err)
			}
			return
		}
		e, err := doc.Apply(&estate.Estate{}, "t", estatetest.SeqIDs("f"), estatetest.Now)
		if err != nil {
			var ve *estate.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Apply failed with %v (%T), want a *ValidationError with problems", err, err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			var ve *estate.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Validate failed with %v (%T), want a *ValidationError with problems", err, err)
			}
			return
		}
		_ = e.Warnings()

		out, err := e.Export().Marshal()
		if err != nil {
			t.Fatalf("Marshal of a valid estate: %v", err)
		}
		again, err := estate.ParseDocument(out)
		if err != nil {
			t.Fatalf("the export of a valid estate does not parse: %v\ninput:\n%s\nexport:\n%s", err, data, out)
		}
		next, err := again.Apply(e, "t", estatetest.SeqIDs("g"), estatetest.Now)
		if err != nil {
			t.Fatalf("the export of a valid estate does not apply: %v\ninput:\n%s\nexport:\n%s", err, data, out)
		}
		if cs := estate.Diff(e, next); len(cs) > 0 {
			t.Fatalf("export, parse and apply changed:%s\ninput:\n%s\nexport:\n%s", estatetest.ChangeList(cs), data, out)
		}
	})
}
