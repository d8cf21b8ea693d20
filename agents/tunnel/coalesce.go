package tunnel

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// The worker is the tunnel's WebSocket client, so every byte it sends is
// masked (RFC 6455 §5.3), and coder/websocket masks a message through its
// fixed 4 KiB write buffer, writing the connection each time the buffer
// fills: one system call (and, over TLS, one record) per 4 KiB, which
// held a download through the tunnel to a fifth of a direct one. The
// library has no option for that buffer's size. So the worker's end puts
// a writer of its own between the library and the connection: while one
// of the tunnel's messages is being written it collects the library's
// 4 KiB writes, and passes them on as one write when the message is
// complete. The bytes on the wire are the same WebSocket frames.

// maxHeld bounds what a held message may collect before it is written
// out anyway: a yamux frame is at most copyBuffer plus its header, so a
// whole frame goes out in one write.
const maxHeld = copyBuffer + 64<<10

// heldBody is the upgraded connection's body (the WebSocket's own
// connection, under TLS when the control plane is https). Writes pass
// straight through unless the tunnel is writing a message (hold), and
// then collect until release writes them out together. A control frame
// the library writes from its read side (a pong, a close) passes through
// at once, or, if it falls inside a held message, goes out with it.
type heldBody struct {
	io.ReadWriteCloser

	mu   sync.Mutex
	held bool
	buf  []byte
	err  error
}

func (h *heldBody) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return 0, h.err
	}
	if !h.held {
		return h.ReadWriteCloser.Write(p)
	}
	if len(h.buf)+len(p) > maxHeld {
		if err := h.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > maxHeld {
			return h.ReadWriteCloser.Write(p)
		}
	}
	if h.buf == nil {
		h.buf = make([]byte, 0, maxHeld)
	}
	h.buf = append(h.buf, p...)
	return len(p), nil
}

// hold starts collecting writes.
func (h *heldBody) hold() {
	h.mu.Lock()
	h.held = true
	h.mu.Unlock()
}

// release writes out what was collected since hold, and lets writes pass
// through again. A failed write is kept: every later write fails with it.
func (h *heldBody) release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = false
	return h.flushLocked()
}

func (h *heldBody) flushLocked() error {
	if h.err != nil {
		return h.err
	}
	if len(h.buf) == 0 {
		return nil
	}
	_, err := h.ReadWriteCloser.Write(h.buf)
	h.buf = h.buf[:0]
	if err != nil {
		h.err = fmt.Errorf("write to the tunnel: %w", err)
	}
	return h.err
}

// holdingTransport is the dialling client's transport, with the upgraded
// connection of a 101 answer wrapped in a heldBody (coder/websocket takes
// the connection from the response's body). body is that wrapper once
// the dial succeeded; one transport serves one dial.
type holdingTransport struct {
	base http.RoundTripper
	body *heldBody
}

func (t *holdingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		return resp, err
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		return resp, nil
	}
	t.body = &heldBody{ReadWriteCloser: rwc}
	resp.Body = t.body
	return resp, nil
}

// holdingClient returns a copy of hc (http.DefaultClient when nil) whose
// transport wraps the upgraded connection, and the transport.
func holdingClient(hc *http.Client) (*http.Client, *holdingTransport) {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t := &holdingTransport{base: base}
	c.Transport = t
	return &c, t
}

// messages is the tunnel's WebSocket as yamux writes it (net.Conn): each
// Write is one WebSocket message, held in body until it is complete.
type messages struct {
	net.Conn
	body *heldBody
}

func (m *messages) Write(p []byte) (int, error) {
	m.body.hold()
	n, err := m.Conn.Write(p)
	if rerr := m.body.release(); err == nil {
		err = rerr
	}
	return n, err
}

// heldConn wraps the WebSocket's net.Conn so that each message goes out in
// one write; with no heldBody (the transport gave no upgraded body to
// wrap) it is the connection as it is.
func heldConn(nc net.Conn, body *heldBody) net.Conn {
	if body == nil {
		return nc
	}
	return &messages{Conn: nc, body: body}
}
