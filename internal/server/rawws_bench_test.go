package server_test

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// rawWS is the fan-out benchmark's subscriber: a minimal RFC 6455 client
// over a plain TCP connection, reading the server's frames through one
// bufio.Reader with no goroutine or timer of its own. The server side is
// the real transport; the clients share the process and its two cores with
// it, and a full client library per subscriber would measure the clients
// as much as the server.
type rawWS struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
}

// dialRawWS opens a WebSocket with the given subprotocol to url
// (http://host:port/path).
func dialRawWS(url, subprotocol string, timeout time.Duration) (*rawWS, error) {
	host, path, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	conn, err := net.DialTimeout("tcp", host, timeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	req := fmt.Sprintf("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		path, host, base64.StdEncoding.EncodeToString(key), subprotocol)
	if _, err := io.WriteString(conn, req); err != nil {
		_ = conn.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Protocol") != subprotocol {
		_ = conn.Close()
		return nil, fmt.Errorf("upgrade answered %s, subprotocol %q", resp.Status, resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	_ = conn.SetDeadline(time.Time{})
	return &rawWS{conn: conn, r: r}, nil
}

// writeJSON sends v as one masked text frame, as a client must.
func (c *rawWS) writeJSON(v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return err
	}
	frame := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	case n < 1<<16:
		frame = append(frame, 0x80|126, byte(n>>8), byte(n))
	default:
		frame = append(frame, 0x80|127)
		frame = binary.BigEndian.AppendUint64(frame, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	_, err = c.conn.Write(frame)
	return err
}

// next reads the next data message (text or binary, unfragmented: the
// server sends nothing else to a subscriber). It answers a ping and skips
// other control frames. The bytes are valid until the next call.
func (c *rawWS) next() ([]byte, error) {
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			return nil, err
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		if h[1]&0x80 != 0 {
			return nil, errors.New("the server masked a frame")
		}
		if uint64(cap(c.buf)) < n {
			c.buf = make([]byte, n)
		}
		c.buf = c.buf[:n]
		if _, err := io.ReadFull(c.r, c.buf); err != nil {
			return nil, err
		}
		switch op := h[0] & 0x0f; op {
		case 0x1, 0x2:
			if h[0]&0x80 == 0 {
				return nil, errors.New("a fragmented message")
			}
			return c.buf, nil
		case 0x8:
			return nil, io.EOF
		case 0x9: // ping: answer with a pong carrying its payload
			if err := c.writeControl(0xA, c.buf); err != nil {
				return nil, err
			}
		}
	}
}

func (c *rawWS) writeControl(op byte, payload []byte) error {
	frame := []byte{0x80 | op, 0x80 | byte(len(payload)), 0, 0, 0, 0}
	frame = append(frame, payload...) // a zero mask leaves the payload as it is
	_, err := c.conn.Write(frame)
	return err
}

func (c *rawWS) close() error { return c.conn.Close() }
