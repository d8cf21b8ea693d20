package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/platform"
)

// A static route's endpoints include the app instances serving it, each
// named by a base URL under appnet.InstanceDomain, which never resolves:
// the upstream transport opens a connection to such an endpoint through
// AppDialer (the worker's tunnel, or directly to the address its worker
// reported), and everything above the connection (balancing, retries,
// streaming) is the same as for any endpoint.

// AppDialer opens a connection to a ready app instance by its task id.
type AppDialer interface {
	DialApp(ctx context.Context, taskID string) (net.Conn, error)
}

// instanceDial wraps a dialer so that instance endpoints are dialled
// through apps, and every other address as before.
func instanceDial(apps AppDialer, dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		id, ok := appnet.InstanceOf(addr)
		if !ok {
			return dial(ctx, network, addr)
		}
		if apps == nil {
			return nil, fmt.Errorf("app instance %s: this gateway cannot reach app instances", id)
		}
		return apps.DialApp(ctx, id)
	}
}

// instanceProxy is the environment's proxy, except for instance
// endpoints, which no proxy can reach.
func instanceProxy(r *http.Request) (*url.URL, error) {
	if _, ok := appnet.InstanceOf(r.URL.Host); ok {
		return nil, nil
	}
	return http.ProxyFromEnvironment(r)
}

// noEndpoint is the answer to a call none of whose targets has an endpoint
// now: each a route whose app instances are all stopped (or not yet
// ready) and with no URL of its own. It names the routes and how to give
// them an endpoint.
func noEndpoint(grant *platform.ModelGrant) string {
	var routes []string
	for _, u := range grant.Upstreams {
		if u.Route != nil && len(u.Route.Endpoints) == 0 {
			routes = append(routes, u.Route.Name)
		}
	}
	app := "vllm"
	launch := make([]string, 0, len(routes))
	for _, r := range routes {
		for _, u := range grant.Upstreams {
			if u.Route != nil && u.Route.Name == r && u.Route.App != "" {
				app = u.Route.App
			}
		}
		launch = append(launch, fmt.Sprintf("'klique app launch %s --route %s --resource …'", app, r))
	}
	return fmt.Sprintf("alias %s: route %s has no running endpoint (no ready app instance serves it); launch one with %s, or wait for one starting to be ready",
		grant.Alias.Name, strings.Join(routes, ", "), strings.Join(launch, " or "))
}
