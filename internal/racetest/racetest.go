// Package racetest tells tests whether they run under the race detector,
// which makes some of them many times slower (pure-Go SQLite, regular
// expressions, thousands of connections): they then do less of the same
// work, or wait longer, instead of every package keeping its own pair of
// build-tagged files.
package racetest

import (
	"flag"
	"strconv"
	"testing"
)

// LowerRapidChecks makes rapid try n cases in t under the race detector,
// unless -rapid.checks was given on the command line. Without the race
// detector it changes nothing.
func LowerRapidChecks(t testing.TB, n int) {
	f := flag.Lookup("rapid.checks")
	if !Enabled || f == nil {
		return
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	if given {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatalf("set rapid.checks: %v", err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}
