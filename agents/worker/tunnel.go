package worker

import (
	"context"
	"fmt"
	"net"

	"github.com/klique-ai/klique/agents/tunnel"
	"github.com/klique-ai/klique/internal/agentapi"
)

// serveTunnel holds the worker's tunnel to the control plane until ctx is
// done, so that the control plane reaches this worker's app instances
// even when nothing can connect into the worker's site.
func (w *Worker) serveTunnel(ctx context.Context) {
	err := tunnel.Serve(ctx, tunnel.Options{Client: w.cfg.Client, WorkerID: w.id, Lookup: w.appLocal,
		Backoff: w.cfg.Backoff, Log: w.log.With("component", "tunnel")})
	if err != nil {
		w.log.Error("the tunnel is off", "err", err)
	}
}

// appLocal is where the tunnel dials an app instance this worker runs:
// only an instance of the attempt it holds now, and only at the port the
// worker gave it. Anything else is refused with a message.
func (w *Worker) appLocal(taskID string, attempt int) (string, error) {
	w.mu.Lock()
	t := w.tasks[taskKey(taskID, attempt)]
	w.mu.Unlock()
	if t == nil || t.a.App == nil {
		return "", fmt.Errorf("worker %s runs no app instance %s at attempt %d: a tunnel reaches only the app instances its worker runs",
			w.cfg.Hostname, taskID, attempt)
	}
	t.mu.Lock()
	addr := t.appAddress
	t.mu.Unlock()
	if addr == "" {
		return "", fmt.Errorf("app instance %s is not ready: it is starting, or its health path stopped answering", taskID)
	}
	if mode := w.cfg.Runner.Name(); (mode == agentapi.ModeProcess && !w.cfg.Placed) || mode == agentapi.ModeDocker {
		// The app answers on a port of this host: reach it where its
		// health probe does (loopback, unless docker published it on
		// the reported IP only). A pod's address is its own IP.
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", fmt.Errorf("app instance %s: address %q: %w", taskID, addr, err)
		}
		addr = net.JoinHostPort(w.probeHost(), port)
	}
	return addr, nil
}
