//go:build race

package guard

// raceDetector is true under -race, which makes the regular expressions
// of the property test some thirty times slower while finding nothing in
// code that runs on one goroutine: that test checks fewer streams then.
const raceDetector = true
