package runner

import (
	"bufio"
	"io"
	"strings"
	"sync"
)

// MaxRawLine bounds one line as read from a task: a longer run of bytes
// without a newline is passed on in pieces of this size. The worker later
// cuts lines to the protocol's limit; this only bounds memory.
const MaxRawLine = 1 << 20

// CopyLines reads r to its end and passes each line to sink, without its
// line ending. It returns when r reports EOF or an error.
func CopyLines(r io.Reader, stream string, sink LogSink) {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			if len(buf) >= MaxRawLine {
				sink(stream, string(buf))
				buf = buf[:0]
			}
			continue
		case len(buf) > 0:
			line := strings.TrimSuffix(string(buf), "\n")
			sink(stream, strings.TrimSuffix(line, "\r"))
			buf = buf[:0]
		}
		if err != nil {
			return
		}
	}
}

// Tail keeps the last lines a task printed, for its diagnostics.
type Tail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

// NewTail keeps the last n lines.
func NewTail(n int) *Tail { return &Tail{n: n} }

// Add records a line.
func (t *Tail) Add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(line) > 512 {
		line = line[:512]
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = append(t.lines[:0], t.lines[len(t.lines)-t.n:]...)
	}
}

// Lines returns a copy of the lines kept.
func (t *Tail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}
