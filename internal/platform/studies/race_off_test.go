//go:build !race

package studies_test

// raceDetector is true under -race, which makes the pure-Go SQLite under
// the controller's property test some ten times slower: it tries fewer
// cases then (lowerChecksUnderRace).
const raceDetector = false
