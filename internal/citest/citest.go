// Package citest holds the one rule for a test whose precondition this
// machine lacks (root, a shell, a non-loopback address): under CI=true it
// fails, because CI's machine has it and a skip there would hide a test
// that did not run; elsewhere it skips, saying what is missing.
package citest

import (
	"fmt"
	"os"
	"testing"
)

// Missing fails t under CI=true and skips it otherwise, with the reason.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: CI's machine must have it (CI=true)", why)
	}
	t.Skip(why)
}
