package studycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/klique-ai/klique/internal/docbudget"
	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
)

// FuzzReadStudyFile feeds a study file to readStudyFile, which makes
// startStudy's input of it. Nothing may panic; a file over FileBudget is
// refused with the budget's message; an input read, written back as JSON
// (which is YAML), reads as the same input.
//
// Seeds live in testdata/fuzz/FuzzReadStudyFile; run it with
//
//	go test -run '^$' -fuzz FuzzReadStudyFile -fuzztime 60s ./internal/cli/studycmd
func FuzzReadStudyFile(f *testing.F) {
	f.Add([]byte("name: lr-layers-grid\nstrategy: grid\nobjective: accuracy\nmaxConcurrent: 2\nbudget: {trials: 6}\nspace:\n  - {name: lr, kind: choice, values: [\"0.01\", \"0.1\", \"1\"]}\n  - {name: layers, kind: int, lo: 2, hi: 3}\n"))
	f.Add([]byte("name: x\nspace: " + docbudgettest.Anchors(3, 3) + "\nbudget: " + docbudgettest.Last(3) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := readStudyFile(bytes.NewReader(data), "-")
		var over *docbudget.Error
		if berr := FileBudget.YAML(data); errors.As(berr, &over) {
			if err == nil || err.Error() != berr.Error()+" (in -)" {
				t.Fatalf("over the budget (%v), read as %v, %v", berr, in, err)
			}
			return
		}
		if err != nil {
			if in != nil {
				t.Fatalf("readStudyFile returned %v with its error %v", in, err)
			}
			return
		}
		if in == nil {
			t.Fatal("readStudyFile returned neither an input nor an error")
		}
		js, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("the input cannot be sent as JSON: %v", err)
		}
		again, err := readStudyFile(bytes.NewReader(js), "-")
		if err != nil || !reflect.DeepEqual(again, in) {
			t.Fatalf("written back as %s it reads as %v, %v; want %v", js, again, err, in)
		}
	})
}
