package server

import (
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
)

// liveSockets keeps the open subscription WebSockets, so that a shutdown
// can tell each client to reconnect (close code 1001, going away) instead
// of leaving it to find a dead connection: http.Server.Shutdown does not
// wait for, or close, connections that were hijacked.
type liveSockets struct {
	mu       sync.Mutex
	conns    map[*trackedSocket]struct{}
	shutting bool
}

// shutdownReason is the close reason clients see when the server stops.
const shutdownReason = "the server is shutting down; reconnect"

func newLiveSockets() *liveSockets {
	return &liveSockets{conns: map[*trackedSocket]struct{}{}}
}

// track adds c, or closes it at once when the server is already shutting
// down.
func (l *liveSockets) track(c transport.WebsocketConn) transport.WebsocketConn {
	t := &trackedSocket{WebsocketConn: c, live: l}
	l.mu.Lock()
	shutting := l.shutting
	if !shutting {
		l.conns[t] = struct{}{}
	}
	l.mu.Unlock()
	if shutting {
		_ = c.WriteClose(int(websocket.StatusGoingAway), shutdownReason)
	}
	return t
}

// closeAll starts the close handshake of every open WebSocket, and of any
// accepted from now on.
func (l *liveSockets) closeAll() {
	l.mu.Lock()
	l.shutting = true
	conns := make([]*trackedSocket, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		// The handshake runs in the background; the transport's read
		// loop ends when the client answers, and closes the socket.
		_ = c.WriteClose(int(websocket.StatusGoingAway), shutdownReason)
	}
}

var (
	_ transport.WebsocketReadLimiter   = (*trackedSocket)(nil)
	_ transport.WebsocketReadDeadliner = (*trackedSocket)(nil)
)

// trackedSocket leaves liveSockets when it closes.
type trackedSocket struct {
	transport.WebsocketConn
	live *liveSockets
	once sync.Once
}

func (t *trackedSocket) Close() error {
	t.once.Do(func() {
		t.live.mu.Lock()
		delete(t.live.conns, t)
		t.live.mu.Unlock()
	})
	return t.WebsocketConn.Close()
}

// SetReadLimit passes the transport's payload limit on.
func (t *trackedSocket) SetReadLimit(limit int64) {
	if l, ok := t.WebsocketConn.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

// SetReadDeadline passes the transport's read deadline on.
func (t *trackedSocket) SetReadDeadline(deadline time.Time) error {
	if d, ok := t.WebsocketConn.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(deadline)
	}
	return nil
}
