package platformtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// LogRecorder is a slog.Handler that keeps every record at warning level
// and above, one line each ("WARN message key=value ..."), so a test can
// assert on what the service reported and nothing floods its output. It is
// safe for concurrent use.
type LogRecorder struct {
	mu      sync.Mutex
	records []string
}

// Enabled reports whether lvl is kept: warnings and above.
func (l *LogRecorder) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelWarn }

// Handle keeps r as one line.
func (l *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		sb.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, sb.String())
	l.mu.Unlock()
	return nil
}

// WithAttrs returns l: attributes given to a derived logger are not kept.
func (l *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *LogRecorder) WithGroup(string) slog.Handler { return l }

// All returns a copy of the records so far, oldest first.
func (l *LogRecorder) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.records...)
}
