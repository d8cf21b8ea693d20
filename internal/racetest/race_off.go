//go:build !race

package racetest

// Enabled is true when the tests run under -race.
const Enabled = false
