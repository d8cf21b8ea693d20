package tunnel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestMaskCopyMasksEachByteWithItsKeyByte: maskCopy is RFC 6455's
// masking (byte i with the key's byte i mod 4), for every length and
// when a message is masked in two parts (the key carried on).
func TestMaskCopyMasksEachByteWithItsKeyByte(t *testing.T) {
	src := make([]byte, 300)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	key := uint32(0xa1b2c3d4)
	var kb [4]byte
	binary.LittleEndian.PutUint32(kb[:], key)
	want := make([]byte, len(src))
	for i := range src {
		want[i] = src[i] ^ kb[i%4]
	}
	for n := range len(src) + 1 {
		for _, split := range []int{0, 1, 3, 5, 64, 67} {
			if split > n {
				continue
			}
			got := make([]byte, n)
			k := maskCopy(got, src[:split], key)
			maskCopy(got[split:], src[split:n], k)
			if !bytes.Equal(got, want[:n]) {
				t.Fatalf("%d bytes split at %d: masked %x, want %x", n, split, got, want[:n])
			}
		}
	}
}

// TestFrameEndsFindsWhereEachFrameEnds: however a stream of frames is cut
// into writes (here, byte by byte), the tracker says it is inside a frame
// exactly until that frame's last byte, for each length encoding, masked
// or not.
func TestFrameEndsFindsWhereEachFrameEnds(t *testing.T) {
	frame := func(payload int, masked bool) []byte {
		b := []byte{0x89, 0}
		switch {
		case payload > 0xffff:
			b[1] = 127
			b = binary.BigEndian.AppendUint64(b, uint64(payload))
		case payload > 125:
			b[1] = 126
			b = binary.BigEndian.AppendUint16(b, uint16(payload))
		default:
			b[1] = byte(payload)
		}
		if masked {
			b[1] |= 0x80
			b = append(b, 1, 2, 3, 4)
		}
		return append(b, make([]byte, payload)...)
	}
	for _, payload := range []int{0, 1, 125, 126, 0xffff, 0x10000} {
		for _, masked := range []bool{false, true} {
			var f frameEnds
			b := frame(payload, masked)
			for i := range b {
				f.feed(b[i : i+1])
				if last := i == len(b)-1; f.inside() == last {
					t.Fatalf("%d-byte payload (masked %v), after byte %d of %d: inside = %v", payload, masked, i+1, len(b), f.inside())
				}
			}
			f.feed(append(b, b...)) // two frames in one write
			if f.inside() {
				t.Fatalf("%d-byte payload (masked %v): inside after two whole frames", payload, masked)
			}
			if f.closeSent {
				t.Fatalf("%d-byte payload (masked %v): a ping taken for a close", payload, masked)
			}
		}
	}
}

// TestTheWorkersMessagesAreReadAsTheyWereWritten: the frames the worker
// writes itself are read by coder/websocket's server as the same binary
// messages, for every length encoding (7, 16 and 64 bits), with a header
// and a body or a body alone, while the library's own control frames
// (pings, answered by the server's pongs) go out on the same connection
// at the same time.
func TestTheWorkersMessagesAreReadAsTheyWereWritten(t *testing.T) {
	sizes := []int{0, 1, 12, 125, 126, 127, 0xffff, 0x10000, 0x10001, 300 << 10}
	type msg struct{ head, body []byte }
	var msgs []msg
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range sizes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		msgs = append(msgs, msg{nil, b})
		if n >= 12 {
			msgs = append(msgs, msg{b[:12], b[12:]})
		}
	}
	got := make(chan []byte, len(msgs))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, err := websocket.Accept(w, req, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			t.Error(err)
			return
		}
		c.SetReadLimit(-1)
		defer c.CloseNow()
		for range msgs {
			typ, b, err := c.Read(req.Context())
			if err != nil || typ != websocket.MessageBinary {
				t.Errorf("server read: %v, %v", typ, err)
				close(got)
				return
			}
			got <- b
		}
		_, _, _ = c.Read(req.Context()) // until the client closes
	}))
	defer srv.Close()

	hc, dt := dialClient(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, srv.URL, &websocket.DialOptions{HTTPClient: hc, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		t.Fatal(err)
	}
	if dt.wire == nil {
		t.Fatal("the dial's upgraded connection was not wrapped")
	}
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	defer nc.Close()
	m := messageConn(nc, dt.wire).(*messages)
	go func() { _, _ = io.Copy(io.Discard, nc) }() // reads the pongs

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if err := c.Ping(ctx); err != nil {
				t.Errorf("ping while messages are written: %v", err)
				return
			}
		}
	}()
	for _, mm := range msgs {
		if err := m.WriteParts(mm.head, mm.body); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, mm := range msgs {
		b, ok := <-got
		if want := append(append([]byte(nil), mm.head...), mm.body...); !ok || !bytes.Equal(b, want) {
			t.Fatalf("message %d (%d+%d bytes): the server read %d bytes, not the same", i, len(mm.head), len(mm.body), len(b))
		}
	}
	if _, err := fmt.Fprint(m, "after"); err != nil {
		t.Fatalf("a plain write: %v", err)
	}
}

// TestNoMessageFollowsTheLibrarysClose: once the library has written a
// close frame, the worker's end writes no more messages (RFC 6455 §5.5.1)
// and says the connection is closed.
func TestNoMessageFollowsTheLibrarysClose(t *testing.T) {
	var out bytes.Buffer
	w := newWire(nopCloser{&out})
	m := messageConn(nil, w).(*messages)
	if err := m.WriteParts([]byte("before"), nil); err != nil {
		t.Fatal(err)
	}
	sent := out.Len()
	if _, err := w.Write([]byte{0x88, 0x82, 1, 2, 3, 4, 0x03 ^ 1, 0xe8 ^ 2}); err != nil { // close 1000, masked
		t.Fatal(err)
	}
	if err := m.WriteParts([]byte("after"), nil); !errors.Is(err, errWireClosed) {
		t.Fatalf("a message after the close: err = %v, want errWireClosed", err)
	}
	if out.Len() != sent+8 {
		t.Fatalf("%d bytes written after the close frame", out.Len()-sent-8)
	}
}

type nopCloser struct{ io.ReadWriter }

func (nopCloser) Close() error { return nil }

// TestClosingEndsAWriteBlockedOnThePeer: a message blocked in its write
// (the control plane stopped reading) holds the wire; closing the wire,
// as the library does on its write timeout, still closes the connection
// and so ends the write, rather than waiting for it.
func TestClosingEndsAWriteBlockedOnThePeer(t *testing.T) {
	c := newStuckConn()
	w := newWire(c)
	m := messageConn(nil, w).(*messages)
	wrote := make(chan error, 1)
	go func() { wrote <- m.WriteParts([]byte("stuck"), nil) }()
	<-c.started
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	for _, ch := range []chan error{closed, wrote} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("closing the wire waited for the blocked write")
		}
	}
	if err := m.WriteParts([]byte("after"), nil); err == nil {
		t.Fatal("a message after the close went through")
	}
}

// stuckConn's writes block until it is closed.
type stuckConn struct {
	started, closed chan struct{}
	start, close    sync.Once
}

func newStuckConn() *stuckConn {
	return &stuckConn{started: make(chan struct{}), closed: make(chan struct{})}
}

func (c *stuckConn) Write(p []byte) (int, error) {
	c.start.Do(func() { close(c.started) })
	<-c.closed
	return 0, io.ErrClosedPipe
}

func (c *stuckConn) Read([]byte) (int, error) { <-c.closed; return 0, io.EOF }

func (c *stuckConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return nil
}
