package server

import (
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/router"
)

// mountRouter serves app instances at /apps/{id}/ and static routes at
// /routes/{route}/ on the main listener: the router embedded in `klique
// serve`. It reaches an instance through its worker's tunnel when the
// worker holds one here, and directly otherwise. The proxied requests
// skip the common middleware's body limit (an upload to a notebook is not
// an API call) and carry their own access check.
//
// With Deps.AppHosts, each instance is served on a host name of its own
// instead (ServeHTTP hands those hosts to the router before any route),
// and only the dashboard's origin may sign a browser in there.
func (h *Handler) mountRouter() {
	var origins []string
	if h.d.AppHosts.ByHost() && h.d.PublicOrigin != "" {
		origins = []string{h.d.PublicOrigin}
	}
	rt := router.New(router.Config{
		Resolver:      &router.Platform{Auth: h.d.Auth, Apps: h.d.Platform.Apps, Log: h.log},
		Reacher:       &appnet.Auto{Tunnels: h.d.AppTunnels, Direct: &appnet.Direct{Own: h.d.AppOwn}},
		Activity:      h.d.AppActivity,
		Log:           h.log,
		Hosts:         h.d.AppHosts,
		SignInOrigins: origins,
	})
	h.apps = rt
	h.mux.Handle("/apps/", rt)
	h.mux.Handle("/routes/", rt)
}
