package server

import (
	"net/http"

	"github.com/klique-ai/klique/internal/agentapi"
)

// The autoscaler's routes (docs/estates.md): `klique autoscaler` speaks
// with a worker credential of the pool it scales; the platform service
// finds the pool's autoscaler from it.
func (h *Handler) autoscalerRoutes() {
	h.route("POST "+agentapi.PathAutoscalerSync, "agent_autoscaler_sync", h.workerAuth(h.autoscalerSync))
	h.route("GET "+agentapi.PathAutoscalerCredentials, "agent_autoscaler_credentials", h.workerAuth(h.autoscalerCredentials))
}

func (h *Handler) autoscalerSync(w http.ResponseWriter, r *http.Request) {
	var req agentapi.AutoscalerSyncRequest
	if !decode(w, r, &req) {
		return
	}
	resp, err := h.d.Platform.Fleet.SyncAutoscaler(r.Context(), req)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) autoscalerCredentials(w http.ResponseWriter, r *http.Request) {
	resp, err := h.d.Platform.Fleet.AutoscalerCredentials(r.Context())
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, resp)
}
