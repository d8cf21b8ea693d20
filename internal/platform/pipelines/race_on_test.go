//go:build race

package pipelines_test

// raceDetector is true under -race, which makes the pure-Go SQLite under
// the controller's property tests some ten times slower: they try fewer
// cases then (lowerChecksUnderRace).
const raceDetector = true
