// Package tunnel is the control plane's end of the workers' tunnels. A
// worker (or the task's own process inside an HPC batch job) dials out to
// the control plane with a WebSocket, as it dials out for every other call,
// and keeps it open; yamux multiplexes it, so that the control plane can
// open one stream per connection it needs to an app instance on a host,
// pod or batch job that has no inbound path. The control plane opens the
// streams and the worker accepts them; the worker answers only for the app
// instances it runs and dials only their ports (agents/tunnel).
//
// A Registry holds the tunnels this replica serves, one per worker (a new
// connection from the same worker replaces the old one) plus one per task
// for tunnels opened with a task credential. It implements appnet.Tunnels.
// Who may reach an instance is decided before Open is called, by the
// platform service; the registry only carries bytes.
package tunnel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/appnet"
)

// Binding is what one tunnel may carry, as the platform service checked
// it: the app instances of a worker, or one attempt of one task when the
// tunnel was opened with a task credential.
type Binding struct {
	WorkerID string
	TaskID   string
	Attempt  int
}

// Options tune a Registry. The zero value is usable.
type Options struct {
	// KeepAlive is how often each side pings the other (default 15 s); a
	// tunnel whose pings go unanswered for WriteTimeout is closed, and the
	// worker dials again.
	KeepAlive    time.Duration
	WriteTimeout time.Duration
	// StreamWindow is how many bytes a stream may have in flight before
	// its reader takes them (default 1 MiB): larger is faster for bulk
	// transfers and costs that much memory per busy stream.
	StreamWindow uint32
	// CloseTimeout is how long a stream closed by one end may wait for the
	// other end's close before it is reset (default 1 min).
	CloseTimeout time.Duration
	// Recheck is how often a held tunnel's credential and binding are
	// checked again (default 1 min): a revoked credential, or a task
	// attempt that ended, loses its tunnel by then.
	Recheck time.Duration
	Log     *slog.Logger
}

// ErrNoTunnel is returned by Open when the instance's worker holds no
// tunnel to this replica.
var ErrNoTunnel = errors.New("the worker holds no tunnel to this control plane")

// ErrShuttingDown refuses a tunnel while the control plane shuts down.
var ErrShuttingDown = errors.New("the control plane is shutting down; reconnect")

// RefusedError is the worker's refusal of a stream, with its message.
type RefusedError struct {
	WorkerID, TaskID string
	Message          string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("worker %s refused a stream to app instance %s: %s", e.WorkerID, e.TaskID, e.Message)
}

// Registry holds the tunnels connected to this replica.
type Registry struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	workers map[string]*session
	// tasks are the tunnels of one task attempt, by worker and task.
	tasks  map[taskKey]*session
	closed bool
}

type taskKey struct{ worker, task string }

type session struct {
	b  Binding
	ys *yamux.Session
}

var _ appnet.Tunnels = (*Registry)(nil)

// New returns an empty registry.
func New(o Options) *Registry {
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.StreamWindow == 0 {
		o.StreamWindow = 1 << 20
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = time.Minute
	}
	if o.Recheck <= 0 {
		o.Recheck = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Registry{o: o, log: o.Log, workers: map[string]*session{}, tasks: map[taskKey]*session{}}
}

// Config is the yamux configuration both ends of a tunnel use.
func Config(keepAlive, writeTimeout, closeTimeout time.Duration, window uint32, log *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = true
	c.KeepAliveInterval = keepAlive
	c.ConnectionWriteTimeout = writeTimeout
	c.StreamCloseTimeout = closeTimeout
	c.StreamOpenTimeout = writeTimeout
	c.MaxStreamWindowSize = max(window, 256<<10)
	c.LogOutput = nil
	c.Logger = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	return c
}

// Serve upgrades the request to the tunnel's WebSocket and holds it until
// it closes, the registry closes, or check (called every Recheck) says the
// binding no longer holds. The caller has authenticated the request and
// checked b; Serve answers the upgrade itself, so the caller writes
// nothing after it.
func (r *Registry) Serve(w http.ResponseWriter, req *http.Request, b Binding, check func(context.Context) error) error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		http.Error(w, ErrShuttingDown.Error(), http.StatusServiceUnavailable)
		return ErrShuttingDown
	}
	// The server's read and write timeouts would cut the tunnel after a
	// minute: a hijacked connection keeps them.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	c, err := websocket.Accept(w, req, &websocket.AcceptOptions{Subprotocols: []string{agentapi.TunnelSubprotocol},
		CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return fmt.Errorf("accept the tunnel of worker %s: %w", b.WorkerID, err)
	}
	if c.Subprotocol() != agentapi.TunnelSubprotocol {
		_ = c.Close(websocket.StatusPolicyViolation, "ask for the subprotocol "+agentapi.TunnelSubprotocol)
		return fmt.Errorf("tunnel of worker %s: no subprotocol %s", b.WorkerID, agentapi.TunnelSubprotocol)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	defer cancel()
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	ys, err := yamux.Client(Frames(nc), Config(r.o.KeepAlive, r.o.WriteTimeout, r.o.CloseTimeout, r.o.StreamWindow, r.log))
	if err != nil {
		_ = nc.Close()
		return fmt.Errorf("tunnel of worker %s: %w", b.WorkerID, err)
	}
	s := &session{b: b, ys: ys}
	if !r.add(s) {
		_ = ys.Close()
		return ErrShuttingDown
	}
	defer r.remove(s)
	r.log.Info("tunnel connected", "worker", b.WorkerID, "task", b.TaskID)
	tick := time.NewTicker(r.o.Recheck)
	defer tick.Stop()
	for {
		select {
		case <-ys.CloseChan():
			r.log.Info("tunnel closed", "worker", b.WorkerID, "task", b.TaskID)
			return nil
		case <-tick.C:
			if check == nil {
				continue
			}
			if err := check(ctx); err != nil {
				r.log.Warn("tunnel closed: its credential no longer holds it", "worker", b.WorkerID, "task", b.TaskID, "err", err)
				_ = ys.Close()
				return err
			}
		}
	}
}

// add registers s, closing the tunnel it replaces; false once the
// registry is closed.
func (r *Registry) add(s *session) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	var old *session
	if s.b.TaskID != "" {
		k := taskKey{s.b.WorkerID, s.b.TaskID}
		old = r.tasks[k]
		r.tasks[k] = s
	} else {
		old = r.workers[s.b.WorkerID]
		r.workers[s.b.WorkerID] = s
	}
	r.mu.Unlock()
	if old != nil {
		// The worker reconnected (it restarted, or lost the old
		// connection without this side noticing yet).
		_ = old.ys.Close()
	}
	return true
}

// remove forgets s unless a newer tunnel replaced it.
func (r *Registry) remove(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.b.TaskID != "" {
		k := taskKey{s.b.WorkerID, s.b.TaskID}
		if r.tasks[k] == s {
			delete(r.tasks, k)
		}
		return
	}
	if r.workers[s.b.WorkerID] == s {
		delete(r.workers, s.b.WorkerID)
	}
}

// Close closes every tunnel and refuses new ones: the control plane is
// shutting down, and its workers dial again (to another replica, or to
// this one once it is back).
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	var all []*session
	for _, s := range r.workers {
		all = append(all, s)
	}
	for _, s := range r.tasks {
		all = append(all, s)
	}
	r.mu.Unlock()
	for _, s := range all {
		_ = s.ys.Close()
	}
}

// Holds reports whether the worker holds a tunnel to this replica: its
// own, or one of a task it holds.
func (r *Registry) Holds(workerID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.workers[workerID]; s != nil && !s.ys.IsClosed() {
		return true
	}
	for k, s := range r.tasks {
		if k.worker == workerID && !s.ys.IsClosed() {
			return true
		}
	}
	return false
}

// lookup finds the tunnel that reaches t: the task's own, for its
// attempt, else its worker's.
func (r *Registry) lookup(t appnet.Target) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.tasks[taskKey{t.WorkerID, t.TaskID}]; s != nil && s.b.Attempt == t.Attempt && !s.ys.IsClosed() {
		return s
	}
	if s := r.workers[t.WorkerID]; s != nil && !s.ys.IsClosed() {
		return s
	}
	return nil
}

// HoldsTask reports whether a task's own process (an HPC job) holds a
// tunnel for the task's attempt t.Attempt of worker t.WorkerID now.
func (r *Registry) HoldsTask(t appnet.Target) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.tasks[taskKey{t.WorkerID, t.TaskID}]
	return s != nil && s.b.Attempt == t.Attempt && !s.ys.IsClosed()
}

// Open opens a stream to the app instance t through its worker's tunnel:
// it names the task and attempt, and returns the stream once the worker
// answered that it dialled the instance. ctx bounds the opening only.
func (r *Registry) Open(ctx context.Context, t appnet.Target) (net.Conn, error) {
	s := r.lookup(t)
	if s == nil {
		return nil, fmt.Errorf("reach app instance %s on worker %s: %w", t.TaskID, t.WorkerID, ErrNoTunnel)
	}
	st, err := s.ys.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("reach app instance %s through the tunnel of worker %s: %w", t.TaskID, t.WorkerID, err)
	}
	if err := handshake(ctx, st, t); err != nil {
		_ = st.Close()
		return nil, err
	}
	return &Conn{st}, nil
}

// handshake sends the stream's request line and reads the worker's
// answer, within ctx.
func handshake(ctx context.Context, st *yamux.Stream, t appnet.Target) error {
	if d, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.SetDeadline(time.Now()) })
	line, err := json.Marshal(agentapi.TunnelRequest{TaskID: t.TaskID, Attempt: t.Attempt})
	if err != nil {
		stop()
		return fmt.Errorf("reach app instance %s: %w", t.TaskID, err)
	}
	_, err = st.Write(append(line, '\n'))
	var answer string
	if err == nil {
		answer, err = agentapi.ReadTunnelLine(st)
	}
	if !stop() {
		return fmt.Errorf("reach app instance %s through the tunnel of worker %s: %w", t.TaskID, t.WorkerID, context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("reach app instance %s through the tunnel of worker %s: %w", t.TaskID, t.WorkerID, err)
	}
	_ = st.SetDeadline(time.Time{})
	if answer == agentapi.TunnelOK {
		return nil
	}
	msg, ok := strings.CutPrefix(answer, agentapi.TunnelRefused)
	if !ok {
		msg = "unexpected answer " + fmt.Sprintf("%q", answer)
	}
	return &RefusedError{WorkerID: t.WorkerID, TaskID: t.TaskID, Message: msg}
}

// Conn is a stream to an app instance. Close and CloseWrite both end what
// this side sends (the instance reads its end); the stream is freed when
// the other side has ended too, or after the registry's CloseTimeout.
type Conn struct {
	*yamux.Stream
}

// CloseWrite half-closes the stream.
func (c *Conn) CloseWrite() error { return c.Stream.Close() }

// errCut is what a read sees when the tunnel closed under the stream.
var errCut = errors.New("the worker's tunnel closed before the app instance finished sending")

// Read reads from the instance. A stream cut by its tunnel closing ends
// with an error, not io.EOF, so that a truncated answer is not taken for
// a whole one.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Stream.Read(p)
	if errors.Is(err, io.EOF) && c.Stream.Session().IsClosed() {
		err = errCut
	}
	return n, err
}

// Frames wraps the connection a yamux session writes to, so that each
// data frame's 12-byte header goes out with its body in one write, and so
// in one WebSocket message, rather than as a message of its own. yamux
// writes a header and then, for a data frame with a length, its body,
// always from one goroutine (its send loop). A connection that can write
// a message in two parts (PartsWriter) is given the header and the body
// as they are; any other gets them copied together.
func Frames(c net.Conn) net.Conn {
	pw, _ := c.(PartsWriter)
	return &frames{Conn: c, parts: pw}
}

// PartsWriter writes one message made of head and then body (the worker's
// end, which masks both into its frame in one pass).
type PartsWriter interface {
	WriteParts(head, body []byte) error
}

type frames struct {
	net.Conn
	parts   PartsWriter
	buf     []byte
	pending bool
}

// yamux's header: version, type, flags (2), stream (4), length (4); a
// data frame is type 0.
const (
	headerSize = 12
	typeData   = 0
)

func (f *frames) Write(p []byte) (int, error) {
	if f.pending {
		f.pending = false
		if f.parts != nil {
			if err := f.parts.WriteParts(f.buf[:headerSize], p); err != nil {
				return 0, err
			}
			return len(p), nil
		}
		f.buf = append(f.buf[:headerSize], p...)
		if _, err := f.Conn.Write(f.buf); err != nil {
			return 0, err
		}
		if cap(f.buf) > 4<<20 {
			f.buf = nil
		}
		return len(p), nil
	}
	if len(p) == headerSize && p[1] == typeData && binary.BigEndian.Uint32(p[8:]) > 0 {
		f.buf = append(f.buf[:0], p...)
		f.pending = true
		return len(p), nil
	}
	return f.Conn.Write(p)
}
