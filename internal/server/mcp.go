package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/version"
	"github.com/klique-ai/klique/mcp"
)

// mountMCP serves the MCP server at /mcp and its OAuth protected-resource
// metadata (RFC 9728) at /.well-known/oauth-protected-resource/mcp. The
// metadata names the configured SSO as the authorization server, so that
// clients doing OAuth discovery find it; a 401 from /mcp points to the
// metadata.
func (h *Handler) mountMCP(cfg *config.Config, log *slog.Logger) {
	resource := cfg.PublicURL + "/mcp"
	metadataPath := mcpserver.ProtectedResourceMetadataPath(resource)
	metadataURL := resource
	if u, err := url.Parse(cfg.PublicURL); err == nil {
		metadataURL = u.Scheme + "://" + u.Host + metadataPath
	}
	md := mcpserver.ProtectedResourceMetadataConfig{
		Resource:               resource,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Klique",
	}
	if cfg.OIDCIssuer != "" {
		md.AuthorizationServers = []string{cfg.OIDCIssuer}
	}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "klique_mcp_tool_calls_total", Help: "MCP tool calls by tool and outcome (ok, refused, bad_arguments, error).",
	}, []string{"tool", "outcome"})
	if err := h.metrics.registry.Register(calls); err != nil {
		log.Warn("mcp metrics not registered", "err", err)
	}
	srv := mcp.New(mcp.Options{
		Platforms: h.d.Platform.MCP, Auth: h.d.Auth, Models: gatewayRoundTrip{h: h},
		ResourceMetadataURL: metadataURL, Log: log.With("component", "mcp"), Version: version.Version,
		OnAuthFailure: func(reason string) { h.metrics.authFailures.WithLabelValues(reason).Inc() },
		OnToolCall:    func(tool, outcome string) { calls.WithLabelValues(tool, outcome).Inc() },
	})
	h.route("/mcp", "mcp", srv)
	h.route(metadataPath, "mcp_resource_metadata", mcpserver.NewProtectedResourceMetadataHandler(md))
}

// maxModelAnswer bounds the answer of a model call made for an MCP tool.
const maxModelAnswer = 16 << 20

// gatewayRoundTrip makes the model calls of MCP tools through the control
// plane's own /v1 route, in process, with the caller's credential: the call
// takes the gateway's whole path (authentication, guardrails, budgets, rate
// limits, fallbacks) and is metered on the ledger like any other.
type gatewayRoundTrip struct{ h http.Handler }

func (g gatewayRoundTrip) ChatCompletion(ctx context.Context, credential, project string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+credential)
	req.Header.Set("Content-Type", "application/json")
	if project != "" {
		req.Header.Set("X-Klique-Project", project)
	}
	if id := identity.RequestIDFrom(ctx); id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	rec := &answerRecorder{header: http.Header{}, status: http.StatusOK}
	g.h.ServeHTTP(rec, req)
	return rec.status, rec.body.Bytes(), nil
}

// answerRecorder is the response writer of an in-process gateway call.
type answerRecorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *answerRecorder) Header() http.Header { return r.header }

func (r *answerRecorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *answerRecorder) Write(p []byte) (int, error) {
	r.wrote = true
	if r.body.Len()+len(p) > maxModelAnswer {
		return 0, io.ErrShortWrite
	}
	return r.body.Write(p)
}
