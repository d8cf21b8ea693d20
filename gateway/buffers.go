package gateway

import (
	"bytes"
	"io"
	"sync"
)

// Request and answer bodies are read into pooled buffers: at thousands of
// calls a second, a fresh buffer per body (grown by doubling, as
// io.ReadAll does) is most of a call's garbage.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled bounds the buffers kept for reuse, so that one large body does
// not stay in memory for good.
const maxPooled = 1 << 20

// readBody reads at most limit bytes of r (one more tells the caller the
// body is too long) into a pooled buffer, sized from hint (a
// Content-Length, or -1) when it is known. The caller gives the buffer
// back with putBuffer once nothing refers to its bytes.
func readBody(r io.Reader, limit, hint int64) (*bytes.Buffer, error) {
	b := buffers.Get().(*bytes.Buffer)
	b.Reset()
	if hint > 0 && hint <= limit {
		b.Grow(int(hint) + 1)
	}
	_, err := b.ReadFrom(io.LimitReader(r, limit+1))
	return b, err
}

func putBuffer(b *bytes.Buffer) {
	if b == nil || b.Cap() > maxPooled {
		return
	}
	buffers.Put(b)
}
