package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
)

// The worker protocol's routes (docs/agent-protocol.md). Workers
// authenticate with a worker credential; everything else is the platform
// service's.
func (h *Handler) agentRoutes() {
	post := func(path, name string, fn http.HandlerFunc) {
		h.route("POST "+path, name, h.workerAuth(fn))
	}
	post(agentapi.PathRegister, "agent_register", h.agentRegister)
	post(agentapi.PathClaim, "agent_claim", h.agentClaim)
	post(agentapi.PathHeartbeat, "agent_heartbeat", h.agentHeartbeat)
	post(agentapi.PathTasks+"{id}/logs", "agent_logs", h.agentLogs)
	post(agentapi.PathTasks+"{id}/metrics", "agent_metrics", h.agentMetrics)
	post(agentapi.PathTasks+"{id}/finish", "agent_finish", h.agentFinish)
	h.route("GET "+agentapi.PathTasks+"{id}/secrets", "agent_secrets", h.workerAuth(h.agentSecrets))
	post(agentapi.PathTasks+"{id}/"+agentapi.PathTaskCredential, "agent_task_credential", h.agentTaskCredential)
	post(agentapi.PathTasks+"{id}/"+agentapi.PathAppStatus, "agent_app_status", h.agentAppStatus)
	h.route("GET "+agentapi.PathTunnel, "agent_tunnel", h.workerAuth(h.agentTunnel))
}

// workerAuth resolves the worker credential into a worker identity.
func (h *Handler) workerAuth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := identity.WithChannel(r.Context(), identity.ChannelWorker)
		// The connection's own remote address, never a header a caller
		// could set: the router's address rule trusts it.
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			ctx = identity.WithPeer(ctx, ap.Addr().Unmap())
		}
		cred, ok := bearer(r)
		if !ok || cred == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="klique-agent"`)
			writeError(w, r, http.StatusUnauthorized, "UNAUTHENTICATED", "send the worker credential as 'Authorization: Bearer kqw_…'")
			return
		}
		if strings.HasPrefix(cred, agentapi.TaskCredentialPrefix) {
			// A task's own process, inside an HPC job (agent_task.go).
			h.taskAuth(w, r.WithContext(ctx), cred, next)
			return
		}
		wk, err := h.d.Platform.Fleet.AuthenticateWorker(ctx, cred)
		if err != nil {
			if platform.ErrorCode(err) == platform.CodeUnauthenticated {
				h.metrics.authFailures.WithLabelValues("worker: " + err.Error()).Inc()
				w.Header().Set("WWW-Authenticate", `Bearer realm="klique-agent", error="invalid_token"`)
			}
			writePlatformError(w, r, err)
			return
		}
		next(w, r.WithContext(identity.WithWorker(ctx, wk)))
	})
}

// decode reads a JSON body. Unknown fields are accepted, so that a newer
// worker can talk to an older control plane.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, r, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "the request body is larger than allowed; send smaller batches")
			return false
		}
		writeError(w, r, http.StatusBadRequest, string(platform.CodeInvalid), "the request body is not valid JSON for this call: "+err.Error())
		return false
	}
	return true
}

func (h *Handler) agentRegister(w http.ResponseWriter, r *http.Request) {
	var req agentapi.RegisterRequest
	if !decode(w, r, &req) {
		return
	}
	resp, err := h.d.Platform.Fleet.RegisterWorker(r.Context(), req)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) agentClaim(w http.ResponseWriter, r *http.Request) {
	var req agentapi.ClaimRequest
	if !decode(w, r, &req) {
		return
	}
	a, err := h.d.Platform.Fleet.ClaimTask(r.Context(), req)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	if a == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, agentapi.ClaimResponse{Task: a})
}

func (h *Handler) agentHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req agentapi.HeartbeatRequest
	if !decode(w, r, &req) {
		return
	}
	resp, err := h.d.Platform.Fleet.Heartbeat(r.Context(), req)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) agentLogs(w http.ResponseWriter, r *http.Request) {
	var req agentapi.LogsRequest
	if !decode(w, r, &req) {
		return
	}
	resp, err := h.d.Platform.Fleet.AppendLogs(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) agentMetrics(w http.ResponseWriter, r *http.Request) {
	var req agentapi.MetricsRequest
	if !decode(w, r, &req) {
		return
	}
	if err := h.d.Platform.Fleet.AppendMetrics(r.Context(), r.PathValue("id"), req); err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) agentFinish(w http.ResponseWriter, r *http.Request) {
	var req agentapi.FinishRequest
	if !decode(w, r, &req) {
		return
	}
	if err := h.d.Platform.Fleet.FinishTask(r.Context(), r.PathValue("id"), req); err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) agentAppStatus(w http.ResponseWriter, r *http.Request) {
	var req agentapi.AppReportRequest
	if !decode(w, r, &req) {
		return
	}
	if err := h.d.Platform.Fleet.ReportAppStatus(r.Context(), r.PathValue("id"), req); err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) agentSecrets(w http.ResponseWriter, r *http.Request) {
	attempt, err := strconv.Atoi(r.URL.Query().Get("attempt"))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, string(platform.CodeInvalid), "give the attempt number of the claim: ?attempt=N")
		return
	}
	resp, err := h.d.Platform.Fleet.TaskSecrets(r.Context(), r.PathValue("id"), attempt)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
}
