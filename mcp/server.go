package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform"
)

// Authenticator turns a bearer credential into a principal: the same check
// as every other channel's.
type Authenticator interface {
	Authenticate(ctx context.Context, credential string) (*identity.Principal, error)
}

// ModelCaller sends an OpenAI chat completion request through the LLM
// gateway with the caller's own credential, so that a model call made by a
// tool is authorised, guarded, limited and metered exactly like any other.
// It returns the gateway's HTTP status and body.
type ModelCaller interface {
	ChatCompletion(ctx context.Context, credential, project string, body []byte) (status int, response []byte, err error)
}

// Options configure a Server.
type Options struct {
	// Platforms is the platform, one interface per domain, which is all
	// the tools reach (ServicePlatforms makes it of the service).
	Platforms Platforms
	Auth      Authenticator
	// Models makes the model calls of call_model; without it the tool is
	// not offered.
	Models ModelCaller
	// ResourceMetadataURL is where the OAuth protected-resource metadata
	// of /mcp is published; a 401 names it, so that clients doing OAuth
	// discovery find the authorization server.
	ResourceMetadataURL string
	Log                 *slog.Logger
	// Version is the server version reported to clients.
	Version string
	// OnAuthFailure is told why a credential was refused (for metrics).
	OnAuthFailure func(reason string)
	// OnToolCall is told the outcome of every tool call: ok, refused,
	// bad_arguments or error (for metrics).
	OnToolCall func(tool, outcome string)
}

// Server is the MCP server. It is an http.Handler for /mcp.
type Server struct {
	o      Options
	svc    Platforms
	log    *slog.Logger
	mcp    *mcpserver.MCPServer
	http   *mcpserver.StreamableHTTPServer
	writes map[string]bool
	tools  []string
	// defs are the tools' declarations in the order they were added, for
	// the README's table (ToolTable).
	defs []toolDef
}

// instructions tell an agent what the server is for and where to start.
const instructions = `Klique runs GPU work on your organisation's compute resources under your own identity, policy and budgets; you never reach the hardware directly.
Start with list_compute_resources: the compute resources you may send work to (a compute resource is named for what it gives, such as "1 GPU"), your groups' reservations, limits and time budgets, and the projects you may use.
enqueue_task sends a command, or a repository with an entry point, to a compute resource; get_task says where it is, why it waits and its place in line; get_task_logs and get_task_metrics read what it printed and reported; compare_tasks puts runs side by side; clone_task reruns a task with changed parameters; abort_task stops one.
get_usage reads GPU-hours and model tokens; list_model_aliases and call_model use the LLM gateway.
A refusal says why in words meant for the user: relay it rather than retrying.`

// New builds the server and its tools.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{o: o, svc: o.Platforms, log: o.Log, writes: map[string]bool{}}
	s.mcp = mcpserver.NewMCPServer("klique", o.Version,
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithInstructions(instructions),
		mcpserver.WithTitle("Klique"),
		mcpserver.WithToolFilter(s.filter),
	)
	s.addTools()
	s.http = mcpserver.NewStreamableHTTPServer(s.mcp,
		// Every request carries its user's bearer credential, which a page
		// rebinding a DNS name to 127.0.0.1 cannot send; the check would
		// only refuse a reverse proxy on the same host that keeps the
		// public Host header.
		mcpserver.WithDisableLocalhostProtection(true),
		// The server sends no notifications of its own (the tools do not
		// change while a session lasts), so there is no stream to hold
		// open: GET answers 405, as the transport allows.
		mcpserver.WithDisableStreaming(true),
		// No session is kept: any replica answers any request, and a
		// client needs no session id (nothing a tool does depends on one).
		mcpserver.WithStateLess(true),
		mcpserver.WithStreamableHTTPLogger(o.Log),
	)
	return s
}

// Tools lists the names of the tools the server has, whoever may use them.
func (s *Server) Tools() []string { return append([]string(nil), s.tools...) }

// Writes reports whether a tool changes something or spends a budget, and
// so is offered only to those who may write.
func (s *Server) Writes(tool string) bool { return s.writes[tool] }

// filter keeps the tools the caller's role may use: the others are neither
// listed nor callable.
func (s *Server) filter(ctx context.Context, tools []mcpgo.Tool) []mcpgo.Tool {
	p, ok := identity.PrincipalFrom(ctx)
	out := make([]mcpgo.Tool, 0, len(tools))
	for _, t := range tools {
		if ok && (!s.writes[t.Name] || p.CanWrite()) {
			out = append(out, t)
		}
	}
	return out
}

type credentialKey struct{}

// credentialFrom returns the bearer credential the request came with.
func credentialFrom(ctx context.Context) string {
	c, _ := ctx.Value(credentialKey{}).(string)
	return c
}

// ServeHTTP authenticates the request's bearer credential and serves MCP
// under the caller's identity. A request without a valid credential gets
// 401 with a WWW-Authenticate header that names the protected-resource
// metadata (RFC 9728), as MCP's authorization spec asks.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := identity.WithChannel(r.Context(), identity.ChannelMCP)
	cred, err := identity.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil || cred == "" {
		s.unauthorized(w, "", "send your Klique API key or access token as 'Authorization: Bearer <credential>'")
		return
	}
	p, err := s.o.Auth.Authenticate(ctx, cred)
	switch {
	case errors.Is(err, identity.ErrUnauthenticated):
		s.authFailed(err.Error())
		s.unauthorized(w, "invalid_token", err.Error())
		return
	case err != nil:
		s.log.ErrorContext(ctx, "mcp: authentication failed", "err", err, "request_id", identity.RequestIDFrom(ctx))
		writeJSONError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "could not check the credential right now; try again")
		return
	}
	if r.Method == http.MethodGet {
		s.noStream(w, r.WithContext(ctx))
		return
	}
	ctx = identity.WithPrincipal(ctx, p)
	ctx = context.WithValue(ctx, credentialKey{}, cred)
	s.http.ServeHTTP(w, r.WithContext(ctx))
}

// noStream answers a GET, which asks for a stream of server notifications,
// with 405 as the transport allows: the server sends none (see New). The
// MCP SDKs open that stream after every initialize and take 405 as "no
// stream", so it is routine: it is logged at debug, where mcp-go would
// log an INFO line for every connection.
func (s *Server) noStream(w http.ResponseWriter, r *http.Request) {
	s.log.DebugContext(r.Context(), "mcp: no notification stream to open (GET answered 405)",
		"request_id", identity.RequestIDFrom(r.Context()))
	w.Header().Set("Allow", "POST, DELETE")
	writeJSONError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED",
		"this server sends no notifications, so it has no stream to open: send JSON-RPC requests with POST")
}

func (s *Server) authFailed(reason string) {
	if s.o.OnAuthFailure != nil {
		s.o.OnAuthFailure(reason)
	}
}

// unauthorized answers 401 with the challenge MCP clients follow.
func (s *Server) unauthorized(w http.ResponseWriter, errorCode, message string) {
	var params []string
	if errorCode != "" {
		params = append(params, fmt.Sprintf("error=%q", errorCode))
	}
	if s.o.ResourceMetadataURL != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", s.o.ResourceMetadataURL))
	} else {
		params = append(params, `realm="klique"`)
	}
	// Spelt as RFC 9110 spells it (Set would write Www-Authenticate);
	// clients read header names case-insensitively either way.
	w.Header()["WWW-Authenticate"] = []string{"Bearer " + strings.Join(params, ", ")}
	writeJSONError(w, http.StatusUnauthorized, "UNAUTHENTICATED", message)
}

func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": message}})
}

// toolDef declares a tool.
type toolDef struct {
	name, title, description string
	// writes: the tool changes something or spends a budget; viewers are
	// not offered it.
	writes bool
	// audited: the platform operation writes the call's audit entry itself
	// when it succeeds (task.enqueued, task.aborted).
	audited bool
	// destructive: the change cannot be undone (abort).
	destructive bool
	// idempotent: repeating the call changes nothing more.
	idempotent bool
	// openWorld: the tool reaches beyond the platform (a model).
	openWorld bool
	// enums are allowed values of string (or string list) arguments.
	enums map[string][]string
}

// handler runs a tool on decoded arguments and returns its output and, for
// the audit trail, a one-line account of what it read.
type handler[In, Out any] func(ctx context.Context, in *In) (*Out, string, error)

// addTool registers a tool whose input and output schemas come from In
// and Out.
func addTool[In, Out any](s *Server, d toolDef, h handler[In, Out]) {
	opts := []mcpgo.ToolOption{
		mcpgo.WithDescription(d.description),
		mcpgo.WithToolTitle(d.title),
		mcpgo.WithInputSchema[In](),
		mcpgo.WithOutputSchema[Out](),
		mcpgo.WithToolAnnotation(mcpgo.ToolAnnotation{
			Title:           d.title,
			ReadOnlyHint:    mcpgo.ToBoolPtr(!d.writes),
			DestructiveHint: mcpgo.ToBoolPtr(d.destructive),
			IdempotentHint:  mcpgo.ToBoolPtr(!d.writes || d.idempotent),
			OpenWorldHint:   mcpgo.ToBoolPtr(d.openWorld),
		}),
	}
	t := mcpgo.NewTool(d.name, opts...)
	if len(d.enums) > 0 {
		t.RawInputSchema = withEnums(t.RawInputSchema, d.enums)
	}
	s.writes[d.name] = d.writes
	s.tools = append(s.tools, d.name)
	s.defs = append(s.defs, d)
	s.mcp.AddTool(t, s.wrap(d, func(ctx context.Context, raw json.RawMessage) (any, string, error) {
		in := new(In)
		if err := decodeArgs(raw, in); err != nil {
			return nil, "", err
		}
		out, detail, err := h(ctx, in)
		if err != nil {
			return nil, "", err
		}
		return out, detail, nil
	}))
}

// withEnums adds enum lists to properties of a generated input schema.
func withEnums(schema json.RawMessage, enums map[string][]string) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil {
		return schema
	}
	props, _ := m["properties"].(map[string]any)
	for name, values := range enums {
		prop, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		if items, ok := prop["items"].(map[string]any); ok {
			items["enum"] = values
		} else {
			prop["enum"] = values
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return schema
	}
	return b
}

// wrap turns a tool's run into an MCP handler: a failure becomes a tool
// error saying why, the call is recorded in the audit trail, and a panic
// becomes an internal error without a stack trace.
func (s *Server) wrap(d toolDef, run func(ctx context.Context, raw json.RawMessage) (any, string, error)) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (res *mcpgo.CallToolResult, _ error) {
		defer func() {
			if v := recover(); v != nil {
				s.log.ErrorContext(ctx, "mcp tool panicked", "tool", d.name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()),
					"request_id", identity.RequestIDFrom(ctx))
				res = mcpgo.NewToolResultError(internalMessage(ctx))
				s.counted(d.name, "error")
			}
		}()
		var out any
		var detail string
		raw, err := rawArguments(req)
		if err == nil {
			out, detail, err = run(ctx, raw)
		}
		outcome := "ok"
		var message string
		if err != nil {
			message, outcome = s.explain(ctx, d.name, err)
			detail = strings.ReplaceAll(outcome, "_", " ") + ": " + message
		}
		// A change writes its own audit entry with the platform's; every
		// other call, and every refused one, is recorded here.
		if err != nil || !d.audited {
			if aerr := s.svc.Access.RecordToolCall(ctx, d.name, detail); aerr != nil && err == nil {
				s.log.ErrorContext(ctx, "mcp: a tool call could not be recorded in the audit trail", "tool", d.name, "err", aerr,
					"request_id", identity.RequestIDFrom(ctx))
				s.counted(d.name, "error")
				return mcpgo.NewToolResultError(internalMessage(ctx)), nil
			}
		}
		s.counted(d.name, outcome)
		if err != nil {
			return mcpgo.NewToolResultError(message), nil
		}
		text, jerr := json.Marshal(out)
		if jerr != nil {
			s.log.ErrorContext(ctx, "mcp: encode a tool result", "tool", d.name, "err", jerr)
			return mcpgo.NewToolResultError(internalMessage(ctx)), nil
		}
		return mcpgo.NewToolResultStructured(out, string(text)), nil
	}
}

func (s *Server) counted(tool, outcome string) {
	if s.o.OnToolCall != nil {
		s.o.OnToolCall(tool, outcome)
	}
}

// explain turns an error into what the agent is told and the outcome for
// metrics and the audit trail. Refusals carry the platform's message, in
// words a person can act on; internal failures only a request id.
func (s *Server) explain(ctx context.Context, tool string, err error) (message, outcome string) {
	var ae *argError
	var re *refusedError
	switch {
	case errors.As(err, &ae):
		return ae.msg, "bad_arguments"
	case errors.As(err, &re):
		return re.msg, "refused"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "the call was cancelled before it finished", "error"
	}
	if platform.ErrorCode(err) == platform.CodeInternal {
		s.log.ErrorContext(ctx, "mcp tool failed", "tool", tool, "err", err, "request_id", identity.RequestIDFrom(ctx))
		return internalMessage(ctx), "error"
	}
	return forAgents(platform.PublicMessage(err)), "refused"
}

// forAgents points a refusal's hints at the tools rather than the CLI
// commands they name for people.
func forAgents(msg string) string {
	return strings.ReplaceAll(msg, "'klique get computeresources'", "list_compute_resources")
}

func internalMessage(ctx context.Context) string {
	msg := "internal error; the server log has the details"
	if id := identity.RequestIDFrom(ctx); id != "" {
		msg += " (request " + id + ")"
	}
	return msg
}
