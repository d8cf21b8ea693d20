package gql

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/Khan/genqlient/generate"
)

// TestGeneratedIsCurrent runs genqlient on the schema and the operations
// and compares what it makes with the files checked in, so that a change
// to either that was not regenerated (`make generate`) fails here.
func TestGeneratedIsCurrent(t *testing.T) {
	cfg, err := generate.ReadAndValidateConfig("genqlient.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files, err := generate.Generate(cfg)
	if err != nil {
		t.Fatalf("genqlient refuses the operations: %v", err)
	}
	if len(files) == 0 {
		t.Fatal("genqlient generated nothing: is genqlient.yaml pointing at the operations?")
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what genqlient makes of the schema and internal/cli/gql/*.graphql: run `make generate`", filepath.Base(name))
		}
	}
}
