package hpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// TestMain lets the test binary stand in for `klique task-run` inside
// batch jobs: the tests copy it where job accounts can run it.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "task-run" && os.Args[2] == "--job" {
		spec, err := ReadJobSpec(os.Args[3])
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(RunTask(context.Background(), spec, TaskRunOptions{FlushInterval: 200 * time.Millisecond}))
	}
	os.Exit(m.Run())
}

// fakePlane is the control plane as a job's task-run sees it: it records
// log lines and ends, per task, and checks the task credential.
type fakePlane struct {
	*httptest.Server
	mu      sync.Mutex
	lines   map[string][]string
	finish  map[string]agentapi.FinishRequest
	apps    map[string][]agentapi.AppReportRequest
	badAuth int
}

func newFakePlane(t *testing.T) *fakePlane {
	p := &fakePlane{lines: map[string][]string{}, finish: map[string]agentapi.FinishRequest{}, apps: map[string][]agentapi.AppReportRequest{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, agentapi.PathTasks)
		id, what, _ := strings.Cut(rest, "/")
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer kqt_for_"+id {
			p.badAuth++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		switch what {
		case "logs":
			var req agentapi.LogsRequest
			_ = json.Unmarshal(body, &req)
			for _, l := range req.Lines {
				p.lines[id] = append(p.lines[id], l.Stream+": "+l.Line)
			}
			_ = json.NewEncoder(w).Encode(agentapi.LogsResponse{Accepted: len(req.Lines)})
		case "finish":
			var req agentapi.FinishRequest
			_ = json.Unmarshal(body, &req)
			p.finish[id] = req
			w.WriteHeader(http.StatusNoContent)
		case agentapi.PathAppStatus:
			var req agentapi.AppReportRequest
			_ = json.Unmarshal(body, &req)
			p.apps[id] = append(p.apps[id], req)
			w.WriteHeader(http.StatusNoContent)
		case "secrets":
			_ = json.NewEncoder(w).Encode(agentapi.SecretsResponse{Secrets: map[string]string{"API_TOKEN": "s3cret-value"}})
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *fakePlane) log(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines[id], "\n")
}

// appReports are the readiness reports the task's job sent.
func (p *fakePlane) appReports(id string) []agentapi.AppReportRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]agentapi.AppReportRequest(nil), p.apps[id]...)
}

func (p *fakePlane) ended(id string) (agentapi.FinishRequest, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.finish[id]
	return f, ok
}

// sharedDir is a directory every local account can enter, like a cluster's
// shared filesystem.
func sharedDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "klique-hpc-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// writeUserMap writes a user map and returns its path.
func writeUserMap(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "users.yaml")
	before, statErr := os.Stat(p)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// A map written again is a change (the map is read again when its
	// size or modification time changes): its time moves on even where
	// the file system's clock is too coarse to tell the writes apart.
	if statErr == nil {
		later := before.ModTime().Add(time.Second)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// jobLog collects the lines a runner writes into a task's log.
type jobLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *jobLog) sink(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, stream+": "+line)
}

func (l *jobLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitPhase polls h until it reaches phase, and returns the status.
func waitPhase(t *testing.T, h runner.Handle, phase runner.Phase, within time.Duration) runner.Status {
	t.Helper()
	var st runner.Status
	if !eventually.Poll(within, func() bool {
		var err error
		if st, err = h.Poll(context.Background()); err != nil {
			t.Logf("poll: %v", err)
		}
		return st.Phase == phase || (st.Phase == runner.Ended && phase != runner.Ended)
	}) {
		t.Fatalf("the job did not reach %s within %s: %+v", phase, within, st)
	}
	return st
}

func currentUser(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// lockedWriter serialises writes from the submitter's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(fmt.Stringer).String()
}
