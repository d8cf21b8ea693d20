package server

import (
	"net/http"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
)

// taskAuth resolves a task credential (kqt_…) into the worker identity it
// acts as, scoped to its one task attempt; the platform service refuses
// every call outside that scope.
func (h *Handler) taskAuth(w http.ResponseWriter, r *http.Request, cred string, next http.HandlerFunc) {
	ctx := r.Context()
	wk, scope, err := h.d.Platform.Fleet.AuthenticateTaskCredential(ctx, cred)
	if err != nil {
		if platform.ErrorCode(err) == platform.CodeUnauthenticated {
			h.metrics.authFailures.WithLabelValues("task: " + err.Error()).Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="klique-agent", error="invalid_token"`)
		}
		writePlatformError(w, r, err)
		return
	}
	next(w, r.WithContext(platform.WithTaskScope(identity.WithWorker(ctx, wk), scope)))
}

// agentTaskCredential issues a credential for one attempt of a task the
// worker holds, for the task's own process to report with.
func (h *Handler) agentTaskCredential(w http.ResponseWriter, r *http.Request) {
	var req agentapi.TaskCredentialRequest
	if !decode(w, r, &req) {
		return
	}
	resp, err := h.d.Platform.Fleet.IssueTaskCredential(r.Context(), r.PathValue("id"), req.Attempt)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
}
