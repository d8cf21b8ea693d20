package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
)

// maxMetricName bounds a metric's name.
const maxMetricName = 128

// metricInput is one metric as a task reports it, over HTTP or in its
// metrics file: {"name":"loss","value":0.42,"step":10}, with an optional
// time "t" (RFC 3339; default: when the worker read it).
type metricInput struct {
	Name  string     `json:"name"`
	Value *float64   `json:"value"`
	Step  int64      `json:"step"`
	At    *time.Time `json:"t"`
}

func (m metricInput) point(now time.Time) (agentapi.MetricPoint, error) {
	name := strings.TrimSpace(m.Name)
	switch {
	case name == "":
		return agentapi.MetricPoint{}, errors.New(`a metric needs a "name"`)
	case len(name) > maxMetricName:
		return agentapi.MetricPoint{}, fmt.Errorf("metric name longer than %d bytes", maxMetricName)
	case m.Value == nil:
		return agentapi.MetricPoint{}, fmt.Errorf(`metric %q needs a numeric "value"`, name)
	case math.IsNaN(*m.Value) || math.IsInf(*m.Value, 0):
		return agentapi.MetricPoint{}, fmt.Errorf("metric %q is not a finite number", name)
	}
	at := now
	if m.At != nil && !m.At.IsZero() {
		at = *m.At
	}
	return agentapi.MetricPoint{At: at, Name: name, Value: *m.Value, Step: m.Step}, nil
}

// parseMetrics reads one JSON object, an array of them, or JSON lines.
func parseMetrics(body []byte, now time.Time) ([]agentapi.MetricPoint, error) {
	body = bytes.TrimSpace(body)
	var in []metricInput
	if len(body) > 0 && body[0] == '[' {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, err
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(body))
		for {
			var m metricInput
			if err := dec.Decode(&m); err == io.EOF {
				break
			} else if err != nil {
				return nil, err
			}
			in = append(in, m)
		}
	}
	out := make([]agentapi.MetricPoint, 0, len(in))
	for _, m := range in {
		p, err := m.point(now)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// metricStream buffers a task's metric points and sends them in batches.
// While the control plane is unreachable it keeps up to maxPoints, then
// drops the oldest: metrics are sampled, losing some in a long outage is
// acceptable, unlike log lines.
type metricStream struct {
	send      func(ctx context.Context, points []agentapi.MetricPoint) error
	maxPoints int
	interval  time.Duration
	backoff   client.Backoff
	onStale   func(error)
	warn      func(msg string, err error)

	flushing sync.Mutex

	mu       sync.Mutex
	buf      []agentapi.MetricPoint
	inflight []agentapi.MetricPoint
	dropped  int
	stopped  bool
}

func (s *metricStream) Add(points ...agentapi.MetricPoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.buf = append(s.buf, points...)
	if over := len(s.buf) - s.maxPoints; over > 0 {
		s.dropped += over
		s.buf = append(s.buf[:0], s.buf[over:]...)
	}
}

func (s *metricStream) next() []agentapi.MetricPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	if s.inflight == nil && len(s.buf) > 0 {
		n := min(len(s.buf), agentapi.MaxMetricsPerBatch)
		s.inflight = append([]agentapi.MetricPoint(nil), s.buf[:n]...)
		s.buf = append(s.buf[:0], s.buf[n:]...)
	}
	return s.inflight
}

func (s *metricStream) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped, s.buf, s.inflight = true, nil, nil
}

func (s *metricStream) flush(ctx context.Context) error {
	s.flushing.Lock()
	defer s.flushing.Unlock()
	for {
		batch := s.next()
		if len(batch) == 0 {
			return nil
		}
		err := s.send(ctx, batch)
		switch {
		case err == nil:
		case errors.Is(err, client.ErrStaleAttempt):
			s.stop()
			s.onStale(err)
			return nil
		case client.IsTransient(err) || errors.Is(err, client.ErrUnauthorized) || ctx.Err() != nil:
			return err
		default:
			s.warn("send metrics (the batch is skipped)", err)
		}
		s.mu.Lock()
		s.inflight = nil
		s.mu.Unlock()
	}
}

func (s *metricStream) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.flush(ctx); err != nil {
			failures++
			if !client.Sleep(ctx, s.backoff.Delay(failures)) {
				return
			}
			continue
		}
		failures = 0
	}
}

func (s *metricStream) close(ctx context.Context) error {
	if err := flushRetrying(ctx, s.backoff, s.flush); err != nil {
		return fmt.Errorf("send the last metrics: %w", err)
	}
	return nil
}

// metricsServer is the worker's local endpoint for metrics: each task gets
// a URL with its own random token (KLIQUE_METRICS_URL) and POSTs JSON to it.
type metricsServer struct {
	srv *http.Server
	url string

	mu    sync.Mutex
	sinks map[string]func([]agentapi.MetricPoint)
	// uploads are the tasks' artifact uploads (EnvArtifactsURL), under
	// the same tokens.
	uploads uploads
}

// startMetricsServer listens on addr (127.0.0.1:0 by default).
func startMetricsServer(addr string) (*metricsServer, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for task metrics on %s: %w", addr, err)
	}
	m := &metricsServer{url: "http://" + ln.Addr().String(), sinks: map[string]func([]agentapi.MetricPoint){}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /metrics/{token}", m.handle)
	mux.HandleFunc("PUT /artifacts/{token}/{name...}", m.uploads.serve)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// add registers a task's sink and returns its URL.
func (m *metricsServer) add(sink func([]agentapi.MetricPoint)) (url, token string) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token = hex.EncodeToString(b)
	m.mu.Lock()
	m.sinks[token] = sink
	m.mu.Unlock()
	return m.url + "/metrics/" + token, token
}

func (m *metricsServer) remove(token string) {
	m.mu.Lock()
	delete(m.sinks, token)
	m.mu.Unlock()
	m.uploads.set(token, nil)
}

// addUploads serves a task's artifact uploads under its token and returns
// their URL.
func (m *metricsServer) addUploads(token string, h http.HandlerFunc) string {
	m.uploads.set(token, h)
	return m.url + "/artifacts/" + token
}

func (m *metricsServer) handle(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	sink := m.sinks[r.PathValue("token")]
	m.mu.Unlock()
	if sink == nil {
		http.Error(w, "no running task has this metrics URL", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read the body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	points, err := parseMetrics(body, time.Now())
	if err != nil {
		http.Error(w, `send {"name":"loss","value":0.42,"step":10} (or an array of them): `+err.Error(), http.StatusBadRequest)
		return
	}
	sink(points)
	w.WriteHeader(http.StatusNoContent)
}

func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}

// fileTailer reads the JSON lines a task appends to its metrics file.
type fileTailer struct {
	path    string
	sink    func([]agentapi.MetricPoint)
	bad     func(lineNo int, err error)
	off     int64
	partial []byte
	lineNo  int
}

// poll reads what was appended since the last poll; an unfinished last line
// waits for its newline.
func (t *fileTailer) poll() {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < t.off {
		// Truncated or replaced: start over.
		t.off, t.partial = 0, nil
	}
	r := bufio.NewReader(io.NewSectionReader(f, t.off, 1<<62))
	var points []agentapi.MetricPoint
	for {
		chunk, err := r.ReadBytes('\n')
		t.off += int64(len(chunk))
		if err != nil {
			t.partial = append(t.partial, chunk...)
			break
		}
		line := append(t.partial, chunk...)
		t.partial = nil
		t.lineNo++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p, err := parseMetrics(line, time.Now())
		if err != nil {
			t.bad(t.lineNo, err)
			continue
		}
		points = append(points, p...)
	}
	if len(t.partial) > 1<<20 {
		t.partial = nil
	}
	if len(points) > 0 {
		t.sink(points)
	}
}

// run polls every interval until ctx is done, then once more.
func (t *fileTailer) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.poll()
			// The task has ended: a last line without its newline is
			// complete too.
			if len(bytes.TrimSpace(t.partial)) > 0 {
				t.lineNo++
				if p, err := parseMetrics(t.partial, time.Now()); err != nil {
					t.bad(t.lineNo, err)
				} else {
					t.sink(p)
				}
				t.partial = nil
			}
			return
		case <-tick.C:
			t.poll()
		}
	}
}
