package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/redact"
)

// Redacted replaces a secret's value in a task's log.
const Redacted = redact.Redacted

// MinSecretLength: shorter values are not redacted, since replacing every
// "1" or "on" in a log would hide more than it protects.
const MinSecretLength = redact.MinSecretLength

// continued ends each piece of a line that was too long for one log line.
const continued = " [line continues]"

// redactor replaces every known secret value, in the forms internal/redact
// matches (encoded, case-folded, reversed, a line of a key file), with
// Redacted. The control plane redacts again, with the lines of the whole
// stream; this pass keeps the values off the wire and the spool file.
type redactor struct{ r *redact.Redactor }

func newRedactor(secrets map[string]string) *redactor {
	vals := make([]string, 0, len(secrets))
	for _, v := range secrets {
		vals = append(vals, v)
	}
	return &redactor{r: redact.New(vals...)}
}

func (r *redactor) apply(s string) string {
	if r == nil {
		return s
	}
	return r.r.String(s)
}

// splitLine makes a line fit the protocol: valid UTF-8, secrets redacted,
// and cut into pieces of at most agentapi.MaxLogLineBytes, each but the last
// ending with a note that the line continues.
func splitLine(line string, r *redactor) []string {
	line = r.apply(strings.ToValidUTF8(line, "\uFFFD"))
	if len(line) <= agentapi.MaxLogLineBytes {
		return []string{line}
	}
	var out []string
	room := agentapi.MaxLogLineBytes - len(continued)
	for len(line) > agentapi.MaxLogLineBytes {
		cut := room
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		out = append(out, line[:cut]+continued)
		line = line[cut:]
	}
	return append(out, line)
}

// logLimits bound how a task's log is buffered and sent.
type logLimits struct {
	// BatchLines and BatchBytes bound one request; a batch goes out when
	// BatchLines wait or every FlushInterval.
	BatchLines    int
	BatchBytes    int
	FlushInterval time.Duration
	// MemoryLines bounds the lines kept in memory; beyond it they spill to
	// the spool file, in order.
	MemoryLines int
}

// logStream buffers a task's log lines and sends them in order, spilling
// to a file on disk while the control plane cannot take them. Each line is
// numbered (agentapi.LogLine.N) as it is taken, so that when an answer is
// lost after the server stored the batch, the batch sent again is stored
// once.
type logStream struct {
	send      func(ctx context.Context, lines []agentapi.LogLine) (*agentapi.LogsResponse, error)
	limits    logLimits
	spoolPath string
	backoff   client.Backoff
	// onStale is called when the server refuses the attempt (409).
	onStale func(error)
	warn    func(msg string, err error)

	// flushing serializes senders, so a batch in flight is sent once.
	flushing sync.Mutex

	mu       sync.Mutex
	mem      []agentapi.LogLine
	spool    *spool
	inflight []agentapi.LogLine
	// truncated: the server keeps no more of this task's log; stopped: the
	// task was dropped.
	truncated, stopped bool
	lost               int
	// numbered is the number given to the last line taken.
	numbered int64
	kick     chan struct{}
}

func newLogStream(spoolPath string, limits logLimits, backoff client.Backoff,
	send func(context.Context, []agentapi.LogLine) (*agentapi.LogsResponse, error)) *logStream {
	return &logStream{send: send, limits: limits, spoolPath: spoolPath, backoff: backoff, kick: make(chan struct{}, 1),
		onStale: func(error) {}, warn: func(string, error) {}}
}

// Add queues lines.
func (s *logStream) Add(lines ...agentapi.LogLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.truncated || s.stopped {
		return
	}
	for _, l := range lines {
		s.numbered++
		l.N = s.numbered
		s.mem = append(s.mem, l)
	}
	if len(s.mem) > s.limits.MemoryLines {
		s.spillLocked()
	}
	if len(s.mem) >= s.limits.BatchLines || (s.spool != nil && s.spool.lines >= s.limits.BatchLines) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// spillLocked moves the lines in memory to the end of the spool file.
func (s *logStream) spillLocked() {
	if s.spool == nil {
		sp, err := openSpool(s.spoolPath)
		if err != nil {
			s.lostLocked(len(s.mem), err)
			return
		}
		s.spool = sp
	}
	if err := s.spool.append(s.mem); err != nil {
		s.lostLocked(len(s.mem), err)
		return
	}
	s.mem = s.mem[:0]
}

// lostLocked drops the lines in memory when they cannot be spilled, and
// says so in the log.
func (s *logStream) lostLocked(n int, err error) {
	s.warn("spill log lines to disk", err)
	s.lost += n
	s.numbered++
	s.mem = []agentapi.LogLine{{At: time.Now(), Stream: agentapi.StreamWorker, N: s.numbered,
		Line: fmt.Sprintf("[klique worker: %d log lines were lost: the control plane was unreachable and the spool failed: %v]", s.lost, err)}}
}

// next returns the batch to send: the one that failed last, or the oldest
// lines waiting (on disk first, then in memory).
func (s *logStream) next() ([]agentapi.LogLine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.truncated || s.stopped {
		return nil, nil
	}
	if s.inflight != nil {
		return s.inflight, nil
	}
	if s.spool != nil && s.spool.lines > 0 {
		batch, err := s.spool.take(s.limits.BatchLines, s.limits.BatchBytes)
		if err != nil {
			return nil, err
		}
		s.inflight = batch
		return batch, nil
	}
	n, size := 0, 0
	for n < len(s.mem) && n < s.limits.BatchLines {
		size += len(s.mem[n].Line) + 64
		if n > 0 && size > s.limits.BatchBytes {
			break
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	s.inflight = append([]agentapi.LogLine(nil), s.mem[:n]...)
	s.mem = append(s.mem[:0], s.mem[n:]...)
	return s.inflight, nil
}

func (s *logStream) sent(resp *agentapi.LogsResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight = nil
	if resp != nil && resp.Truncated {
		s.truncated = true
		s.dropLocked()
	}
}

// stop drops everything: the task was dropped.
func (s *logStream) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.dropLocked()
}

func (s *logStream) dropLocked() {
	s.mem, s.inflight = nil, nil
	if s.spool != nil {
		s.spool.remove()
		s.spool = nil
	}
}

// flush sends until nothing waits. It returns the error of a send that
// failed for now (the batch stays first in line).
func (s *logStream) flush(ctx context.Context) error {
	s.flushing.Lock()
	defer s.flushing.Unlock()
	for {
		batch, err := s.next()
		if err != nil {
			s.warn("read the log spool", err)
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		resp, err := s.send(ctx, batch)
		switch {
		case err == nil:
			s.sent(resp)
		case errors.Is(err, client.ErrStaleAttempt):
			s.stop()
			s.onStale(err)
			return nil
		case client.IsTransient(err) || errors.Is(err, client.ErrUnauthorized) || ctx.Err() != nil:
			return err
		default:
			// Refused for a reason trying again will not fix: skip the
			// batch rather than block the log behind it.
			s.warn("send log lines (the batch is skipped)", err)
			s.sent(nil)
		}
	}
}

// run sends batches every FlushInterval, or sooner when a batch is full,
// until ctx is done; while the control plane is unreachable it backs off.
func (s *logStream) run(ctx context.Context) {
	t := time.NewTicker(s.limits.FlushInterval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		for {
			if err := s.flush(ctx); err == nil || ctx.Err() != nil {
				failures = 0
				break
			}
			if !client.Sleep(ctx, s.backoff.Delay(failures)) {
				return
			}
			failures++
		}
	}
}

// close sends everything left, retrying while the control plane is
// unreachable, until ctx is done.
func (s *logStream) close(ctx context.Context) error {
	if err := flushRetrying(ctx, s.backoff, s.flush); err != nil {
		return fmt.Errorf("send the last log lines: %w", err)
	}
	s.mu.Lock()
	if s.spool != nil {
		s.spool.remove()
		s.spool = nil
	}
	s.mu.Unlock()
	return nil
}

// flushRetrying calls flush until it succeeds, waiting backoff's delay
// after each failure, and returns its last error once ctx is done: how a
// stream sends what is left when its task ends, through an outage.
func flushRetrying(ctx context.Context, backoff client.Backoff, flush func(context.Context) error) error {
	for failures := 0; ; failures++ {
		err := flush(ctx)
		if err == nil {
			return nil
		}
		if !client.Sleep(ctx, backoff.Delay(failures)) {
			return err
		}
	}
}

// spool is a file of log lines (JSON lines) waiting to be sent: appended at
// the end, read from the front.
type spool struct {
	f     *os.File
	path  string
	read  int64 // offset of the first line not yet taken
	size  int64
	lines int // lines not yet taken
}

func openSpool(path string) (*spool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &spool{f: f, path: path}, nil
}

func (s *spool) append(lines []agentapi.LogLine) error {
	var b strings.Builder
	for _, l := range lines {
		j, err := json.Marshal(l)
		if err != nil {
			return err
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	n, err := s.f.WriteAt([]byte(b.String()), s.size)
	s.size += int64(n)
	if err != nil {
		return err
	}
	s.lines += len(lines)
	return nil
}

// take reads up to n lines (and about maxBytes) from the front.
func (s *spool) take(n, maxBytes int) ([]agentapi.LogLine, error) {
	r := bufio.NewReader(io.NewSectionReader(s.f, s.read, s.size-s.read))
	var out []agentapi.LogLine
	off, size := s.read, 0
	for len(out) < n {
		raw, err := r.ReadBytes('\n')
		if err != nil {
			if err == io.EOF {
				break
			}
			return nil, err
		}
		if len(out) > 0 && size+len(raw) > maxBytes {
			break
		}
		var l agentapi.LogLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("spool %s at %d: %w", s.path, off, err)
		}
		out = append(out, l)
		off += int64(len(raw))
		size += len(raw)
	}
	s.read = off
	s.lines -= len(out)
	if s.lines <= 0 {
		// Everything was taken: start the file over.
		s.lines, s.read, s.size = 0, 0, 0
		_ = s.f.Truncate(0)
	}
	return out, nil
}

func (s *spool) remove() {
	s.f.Close()
	os.Remove(s.path)
}
