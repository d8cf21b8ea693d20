package server

import "github.com/klique-ai/klique/web"

// mountWeb serves the dashboard: its page at / exactly and its files under
// /ui/. Every other path keeps its own route, and an unknown one is still
// the API's JSON 404, so the dashboard never shadows /graphql, /api, /v1,
// /mcp, /metrics, the health checks or /.well-known.
func (h *Handler) mountWeb() {
	h.route("GET /{$}", "dashboard", web.IndexFor(h.d.AppHosts.Pattern()))
	h.route("GET "+web.AssetPrefix, "dashboard_assets", web.Assets())
}
