package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
)

// startGatewayListener serves the gateway alone on KLIQUE_GATEWAY_LISTEN.
func (a *App) startGatewayListener(cfg *config.Config) error {
	if cfg.GatewayListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.GatewayListen)
	if err != nil {
		return fmt.Errorf("listen on KLIQUE_GATEWAY_LISTEN=%s: %w", cfg.GatewayListen, err)
	}
	a.own.Add(ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("/v1/", a.Handler.common("gateway", a.gateway))
	mux.Handle("/", a.Handler.common("not_found", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"this listener serves the LLM gateway under /v1","type":"invalid_request_error","code":"unknown_url"}}`, http.StatusNotFound)
	})))
	a.gatewaySrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	a.gatewayURL = "http://" + ln.Addr().String()
	go func() { _ = a.gatewaySrv.Serve(ln) }()
	a.log.Info("LLM gateway serving on its own listener", "url", a.gatewayURL+"/v1")
	return nil
}

// invalidateCredentialsOn drops the gateway's cached credential checks
// whenever users, memberships, keys, tenants or projects change here, so
// such a change takes effect on the next call.
func invalidateCredentialsOn(bus events.Broker, auth *identity.Authenticator) {
	sub := bus.Subscribe(256, func(e events.Event) bool {
		for _, prefix := range []string{"api_key.", "user.", "group.", "tenant.", "project."} {
			if strings.HasPrefix(e.Kind, prefix) {
				return true
			}
		}
		return false
	})
	go func() {
		for range sub.C {
			auth.Invalidate()
		}
	}()
}

// budgetReader lets the budgets people read come from the limiter the
// gateway enforces them with, so that what they see is what it enforces.
func budgetReader(l limits.Limiter) platform.BudgetReader {
	h, ok := l.(limits.Holder)
	if !ok {
		return nil
	}
	return func(ctx context.Context, ws []platform.LimitWindow, now time.Time) ([]platform.HeldBudget, error) {
		in := make([]limits.Window, len(ws))
		for i, w := range ws {
			in[i] = limits.Window{Key: w.Key, Limit: w.Limit, Ends: w.Ends, Seeded: w.Budget}
		}
		got, err := h.Holdings(ctx, in, now)
		if err != nil {
			return nil, err
		}
		out := make([]platform.HeldBudget, len(got))
		for i, g := range got {
			out[i] = platform.HeldBudget{Count: g.Count, Reserved: g.Reserved, Counted: g.Counted}
		}
		return out, nil
	}
}

// appDialer reaches the ready app instances that serve static routes:
// the platform's serving index says where each is (its worker, attempt
// and address), and the reacher opens the connection (the worker's
// tunnel when it holds one to this replica, else directly).
type appDialer struct {
	serving ServingIndex
	reach   appnet.Reacher
}

func (d appDialer) DialApp(ctx context.Context, taskID string) (net.Conn, error) {
	t, ok := d.serving.Target(taskID)
	if !ok {
		return nil, fmt.Errorf("app instance %s: %w", taskID, appnet.ErrNotReady)
	}
	// The endpoint came from the caller's grant, which holds only its
	// tenant's instances; checked again here so that no other way of
	// naming an instance can cross tenants.
	if p, ok := identity.PrincipalFrom(ctx); ok && p.TenantID != t.TenantID {
		return nil, fmt.Errorf("app instance %s: %w", taskID, appnet.ErrNotReady)
	}
	return d.reach.Reach(ctx, t)
}
