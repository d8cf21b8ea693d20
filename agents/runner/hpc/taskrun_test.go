package hpc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
)

// TestALogFlushUnderWayWhenTheCommandEndsIsNotCut: the periodic flush
// takes the waiting lines and sends them; when the command ends while that
// send is under way, the send goes to its end instead of being cancelled,
// which lost the lines it held (the command's last, "bye": the final flush
// no longer had them).
func TestALogFlushUnderWayWhenTheCommandEndsIsNotCut(t *testing.T) {
	entered, release, cancelled := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/logs") {
			http.NotFound(w, r)
			return
		}
		var req agentapi.LogsRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
			cancelled <- struct{}{}
			return
		}
		for _, l := range req.Lines {
			got <- l.Line
		}
		_ = json.NewEncoder(w).Encode(agentapi.LogsResponse{Accepted: len(req.Lines)})
	}))
	defer srv.Close()
	r := &reporter{cl: client.New(srv.URL, "kq_task"), spec: &JobSpec{TaskID: "t1", Attempt: 1}, say: t.Logf,
		lines: []agentapi.LogLine{{At: time.Now(), Stream: agentapi.StreamStdout, Line: "bye", N: 1}}}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); r.send(context.Background(), stop, time.Millisecond) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the periodic flush sent nothing")
	}
	close(stop) // the command ended: the send goes on
	// Nothing can show that a send is not cancelled but a while without
	// it: a cancellation comes at once, well within this.
	select {
	case <-cancelled:
		t.Fatal("the send under way was cancelled when the command ended")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the send loop did not stop")
	}
	r.flush(context.Background()) // the final flush: nothing left
	select {
	case line := <-got:
		if line != "bye" {
			t.Fatalf("the control plane got %q, want bye", line)
		}
	default:
		t.Fatal("the line the flush under way held was lost")
	}
}
