package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// A task credential lets the task's own process (inside an HPC job) report
// on its one attempt, and nothing else.
func TestTaskCredential(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	place(t, ts)
	var claim agentapi.ClaimResponse
	if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim,
		agentapi.ClaimRequest{WorkerID: f.ids["worker gpu-host-7"], FreeGPUs: 1, WaitSeconds: 1}, &claim); code != http.StatusOK || claim.Task == nil {
		t.Fatalf("claim: %d %+v", code, claim.Task)
	}
	a := claim.Task
	path := func(id, what string) string { return agentapi.PathTasks + id + "/" + what }
	logs := func(cred, id string, attempt int) int {
		return agentCall(t, ts, cred, http.MethodPost, path(id, "logs"),
			agentapi.LogsRequest{Attempt: attempt, Lines: []agentapi.LogLine{{At: time.Now(), Stream: "stdout", Line: "from the job"}}}, nil)
	}

	var tok agentapi.TaskCredentialResponse
	t.Run("the worker holding a running attempt gets a credential for it", func(t *testing.T) {
		code := agentCall(t, ts, f.workerSecret, http.MethodPost, path(a.TaskID, "credential"), agentapi.TaskCredentialRequest{Attempt: a.Attempt}, &tok)
		if code != http.StatusOK || !strings.HasPrefix(tok.Token, "kqt_") || time.Until(tok.ExpiresAt) < 24*time.Hour {
			t.Fatalf("issue: %d %+v", code, tok)
		}
	})
	t.Run("a credential for an attempt that is not current is refused with 409", func(t *testing.T) {
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, path(a.TaskID, "credential"), agentapi.TaskCredentialRequest{Attempt: a.Attempt + 1}, nil); code != http.StatusConflict {
			t.Fatalf("issue for attempt %d: %d, want 409", a.Attempt+1, code)
		}
	})
	t.Run("it sends the attempt's logs and metrics", func(t *testing.T) {
		if code := logs(tok.Token, a.TaskID, a.Attempt); code != http.StatusOK {
			t.Fatalf("logs: %d", code)
		}
		if code := agentCall(t, ts, tok.Token, http.MethodPost, path(a.TaskID, "metrics"),
			agentapi.MetricsRequest{Attempt: a.Attempt, Points: []agentapi.MetricPoint{{Name: "loss", Value: 0.5}}}, nil); code != http.StatusNoContent {
			t.Fatalf("metrics: %d", code)
		}
		d := ts.mustGQL(t, f.admin, `query($id: ID!) { task(id: $id) { logs { lines { line } } } }`, map[string]any{"id": a.TaskID})
		if !strings.Contains(fmt.Sprint(d), "from the job") {
			t.Fatalf("the line is not in the task's log: %v", d)
		}
	})
	t.Run("another attempt or another task is forbidden", func(t *testing.T) {
		if code := logs(tok.Token, a.TaskID, a.Attempt+1); code != http.StatusForbidden {
			t.Fatalf("other attempt: %d, want 403", code)
		}
		if code := logs(tok.Token, "some-other-task", a.Attempt); code != http.StatusForbidden {
			t.Fatalf("other task: %d, want 403", code)
		}
	})
	t.Run("it cannot act as the worker: register, claim, heartbeat and new credentials are forbidden", func(t *testing.T) {
		for p, in := range map[string]any{
			agentapi.PathRegister:        agentapi.RegisterRequest{Hostname: "job", Mode: "batch"},
			agentapi.PathClaim:           agentapi.ClaimRequest{WorkerID: f.ids["worker gpu-host-7"], FreeGPUs: 1},
			agentapi.PathHeartbeat:       agentapi.HeartbeatRequest{WorkerID: f.ids["worker gpu-host-7"]},
			path(a.TaskID, "credential"): agentapi.TaskCredentialRequest{Attempt: a.Attempt},
		} {
			if code := agentCall(t, ts, tok.Token, http.MethodPost, p, in, nil); code != http.StatusForbidden {
				t.Errorf("%s with a task credential: %d, want 403", p, code)
			}
		}
	})
	t.Run("a forged or altered credential is refused with 401", func(t *testing.T) {
		for _, bad := range []string{"kqt_nothing", tok.Token[:len(tok.Token)-2] + "AA"} {
			if code := logs(bad, a.TaskID, a.Attempt); code != http.StatusUnauthorized {
				t.Errorf("%q: %d, want 401", bad, code)
			}
		}
	})
	t.Run("it reports the end; then no new credential is issued for the attempt", func(t *testing.T) {
		if code := agentCall(t, ts, tok.Token, http.MethodPost, path(a.TaskID, "finish"),
			agentapi.FinishRequest{Attempt: a.Attempt, State: "completed"}, nil); code != http.StatusNoContent {
			t.Fatalf("finish: %d", code)
		}
		d := ts.mustGQL(t, f.admin, `query($id: ID!) { task(id: $id) { status } }`, map[string]any{"id": a.TaskID})
		if str(d, "task", "status") != "COMPLETED" {
			t.Fatalf("task after the finish: %v", d)
		}
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, path(a.TaskID, "credential"), agentapi.TaskCredentialRequest{Attempt: a.Attempt}, nil); code != http.StatusConflict {
			t.Fatalf("issue after the end: %d, want 409", code)
		}
	})
	t.Run("revoking the worker credential that issued it revokes it", func(t *testing.T) {
		ts.mustGQL(t, f.admin, `mutation($id: ID!) { revokeWorkerCredential(id: $id) { revokedAt } }`, map[string]any{"id": f.ids["wcred rack-7"]})
		if code := logs(tok.Token, a.TaskID, a.Attempt); code != http.StatusUnauthorized {
			t.Fatalf("after revocation: %d, want 401", code)
		}
	})
}
