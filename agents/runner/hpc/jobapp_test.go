package hpc

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// appSpec is the job description of an app instance whose batch line is
// script, reporting to plane.
func appSpec(t *testing.T, plane *fakePlane, id, script string, startTimeout int) *JobSpec {
	t.Helper()
	dir := t.TempDir()
	cred := filepath.Join(dir, credentialFile)
	if err := os.WriteFile(cred, []byte("kqt_for_"+id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &JobSpec{Server: plane.URL, TaskID: id, Attempt: 1, CredentialFile: cred, Dir: dir,
		Command: []string{"/bin/sh", "-c", script}, Env: map[string]string{"KLIQUE_APP_PORT": "{port}"},
		MetricsFile: filepath.Join(dir, "m.jsonl"), OutputsFile: filepath.Join(dir, "o.txt"), ReportedFile: filepath.Join(dir, reportedFile),
		App: &JobApp{HealthPath: "/", ProbeIntervalMillis: 50, StartTimeoutSeconds: startTimeout}}
}

// TestTaskRunServesAnAppInstance runs `klique task-run`'s code in this
// process (no scheduler): the app's batch line gets a free port for
// {port} (and in KLIQUE_APP_PORT), the job reports it ready at the node's
// name and that port with the task's credential, then not ready when it
// stops answering; its exit is reported failed, exit code 0 included. An
// app that never answers is stopped after the start timeout and reported
// failed, saying so.
func TestTaskRunServesAnAppInstance(t *testing.T) {
	t.Parallel()
	plane := newFakePlane(t)
	node, _ := os.Hostname()

	t.Run("ready, not ready, and its exit a failure", func(t *testing.T) {
		t.Parallel()
		spec := appSpec(t, plane, "serve", `echo "port $KLIQUE_APP_PORT"
python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 & pid=$!
while [ ! -f stop ]; do sleep 0.05; done
kill $pid; wait $pid; sleep 0.5; exit 0`, 20)
		done := make(chan int, 1)
		go func() {
			done <- RunTask(context.Background(), spec, TaskRunOptions{FlushInterval: 50 * time.Millisecond, Stderr: io.Discard})
		}()
		eventually.Within(t, 15*time.Second, "a ready report", func() bool { return len(plane.appReports("serve")) >= 1 })
		r := plane.appReports("serve")[0]
		host, port, err := net.SplitHostPort(r.Address)
		if !r.Ready || r.Attempt != 1 || err != nil || host != node || port == "" {
			t.Fatalf("report %+v, want ready at %s:port for attempt 1", r, node)
		}
		if !strings.Contains(plane.log("serve"), "stdout: port "+port) {
			t.Fatalf("KLIQUE_APP_PORT is not the port reported:\n%s", plane.log("serve"))
		}
		if err := os.WriteFile(filepath.Join(spec.Dir, "stop"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		eventually.Within(t, 15*time.Second, "a not-ready report", func() bool { return len(plane.appReports("serve")) >= 2 })
		if r := plane.appReports("serve")[1]; r.Ready || r.Address != "" {
			t.Fatalf("second report %+v, want not ready", r)
		}
		<-done
		f, ok := plane.ended("serve")
		if !ok || f.State != agentapi.StateFailed || f.ExitCode != 0 || !strings.Contains(f.Message, "never completes on its own") {
			t.Fatalf("end %+v, want failed with exit code 0: an app never completes", f)
		}
	})
	t.Run("never answers: stopped at the start timeout", func(t *testing.T) {
		t.Parallel()
		spec := appSpec(t, plane, "mute", `echo warming up; exec sleep 30`, 1)
		start := time.Now()
		RunTask(context.Background(), spec, TaskRunOptions{FlushInterval: 50 * time.Millisecond, Stderr: io.Discard})
		f, ok := plane.ended("mute")
		if !ok || f.State != agentapi.StateFailed || !strings.Contains(f.Message, "did not answer on its health path / within 1s") ||
			time.Since(start) > 15*time.Second {
			t.Fatalf("end %+v after %s, want failed at the start timeout", f, time.Since(start))
		}
		if n := len(plane.appReports("mute")); n != 0 {
			t.Fatalf("an app that never answered sent %d readiness reports", n)
		}
	})
}
