package platformtest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/platform"
)

// WantError fails the test unless err has code and its message holds every
// one of words. The code is what every channel maps to its own status (a
// GraphQL extension, an HTTP status, an MCP tool error), so asserting it
// here checks them all; the words check the message tells the caller what
// to do.
func WantError(t testing.TB, err error, code platform.Code, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s holding %q", code, words)
	}
	if got := platform.ErrorCode(err); got != code {
		t.Fatalf("error %q has code %s, want %s", err, got, code)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not hold %q", err, w)
		}
	}
}

// Must fails the test on an error, naming its platform code.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v (code %s)", err, platform.ErrorCode(err))
	}
}

// ExampleEstate is examples/estate.yaml, the estate the documentation
// walks through, found from this file so that it reads the same from any
// package's test.
func ExampleEstate(t testing.TB) []byte {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("platformtest: cannot find its own source file")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "estate.yaml"))
	if err != nil {
		t.Fatalf("platformtest: read the example estate: %v", err)
	}
	return data
}
