// Package archtest holds the tests that keep the house's shape: which
// package may import which (see docs/architecture.md, "Import rules"), and
// how large a package or a file may grow. It has no code of its own.
package archtest
