package worker

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

const testToken = "kqw_test-credential"

// fakeServer implements the control plane's side of the agent protocol as
// internal/agentapi describes it, in memory: a queue of tasks to hand out,
// attempts as fencing tokens (409 for an old one), 204 on an empty long
// poll, commands returned on heartbeats, and a switch to take it down and
// bring it back on the same address.
type fakeServer struct {
	t    *testing.T
	addr string

	mu     sync.Mutex
	srv    *http.Server
	pool   string
	hbSecs int
	// singleTenant is what registration says of the pool.
	singleTenant bool
	queue        []*agentapi.Assignment
	// queued is closed, and replaced, when a task is enqueued: it wakes
	// the claims that wait.
	queued  chan struct{}
	tasks   map[string]*fakeTask
	claims  []agentapi.ClaimRequest
	beats   []agentapi.HeartbeatRequest
	secrets map[string]string
	// logLimit, when > 0, is how many lines a task may store before
	// answers say truncated.
	logLimit int
	logCalls int
	// fail500 answers the next n requests with 500.
	fail500 int
	// workers are the registered worker ids; registrations counts them.
	workers       map[string]bool
	registrations int
}

type fakeTask struct {
	a       agentapi.Assignment
	attempt int
	// claim is the index, among the server's claim requests, of the one
	// that handed out the current attempt.
	claim int
	logs  []agentapi.LogLine
	// batches counts the log requests stored for the task.
	batches int
	// received is the highest line number stored (of the current
	// attempt); as the control plane does, a line numbered at or below it
	// is a resend and is skipped.
	received int64
	resent   int
	metrics  []agentapi.MetricPoint
	finish   *agentapi.FinishRequest
	finishes int
	command  *agentapi.Command
	stale    int // requests refused with 409
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	s := &fakeServer{t: t, pool: "bare-metal", hbSecs: 1, tasks: map[string]*fakeTask{}, secrets: map[string]string{},
		workers: map[string]bool{}, queued: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.down)
	return s
}

func (s *fakeServer) url() string { return "http://" + s.addr }

func (s *fakeServer) serve(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+agentapi.PathRegister, s.register)
	mux.HandleFunc("POST "+agentapi.PathClaim, s.claim)
	mux.HandleFunc("POST "+agentapi.PathHeartbeat, s.heartbeat)
	mux.HandleFunc("POST "+agentapi.PathTasks+"{id}/logs", s.logs)
	mux.HandleFunc("POST "+agentapi.PathTasks+"{id}/metrics", s.metrics)
	mux.HandleFunc("POST "+agentapi.PathTasks+"{id}/finish", s.finish)
	mux.HandleFunc("GET "+agentapi.PathTasks+"{id}/secrets", s.getSecrets)
	srv := &http.Server{Handler: s.auth(mux)}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// down stops answering: connections are refused until up.
func (s *fakeServer) down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up serves again on the same address.
func (s *fakeServer) up() {
	var ln net.Listener
	var err error
	if !eventually.Poll(2*time.Second, func() bool { ln, err = net.Listen("tcp", s.addr); return err == nil }) {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	var e agentapi.Error
	e.Error.Code, e.Error.Message = code, msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *fakeServer) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			writeErr(w, http.StatusUnauthorized, "UNAUTHENTICATED", "unknown worker credential")
			return
		}
		s.mu.Lock()
		fail := s.fail500 > 0
		if fail {
			s.fail500--
		}
		s.mu.Unlock()
		if fail {
			writeErr(w, http.StatusInternalServerError, "INTERNAL", "injected failure")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeErr(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return false
	}
	return true
}

func (s *fakeServer) register(w http.ResponseWriter, r *http.Request) {
	var req agentapi.RegisterRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registrations++
	id := "worker-" + strconv.Itoa(s.registrations)
	s.workers[id] = true
	writeJSON(w, agentapi.RegisterResponse{WorkerID: id, Pool: s.pool, LeaseSeconds: 10,
		HeartbeatSeconds: s.hbSecs, LogLimitBytes: 1 << 20, SingleTenant: s.singleTenant})
}

// enqueue adds a task to hand out.
func (s *fakeServer) enqueue(a agentapi.Assignment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, &a)
	close(s.queued)
	s.queued = make(chan struct{})
}

func (s *fakeServer) claim(w http.ResponseWriter, r *http.Request) {
	var req agentapi.ClaimRequest
	if !decode(w, r, &req) {
		return
	}
	wait := time.Duration(min(req.WaitSeconds, int(agentapi.MaxClaimWait/time.Second))) * time.Second
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	s.mu.Lock()
	index := len(s.claims)
	s.claims = append(s.claims, req)
	known := s.workers[req.WorkerID]
	s.mu.Unlock()
	if !known {
		writeErr(w, http.StatusNotFound, "NOT_FOUND", "no worker "+req.WorkerID+": register first")
		return
	}
	for {
		s.mu.Lock()
		for i, a := range s.queue {
			fits := a.MilliGPUsPerNode <= max(int64(req.FreeGPUs)*1000, req.FreeMilliGPUs)
			if a.MilliGPUsPerNode%1000 != 0 && !req.Fractions {
				fits = false
			}
			if req.Project != "" && a.ProjectID != req.Project {
				// As the control plane does: a worker whose tasks share
				// a user takes only the project it runs.
				fits = false
			}
			if !fits {
				continue
			}
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			ft := s.tasks[a.TaskID]
			if ft == nil {
				ft = &fakeTask{}
				s.tasks[a.TaskID] = ft
			}
			ft.attempt++
			ft.claim = index
			a.Attempt = ft.attempt
			ft.a = *a
			ft.finish, ft.command, ft.received = nil, nil, 0
			s.mu.Unlock()
			writeJSON(w, agentapi.ClaimResponse{Task: a})
			return
		}
		queued := s.queued
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
			return
		case <-deadline.C:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-queued:
		}
	}
}

func (s *fakeServer) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req agentapi.HeartbeatRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.workers[req.WorkerID] {
		writeErr(w, http.StatusNotFound, "NOT_FOUND", "no worker "+req.WorkerID+": register first")
		return
	}
	s.beats = append(s.beats, req)
	resp := agentapi.HeartbeatResponse{LeaseSeconds: 10}
	for _, hb := range req.Tasks {
		ft := s.tasks[hb.TaskID]
		switch {
		case ft == nil || hb.Attempt != ft.attempt:
			resp.Commands = append(resp.Commands, agentapi.Command{TaskID: hb.TaskID, Attempt: hb.Attempt,
				Action: agentapi.ActionStop, Reason: "lease lost", State: agentapi.StateAborted})
		case ft.command != nil:
			resp.Commands = append(resp.Commands, *ft.command)
		}
	}
	writeJSON(w, resp)
}

// current returns the task when attempt is its current attempt and it has
// not finished; otherwise it answers 409.
func (s *fakeServer) current(w http.ResponseWriter, id string, attempt int) *fakeTask {
	ft := s.tasks[id]
	if ft == nil {
		writeErr(w, http.StatusNotFound, "NOT_FOUND", "no task "+id)
		return nil
	}
	if attempt != ft.attempt || ft.finish != nil {
		ft.stale++
		writeErr(w, http.StatusConflict, "STALE_ATTEMPT", "attempt "+strconv.Itoa(attempt)+" is not the current attempt")
		return nil
	}
	return ft
}

func (s *fakeServer) logs(w http.ResponseWriter, r *http.Request) {
	var req agentapi.LogsRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logCalls++
	ft := s.current(w, r.PathValue("id"), req.Attempt)
	if ft == nil {
		return
	}
	for _, l := range req.Lines {
		if len(l.Line) > agentapi.MaxLogLineBytes {
			s.t.Errorf("a log line of %d bytes, more than the protocol allows", len(l.Line))
		}
	}
	ft.batches++
	resp := agentapi.LogsResponse{}
	for _, l := range req.Lines {
		if l.N > 0 && l.N <= ft.received {
			ft.resent++
			continue
		}
		ft.received = max(ft.received, l.N)
		if s.logLimit > 0 && len(ft.logs) >= s.logLimit {
			resp.Truncated = true
			break
		}
		ft.logs = append(ft.logs, l)
		resp.Accepted++
	}
	writeJSON(w, resp)
}

func (s *fakeServer) metrics(w http.ResponseWriter, r *http.Request) {
	var req agentapi.MetricsRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ft := s.current(w, r.PathValue("id"), req.Attempt)
	if ft == nil {
		return
	}
	ft.metrics = append(ft.metrics, req.Points...)
	w.WriteHeader(http.StatusNoContent)
}

func (s *fakeServer) finish(w http.ResponseWriter, r *http.Request) {
	var req agentapi.FinishRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ft := s.tasks[r.PathValue("id")]
	if ft != nil {
		ft.finishes++
	}
	if ft = s.current(w, r.PathValue("id"), req.Attempt); ft == nil {
		return
	}
	ft.finish = &req
	w.WriteHeader(http.StatusNoContent)
}

func (s *fakeServer) getSecrets(w http.ResponseWriter, r *http.Request) {
	attempt, _ := strconv.Atoi(r.URL.Query().Get("attempt"))
	s.mu.Lock()
	defer s.mu.Unlock()
	ft := s.current(w, r.PathValue("id"), attempt)
	if ft == nil {
		return
	}
	out := map[string]string{}
	for _, n := range ft.a.Secrets {
		if v, ok := s.secrets[n]; ok {
			out[n] = v
		}
	}
	writeJSON(w, agentapi.SecretsResponse{Secrets: out})
}

// stop asks, on the next heartbeats, for a task's current attempt to stop.
func (s *fakeServer) stop(id, reason, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ft := s.tasks[id]
	ft.command = &agentapi.Command{TaskID: id, Attempt: ft.attempt, Action: agentapi.ActionStop, Reason: reason, State: state}
}

// forgetWorkers drops every registration, as if an admin removed them.
func (s *fakeServer) forgetWorkers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workers = map[string]bool{}
}

// requeue moves a task past its current attempt, as a lost lease does.
func (s *fakeServer) requeue(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[id].attempt++
	s.tasks[id].received = 0
}

// task returns a copy of what the server knows of a task.
func (s *fakeServer) task(id string) fakeTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	ft := s.tasks[id]
	if ft == nil {
		return fakeTask{}
	}
	c := *ft
	c.logs = append([]agentapi.LogLine(nil), ft.logs...)
	c.metrics = append([]agentapi.MetricPoint(nil), ft.metrics...)
	return c
}

func (s *fakeServer) heartbeats() []agentapi.HeartbeatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agentapi.HeartbeatRequest(nil), s.beats...)
}

func (s *fakeServer) claimRequests() []agentapi.ClaimRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agentapi.ClaimRequest(nil), s.claims...)
}

// logText is the task's log lines of stdout and stderr, joined.
func (ft fakeTask) lines(streams ...string) []string {
	var out []string
	for _, l := range ft.logs {
		if len(streams) == 0 || contains(streams, l.Stream) {
			out = append(out, l.Line)
		}
	}
	return out
}

func (ft fakeTask) logText() string { return strings.Join(ft.lines(), "\n") }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// wire is the transport of a test worker's client: it counts the
// requests that did not reach the server, by path. While the server is down
// it is the one place that sees the worker go on trying.
type wire struct {
	mu     sync.Mutex
	failed map[string]int
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		w.mu.Lock()
		if w.failed == nil {
			w.failed = map[string]int{}
		}
		w.failed[r.URL.Path]++
		w.mu.Unlock()
	}
	return resp, err
}

// failures is how many requests to path did not reach the server.
func (w *wire) failures(path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed[path]
}

// finished waits for the task's end report.
func (s *fakeServer) finished(t *testing.T, id string, timeout time.Duration) agentapi.FinishRequest {
	t.Helper()
	var f *agentapi.FinishRequest
	eventually.Within(t, timeout, "task "+id+" to finish", func() bool {
		ft := s.task(id)
		f = ft.finish
		return f != nil
	})
	return *f
}
