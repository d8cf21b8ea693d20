package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/tunnel"
)

// agentTunnel holds a worker's tunnel (internal/tunnel): the platform
// service checks that the credential may hold the tunnel it asks for (its
// own worker's, or its own task's with a task credential), and checks it
// again every minute while the tunnel is up, so that a revoked credential
// or an ended attempt loses it.
func (h *Handler) agentTunnel(w http.ResponseWriter, r *http.Request) {
	workerID := r.URL.Query().Get("workerId")
	b, err := h.d.Platform.Fleet.BindTunnel(r.Context(), workerID)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	cred, _ := bearer(r)
	check := func(ctx context.Context) error {
		ctx, err := h.workerContext(ctx, cred)
		if err == nil {
			_, err = h.d.Platform.Fleet.BindTunnel(ctx, workerID)
		}
		switch platform.ErrorCode(err) {
		case platform.CodeUnauthenticated, platform.CodeNotFound, platform.CodeForbidden, platform.CodeConflict:
			return err
		}
		// Anything else (the store is briefly unreachable) keeps the
		// tunnel until the next check.
		return nil
	}
	if err := h.tunnels.Serve(w, r, tunnel.Binding{WorkerID: b.WorkerID, TaskID: b.TaskID, Attempt: b.Attempt}, check); err != nil {
		h.log.DebugContext(r.Context(), "tunnel ended", "worker", b.WorkerID, "err", err)
	}
}

// workerContext authenticates a worker or task credential again, as
// workerAuth did when the tunnel was opened.
func (h *Handler) workerContext(ctx context.Context, cred string) (context.Context, error) {
	if strings.HasPrefix(cred, agentapi.TaskCredentialPrefix) {
		wk, scope, err := h.d.Platform.Fleet.AuthenticateTaskCredential(ctx, cred)
		if err != nil {
			return nil, err
		}
		return platform.WithTaskScope(identity.WithWorker(ctx, wk), scope), nil
	}
	wk, err := h.d.Platform.Fleet.AuthenticateWorker(ctx, cred)
	if err != nil {
		return nil, err
	}
	return identity.WithWorker(ctx, wk), nil
}

// Tunnels is the control plane's end of the workers' tunnels on this
// replica: the router and the gateway reach app instances through it
// (appnet.Auto).
func (h *Handler) Tunnels() *tunnel.Registry { return h.tunnels }
