package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/klique-ai/klique/agents/client"
	agenttunnel "github.com/klique-ai/klique/agents/tunnel"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/tunnel"
)

// dialTunnel opens the tunnel's WebSocket as cred and returns the HTTP
// status of the answer (101 when it was upgraded) and the error message.
func dialTunnel(t *testing.T, ts *testServer, cred, query string) (int, string) {
	t.Helper()
	h := http.Header{}
	if cred != "" {
		h.Set("Authorization", "Bearer "+cred)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, ts.url+agentapi.PathTunnel+query, &websocket.DialOptions{HTTPHeader: h,
		Subprotocols: []string{agentapi.TunnelSubprotocol}})
	if err == nil {
		_ = c.CloseNow()
		return resp.StatusCode, ""
	}
	if resp == nil {
		t.Fatalf("dial the tunnel: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestATunnelIsHeldOnlyByItsWorkersCredential: the tunnel's WebSocket is
// upgraded only for the credential a worker registered with, naming that
// worker; another credential of the same pool, one of another pool, none,
// or no worker id is refused with a message and holds nothing.
func TestATunnelIsHeldOnlyByItsWorkersCredential(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	b := newBindingSetup(t, ts)
	q := "?workerId=" + b.holderID
	for _, c := range []struct {
		name, cred, query string
		status            int
		says              string
	}{
		{"no credential", "", q, http.StatusUnauthorized, "worker credential"},
		{"a second credential of the pool", b.second, q, http.StatusNotFound, "registered with this credential"},
		{"a credential of another pool", b.otherPool, q, http.StatusNotFound, "registered with this credential"},
		{"no worker id", b.holder, "", http.StatusBadRequest, "workerId"},
	} {
		if status, msg := dialTunnel(t, ts, c.cred, c.query); status != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, status, msg, c.status, c.says)
		}
	}
	if ts.app.Tunnels.Holds(b.holderID) {
		t.Fatal("a refused tunnel is held")
	}
	if status, msg := dialTunnel(t, ts, b.holder, q); status != http.StatusSwitchingProtocols {
		t.Fatalf("the worker's own credential: %d %s", status, msg)
	}
}

// TestATaskCredentialHoldsATunnelForItsOwnTaskOnly: the task's own
// process (inside an HPC job) opens a tunnel with its task credential; it
// carries streams to that task's attempt, and the control plane does not
// use it for any other task of the same worker.
func TestATaskCredentialHoldsATunnelForItsOwnTaskOnly(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	b := newBindingSetup(t, ts)
	a := b.task
	var cred agentapi.TaskCredentialResponse
	if code := agentCall(t, ts, b.holder, http.MethodPost, agentapi.PathTasks+a.TaskID+"/"+agentapi.PathTaskCredential,
		agentapi.TaskCredentialRequest{Attempt: a.Attempt}, &cred); code != http.StatusOK {
		t.Fatalf("task credential: %d", code)
	}
	if status, msg := dialTunnel(t, ts, cred.Token, "?workerId="+b.secondID); status != http.StatusForbidden || !strings.Contains(msg, "leave out workerId") {
		t.Fatalf("a task credential naming another worker: %d %s", status, msg)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("the job's own port\n"))
			_ = c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agenttunnel.Serve(ctx, agenttunnel.Options{Client: client.New(ts.url, cred.Token),
			Lookup:  func(string, int) (string, error) { return l.Addr().String(), nil },
			Backoff: client.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
	}()
	defer func() { cancel(); <-done }()
	eventually.True(t, "the task's tunnel to connect", func() bool { return ts.app.Tunnels.Holds(b.holderID) })

	c, err := ts.app.Tunnels.Open(ctx, appnet.Target{TaskID: a.TaskID, WorkerID: b.holderID, Attempt: a.Attempt})
	if err != nil {
		t.Fatalf("open a stream to the task through its own tunnel: %v", err)
	}
	got, _ := io.ReadAll(c)
	_ = c.Close()
	if string(got) != "the job's own port\n" {
		t.Fatalf("the stream read %q", got)
	}
	other := b.enqueueAndClaimable("another")
	if _, err := ts.app.Tunnels.Open(ctx, appnet.Target{TaskID: other.TaskID, WorkerID: b.holderID, Attempt: other.Attempt}); !errors.Is(err, tunnel.ErrNoTunnel) {
		t.Fatalf("another task of the worker through the task's tunnel: %v, want ErrNoTunnel", err)
	}
}
