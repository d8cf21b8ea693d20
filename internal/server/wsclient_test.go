package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// A small GraphQL-over-WebSocket client for the tests: graphql-transport-ws
// and the legacy graphql-ws, as browsers' graphql-ws and subscriptions-
// transport-ws libraries speak them.

const (
	protoTransportWS = "graphql-transport-ws"
	protoLegacyWS    = "graphql-ws"
)

type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// wsUpdate is one next (data) message of a subscription.
type wsUpdate struct {
	Data   map[string]any `json:"data"`
	Errors []gqlError     `json:"errors"`
	// Raw is the payload as sent, for leak checks.
	Raw string `json:"-"`
	// Received is when the client read it.
	Received time.Time `json:"-"`
}

// wsClient is one WebSocket connection to /graphql.
type wsClient struct {
	c     *websocket.Conn
	proto string
	mu    sync.Mutex
	subs  map[string]chan wsEvent
	done  chan struct{}
	err   error
	ids   int
}

// wsEvent is what a subscription id got: an update, an error or the end.
type wsEvent struct {
	Type   string
	Update *wsUpdate
	Errors []gqlError
}

// wsDialOptions tune a connection.
type wsDialOptions struct {
	proto string
	// readBuffer, when set, is the socket's receive buffer in bytes: a
	// small one makes a client that does not read push back at once.
	readBuffer int
	// noRead leaves the connection unread after connection_ack, as a
	// stalled client would.
	noRead bool
}

// dialWS connects, sends connection_init with payload and waits for the
// acknowledgement. The error is the close (websocket.CloseStatus tells its
// code) when the server refuses.
func dialWS(ctx context.Context, url string, payload map[string]any, o wsDialOptions) (*wsClient, error) {
	if o.proto == "" {
		o.proto = protoTransportWS
	}
	dopts := &websocket.DialOptions{Subprotocols: []string{o.proto}}
	if o.readBuffer > 0 {
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(o.readBuffer)
			}
			return c, err
		}}
		dopts.HTTPClient = &http.Client{Transport: tr}
	}
	wsURL := "ws" + strings.TrimPrefix(url, "http") + "/graphql"
	c, _, err := websocket.Dial(ctx, wsURL, dopts)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", wsURL, err)
	}
	c.SetReadLimit(64 << 20)
	if got := c.Subprotocol(); got != o.proto {
		_ = c.CloseNow()
		return nil, fmt.Errorf("server chose subprotocol %q, want %q", got, o.proto)
	}
	init := map[string]any{"type": "connection_init"}
	if payload != nil {
		init["payload"] = payload
	}
	if err := wsjson.Write(ctx, c, init); err != nil {
		_ = c.CloseNow()
		return nil, fmt.Errorf("send connection_init: %w", err)
	}
	for {
		var m wsMsg
		if err := wsjson.Read(ctx, c, &m); err != nil {
			_ = c.CloseNow()
			return nil, err
		}
		if m.Type == "connection_ack" {
			break
		}
		if m.Type == "connection_error" {
			continue // the close follows
		}
		_ = c.CloseNow()
		return nil, fmt.Errorf("got %s before connection_ack", m.Type)
	}
	w := &wsClient{c: c, proto: o.proto, subs: map[string]chan wsEvent{}, done: make(chan struct{})}
	if !o.noRead {
		go w.read()
	}
	return w, nil
}

func (w *wsClient) read() {
	defer close(w.done)
	ctx := context.Background()
	for {
		_, data, err := w.c.Read(ctx)
		if err != nil {
			w.err = err
			w.mu.Lock()
			for _, ch := range w.subs {
				close(ch)
			}
			w.subs = map[string]chan wsEvent{}
			w.mu.Unlock()
			return
		}
		now := time.Now()
		var m wsMsg
		if err := json.Unmarshal(data, &m); err != nil {
			continue
		}
		switch m.Type {
		case "ping":
			_ = wsjson.Write(ctx, w.c, map[string]any{"type": "pong"})
			continue
		case "ka", "pong":
			continue
		}
		w.mu.Lock()
		ch := w.subs[m.ID]
		w.mu.Unlock()
		if ch == nil {
			continue
		}
		ev := wsEvent{Type: m.Type}
		switch m.Type {
		case "next", "data":
			ev.Type = "next"
			u := &wsUpdate{Raw: string(m.Payload), Received: now}
			_ = json.Unmarshal(m.Payload, u)
			ev.Update = u
			if len(u.Errors) > 0 {
				ev.Type, ev.Errors = "error", u.Errors
			}
		case "error":
			var errs []gqlError
			if json.Unmarshal(m.Payload, &errs) != nil {
				var one gqlError
				_ = json.Unmarshal(m.Payload, &one)
				errs = []gqlError{one}
			}
			ev.Errors = errs
		}
		ch <- ev
		if m.Type == "complete" {
			w.mu.Lock()
			if w.subs[m.ID] == ch {
				delete(w.subs, m.ID)
				close(ch)
			}
			w.mu.Unlock()
		}
	}
}

// subscribe starts a subscription and returns its id and events. The
// channel is closed when the subscription completes or the connection ends.
func (w *wsClient) subscribe(ctx context.Context, query string, vars map[string]any) (string, <-chan wsEvent, error) {
	w.mu.Lock()
	w.ids++
	id := fmt.Sprint(w.ids)
	ch := make(chan wsEvent, 4096)
	w.subs[id] = ch
	w.mu.Unlock()
	typ := "subscribe"
	if w.proto == protoLegacyWS {
		typ = "start"
	}
	err := wsjson.Write(ctx, w.c, map[string]any{"id": id, "type": typ, "payload": map[string]any{"query": query, "variables": vars}})
	return id, ch, err
}

func (w *wsClient) close() { _ = w.c.Close(websocket.StatusNormalClosure, "") }

// closeCode is the WebSocket close code of err, or -1.
func closeCode(err error) int {
	return int(websocket.CloseStatus(err))
}

// nextUpdate waits for the next update of a subscription; it fails t on an
// error, the end of the subscription or the timeout.
func nextUpdate(t testing.TB, ch <-chan wsEvent, timeout time.Duration) *wsUpdate {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("the subscription ended while an update was expected")
		}
		if ev.Type != "next" {
			t.Fatalf("got %s %v while an update was expected", ev.Type, ev.Errors)
		}
		return ev.Update
	case <-time.After(timeout):
		t.Fatalf("no update within %s", timeout)
	}
	return nil
}

// waitUpdate reads updates until match accepts one, failing t after
// timeout. It returns the update matched and the ones skipped.
func waitUpdate(t testing.TB, ch <-chan wsEvent, timeout time.Duration, what string, match func(*wsUpdate) bool) *wsUpdate {
	t.Helper()
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("waiting for %s: the subscription ended; saw %v", what, seen)
			}
			if ev.Type != "next" {
				t.Fatalf("waiting for %s: got %s %v", what, ev.Type, ev.Errors)
			}
			if match(ev.Update) {
				return ev.Update
			}
			raw := ev.Update.Raw
			if len(raw) > 300 {
				raw = raw[:300] + "…"
			}
			seen = append(seen, raw)
		case <-deadline:
			t.Fatalf("waiting for %s: nothing matched within %s; saw %d updates: %v", what, timeout, len(seen), seen)
		}
	}
}

// expectQuiet fails t when the subscription gets an update within d.
func expectQuiet(t testing.TB, ch <-chan wsEvent, d time.Duration, why string) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if ok && ev.Update != nil {
			t.Fatalf("%s, but got %s", why, ev.Update.Raw)
		}
		if ok {
			t.Fatalf("%s, but got %s %v", why, ev.Type, ev.Errors)
		}
	case <-time.After(d):
	}
}
