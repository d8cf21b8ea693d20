package store

import "fmt"

// MaxLogNumberGap bounds how far a numbered log line (model.LogLine.N) may
// run ahead of the highest number its attempt has stored. The worker
// numbers lines as it takes them, so its numbers only skip the lines it had
// to drop (a batch refused for good, a spool it could not write): far less
// than this. The bound keeps one line with a huge number (2^63−1) from
// making every later line look like one already stored.
const MaxLogNumberGap = 1 << 20

// LogNumberError is AppendLogs' refusal of a batch whose line numbers are
// out of range: nothing of the batch is stored.
type LogNumberError struct {
	TaskID  string
	Attempt int
	// N is the refused number; Highest the highest the attempt has stored.
	N, Highest int64
}

func (e *LogNumberError) Error() string {
	return fmt.Sprintf("log line number %d of attempt %d of task %s is more than %d ahead of the highest stored (%d)",
		e.N, e.Attempt, e.TaskID, MaxLogNumberGap, e.Highest)
}
