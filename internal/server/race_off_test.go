//go:build !race

package server_test

// raceDetector is true when the tests run with -race, which makes every
// delivery many times slower: tests that bound a latency loosen the bound.
const raceDetector = false
