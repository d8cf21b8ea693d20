package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/router"
)

// routerOptions are `klique router`'s settings.
type routerOptions struct {
	controlPlane, listen, issuer string
	cacheTTL                     time.Duration
	allowHTTP                    bool
	logs                         logFlags
}

func newRouterCmd(c *cli.CLI) *cobra.Command {
	var o routerOptions
	cmd := &cobra.Command{
		Use:   "router --control-plane URL [--listen ADDR]",
		Short: "Run the router at a site: app instances at /apps/{id}/ and static routes at /routes/{route}/",
		Long: `Run the router at a site, behind that site's ingress, so that traffic to the
site's app instances (a notebook, a model endpoint) need not cross the control
plane. It serves each instance at /apps/{id}/ and each static route at
/routes/{route}/ as an authenticated reverse proxy (HTTP, WebSocket, streams),
and reaches instances directly at the address their worker reported.

Callers send the same credentials as to the API: an API key or an access token
(Authorization: Bearer), or the cookie of the sign-in hop
(POST /apps/{id}/_klique/signin). Access tokens are verified here against the
control plane's keys (/.well-known/jwks.json); who may open what is asked of
the control plane with the caller's own credential, and the answer is kept for
--cache-ttl, so a revoked key stops working within that time. See docs/apps.md.`,
		Example: `  klique router --control-plane https://klique.corp --listen :8443
  KLIQUE_ROUTER_CONTROL_PLANE=https://klique.corp KLIQUE_ROUTER_LISTEN=0.0.0.0:8090 klique router`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRouter(cmd.Context(), c, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.controlPlane, "control-plane", os.Getenv("KLIQUE_ROUTER_CONTROL_PLANE"), "the control plane's URL (or $KLIQUE_ROUTER_CONTROL_PLANE)")
	f.StringVar(&o.listen, "listen", cli.FirstNonEmpty(os.Getenv("KLIQUE_ROUTER_LISTEN"), "127.0.0.1:8090"), "address to listen on (or $KLIQUE_ROUTER_LISTEN)")
	f.StringVar(&o.issuer, "issuer", os.Getenv("KLIQUE_ROUTER_ISSUER"), "the iss of the control plane's access tokens, its KLIQUE_PUBLIC_URL (default: --control-plane; or $KLIQUE_ROUTER_ISSUER)")
	f.DurationVar(&o.cacheTTL, "cache-ttl", router.DefaultCacheTTL, "how long the control plane's answer for a credential and an instance is reused: a revoked key stops working within it")
	f.BoolVar(&o.allowHTTP, "allow-http", false, "accept a plain-HTTP control plane that is not on loopback (its keys could be forged in transit; development only)")
	o.logs.add(f, false)
	return cmd
}

func runRouter(ctx context.Context, c *cli.CLI, o routerOptions) error {
	if o.controlPlane == "" {
		return cli.Usagef("say which control plane with --control-plane URL (or set KLIQUE_ROUTER_CONTROL_PLANE)")
	}
	if o.cacheTTL <= 0 || o.cacheTTL > time.Minute {
		return cli.Usagef("--cache-ttl %s: give a duration from 1s to 1m (a revoked key keeps working that long)", o.cacheTTL)
	}
	log, err := o.logs.logger(c.Err)
	if err != nil {
		return err
	}
	own := appnet.NewOwn()
	h, err := router.Standalone(router.RemoteConfig{ControlPlane: o.controlPlane, Issuer: o.issuer, Log: log, AllowHTTP: o.allowHTTP},
		o.cacheTTL, appnet.NewActivity(nil), own)
	if err != nil {
		return cli.Usage(err)
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s (set --listen or KLIQUE_ROUTER_LISTEN to another address): %w", o.listen, err)
	}
	own.Add(ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Warn("this router serves app instances by path on its own origin (/apps/{id}/): a page of one instance can read another's; " +
		"keep to it for programs and a single trusted team, and open instances in browsers on the control plane's instance hosts (KLIQUE_APPS_DOMAIN, docs/apps.md)")
	log.Info("klique router serving", "url", "http://"+ln.Addr().String(), "control_plane", o.controlPlane, "cache_ttl", o.cacheTTL)
	select {
	case <-ctx.Done():
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("router: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	log.Info("router stopped")
	return nil
}
