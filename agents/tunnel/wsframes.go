package tunnel

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
)

// The worker is the tunnel's WebSocket client, so every byte it sends is
// masked (RFC 6455 §5.3), and coder/websocket masks a message through its
// fixed 4 KiB write buffer, writing the connection each time the buffer
// fills: one system call (and, over TLS, one record) per 4 KiB, after the
// message was already copied twice (by yamux and by cptunnel.Frames).
// That held a download through the tunnel to a fifth of a direct one,
// and the library has no option for the buffer's size. So the worker's
// end writes its messages itself: each is one masked binary frame, the
// yamux header and body masked in one pass into a buffer of the frame's
// size, and written in one write. The bytes on the wire are the
// WebSocket frames the library would have written; the library still
// reads the connection, and writes its own control frames (a close, a
// pong) through wire, which keeps the two writers' frames whole.

// wire is the upgraded connection (under TLS when the control plane is
// https) as coder/websocket sees it, the response body of the dial.
// Writes from the library and from the tunnel's messages are serialized
// by mu, and a tunnel message waits while a frame of the library's is
// only partly written (it tracks where the library's frames end, so it
// does not depend on how the library splits a frame into writes).
type wire struct {
	io.ReadWriteCloser

	mu     sync.Mutex
	idle   *sync.Cond // signalled when the library's frame is complete, or on close
	frame  frameEnds
	closed bool
	err    error
}

func newWire(rwc io.ReadWriteCloser) *wire {
	w := &wire{ReadWriteCloser: rwc}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// Write is the library's: one frame, or a part of one.
func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.ReadWriteCloser.Write(p)
	w.frame.feed(p[:n])
	if err != nil && w.err == nil {
		// The library's frame is cut: nothing more can follow it.
		w.err = fmt.Errorf("write to the tunnel: %w", err)
	}
	if !w.frame.inside() || w.err != nil {
		w.idle.Broadcast()
	}
	return n, err
}

// Close closes the connection; a message waiting for the library's frame
// to end fails instead. The connection is closed before mu is taken: a
// write blocked on a peer that stopped reading holds mu, and closing is
// what ends that write (the library closes on its write timeout).
func (w *wire) Close() error {
	err := w.ReadWriteCloser.Close()
	w.mu.Lock()
	w.closed = true
	w.idle.Broadcast()
	w.mu.Unlock()
	return err
}

var errWireClosed = errors.New("the tunnel's connection is closed")

// writeFrame writes one whole frame of the tunnel's, between the
// library's frames. A failed write is kept: every later frame fails
// with it (a part of a frame may have gone out).
func (w *wire) writeFrame(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.frame.inside() && !w.closed && w.err == nil {
		w.idle.Wait()
	}
	if w.err != nil {
		return w.err
	}
	if w.closed || w.frame.closeSent {
		return errWireClosed
	}
	if _, err := w.ReadWriteCloser.Write(b); err != nil {
		w.err = fmt.Errorf("write to the tunnel: %w", err)
		return w.err
	}
	return nil
}

// frameEnds follows a stream of WebSocket frames as it is written, to
// tell whether it stopped inside one, and whether a close frame was
// begun (after which no data frame may follow, RFC 6455 §5.5.1).
type frameEnds struct {
	head      [14]byte // the frame's header so far (at most 14 bytes)
	headLen   int
	left      uint64 // payload bytes still to come
	closeSent bool
}

func (f *frameEnds) inside() bool { return f.headLen > 0 || f.left > 0 }

func (f *frameEnds) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(uint64(len(p)), f.left)
			f.left -= n
			p = p[n:]
			continue
		}
		f.head[f.headLen] = p[0]
		f.headLen++
		p = p[1:]
		if f.headLen == 1 && f.head[0]&0x0f == opClose {
			f.closeSent = true
		}
		if size := f.headSize(); size > 0 && f.headLen == size {
			f.left = f.payloadLen()
			f.headLen = 0
		}
	}
}

// opClose is a close frame's opcode.
const opClose = 0x8

// headSize is the header's length once its first two bytes are known
// (0 before): 2, the extended length's 2 or 8, and a masking key's 4.
func (f *frameEnds) headSize() int {
	if f.headLen < 2 {
		return 0
	}
	size := 2
	switch f.head[1] & 0x7f {
	case 126:
		size += 2
	case 127:
		size += 8
	}
	if f.head[1]&0x80 != 0 {
		size += 4
	}
	return size
}

func (f *frameEnds) payloadLen() uint64 {
	switch l := f.head[1] & 0x7f; l {
	case 126:
		return uint64(binary.BigEndian.Uint16(f.head[2:]))
	case 127:
		return binary.BigEndian.Uint64(f.head[2:])
	default:
		return uint64(l)
	}
}

// dialTransport is the dialling client's transport, with the upgraded
// connection of a 101 answer wrapped in a wire (coder/websocket takes the
// connection from the response's body). wire is set once the dial
// succeeded; one transport serves one dial.
type dialTransport struct {
	base http.RoundTripper
	wire *wire
}

func (t *dialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		return resp, err
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		return resp, nil
	}
	t.wire = newWire(rwc)
	resp.Body = t.wire
	return resp, nil
}

// dialClient returns a copy of hc (http.DefaultClient when nil) whose
// transport wraps the upgraded connection, and the transport.
func dialClient(hc *http.Client) (*http.Client, *dialTransport) {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t := &dialTransport{base: base}
	c.Transport = t
	return &c, t
}

// messages is the tunnel's WebSocket as yamux uses it: reads, closing and
// deadlines are the library's net.Conn, and each write is one masked
// binary message written straight to the wire (yamux sets no deadlines
// on its connection; a write deadline would bound only the library's own
// frames). cptunnel.Frames gives it
// a data frame's header and body together (WriteParts), so that they are
// one message without a copy of their own.
type messages struct {
	net.Conn
	wire *wire
	keys *rand.ChaCha8 // masking keys: unpredictable, as RFC 6455 asks
	buf  []byte
}

// messageConn returns the net.Conn yamux writes its frames to, or nc as
// it is when the transport gave no upgraded connection to wrap.
func messageConn(nc net.Conn, w *wire) net.Conn {
	if w == nil {
		return nc
	}
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (crypto/rand.Read's contract)
	return &messages{Conn: nc, wire: w, keys: rand.NewChaCha8(seed)}
}

func (m *messages) Write(p []byte) (int, error) {
	if err := m.WriteParts(p, nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteParts writes head and body as one binary message.
func (m *messages) WriteParts(head, body []byte) error {
	n := len(head) + len(body)
	// FIN and the binary opcode; the mask bit and the length, extended
	// to 16 or 64 bits as RFC 6455 §5.2 sets out; the masking key.
	size := 2 + 4
	switch {
	case n > 0xffff:
		size += 8
	case n > 125:
		size += 2
	}
	if cap(m.buf) < size+n {
		m.buf = make([]byte, size+n)
	}
	b := m.buf[:size+n]
	b[0] = 0x80 | 0x2
	switch {
	case n > 0xffff:
		b[1] = 0x80 | 127
		binary.BigEndian.PutUint64(b[2:], uint64(n))
	case n > 125:
		b[1] = 0x80 | 126
		binary.BigEndian.PutUint16(b[2:], uint16(n))
	default:
		b[1] = 0x80 | byte(n)
	}
	key := uint32(m.keys.Uint64())
	binary.LittleEndian.PutUint32(b[size-4:], key)
	key = maskCopy(b[size:], head, key)
	maskCopy(b[size+len(head):], body, key)
	err := m.wire.writeFrame(b)
	if cap(m.buf) > 4<<20 {
		m.buf = nil
	}
	return err
}

// maskCopy writes src masked with key into dst (at least as long), and
// returns the key for the bytes that follow: key's first byte (little
// endian) masks src's first byte. It masks eight bytes at a time, 64 to a
// round on slices the compiler knows the length of (no bounds checks),
// which runs at about half the speed of a copy.
func maskCopy(dst, src []byte, key uint32) uint32 {
	k := uint64(key) | uint64(key)<<32
	dst = dst[:len(src)]
	for len(src) >= 64 {
		s, d := src[:64:64], dst[:64:64]
		binary.LittleEndian.PutUint64(d[0:], binary.LittleEndian.Uint64(s[0:])^k)
		binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(s[8:])^k)
		binary.LittleEndian.PutUint64(d[16:], binary.LittleEndian.Uint64(s[16:])^k)
		binary.LittleEndian.PutUint64(d[24:], binary.LittleEndian.Uint64(s[24:])^k)
		binary.LittleEndian.PutUint64(d[32:], binary.LittleEndian.Uint64(s[32:])^k)
		binary.LittleEndian.PutUint64(d[40:], binary.LittleEndian.Uint64(s[40:])^k)
		binary.LittleEndian.PutUint64(d[48:], binary.LittleEndian.Uint64(s[48:])^k)
		binary.LittleEndian.PutUint64(d[56:], binary.LittleEndian.Uint64(s[56:])^k)
		src, dst = src[64:], dst[64:]
	}
	for len(src) >= 8 {
		binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(src)^k)
		src, dst = src[8:], dst[8:]
	}
	for i := range src {
		dst[i] = src[i] ^ byte(key)
		key = key>>8 | key<<24
	}
	return key
}
