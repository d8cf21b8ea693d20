// Package identity turns a credential (an API key, a Klique access token or
// an identity token from an external OIDC issuer) into a Principal, and
// carries that principal, the channel and the request id through a context.
//
// Security is the point of this package. Tokens are verified strictly: a
// fixed list of signing algorithms, a key type that must match the
// algorithm, issuer, audience and expiry always required. Secrets are hashed
// before they are stored or looked up and are never logged, returned after
// creation or echoed in an error.
//
// Code below the HTTP layer reads identity only from the context
// (PrincipalFrom), never from request headers, so there is exactly one place
// where a credential becomes an identity.
package identity

import (
	"context"
	"slices"
	"sync"

	"github.com/klique-ai/klique/internal/model"
)

// Principal is who is acting: a user of one tenant, with the role and group
// memberships the store held when the credential was checked. It carries no
// secret, so it is safe to log.
type Principal struct {
	TenantID    string
	TenantName  string
	UserID      string
	UserName    string
	DisplayName string
	Role        model.Role
	// Service is set for service users (automation that uses API keys only).
	Service bool
	// Groups are the user's group memberships, ordered by group name.
	Groups []GroupGrant
	// ProjectID is the project a project-scoped API key (or a token issued
	// from one) is limited to; "" when the credential is not scoped.
	ProjectID string
	// DefaultProjectID is the project the user set as their default
	// ('klique project use'), "" when none.
	DefaultProjectID string
	// Method is how the principal authenticated: "api_key", "token" or "oidc".
	Method string
	// CredentialID identifies the credential without revealing it: the API
	// key's id or the token's jti. It lets the audit trail and a revocation
	// point at the credential used.
	CredentialID string
}

// Authentication methods, the values of Principal.Method.
const (
	MethodAPIKey = "api_key"
	MethodToken  = "token"
	MethodOIDC   = "oidc"
)

// GroupGrant is one group membership of a principal.
type GroupGrant struct {
	GroupID   string
	GroupName string
	Role      model.GroupRole
}

// IsAdmin reports whether the principal manages its whole tenant. A nil
// principal is never an admin, so a missing identity fails closed.
func (p *Principal) IsAdmin() bool { return p != nil && p.Role.IsAdmin() }

// InGroup reports whether the principal is a member (or lead) of the group.
func (p *Principal) InGroup(groupID string) bool {
	if p == nil || groupID == "" {
		return false
	}
	for _, g := range p.Groups {
		if g.GroupID == groupID {
			return true
		}
	}
	return false
}

// LeadOf reports whether the principal leads the group.
func (p *Principal) LeadOf(groupID string) bool {
	if p == nil || groupID == "" {
		return false
	}
	for _, g := range p.Groups {
		if g.GroupID == groupID && g.Role == model.GroupRoleLead {
			return true
		}
	}
	return false
}

// GroupIDs returns the ids of the principal's groups, for filters such as
// store.TaskFilter.GroupIDs. The slice is a copy the caller may keep.
func (p *Principal) GroupIDs() []string {
	if p == nil {
		return nil
	}
	ids := make([]string, 0, len(p.Groups))
	for _, g := range p.Groups {
		ids = append(ids, g.GroupID)
	}
	return ids
}

// CanWrite reports whether the principal may change anything beyond its own
// API keys. Viewers, principals without a known role and a nil principal
// may not: unknown means no.
func (p *Principal) CanWrite() bool {
	return p != nil && p.Role.Valid() && p.Role != model.RoleViewer
}

// Clone returns a deep copy, so a caller can adjust a principal (for example
// narrow it to a project) without changing the one in the context.
func (p *Principal) Clone() *Principal {
	if p == nil {
		return nil
	}
	c := *p
	c.Groups = slices.Clone(p.Groups)
	return &c
}

// Channel is the way a request reached the control plane. It is recorded in
// the audit trail next to the principal.
type Channel string

const (
	ChannelGraphQL Channel = "graphql"
	ChannelCLI     Channel = "cli"
	ChannelMCP     Channel = "mcp"
	ChannelGateway Channel = "gateway"
	ChannelWorker  Channel = "worker"
	ChannelEngine  Channel = "engine"
	// ChannelAPI is the small REST API beside GraphQL (token exchange,
	// usage exports).
	ChannelAPI Channel = "api"
	// ChannelSystem is work the control plane does on its own (start-up,
	// migrations), and the default when no channel was set.
	ChannelSystem Channel = "system"
	// ChannelSSO is the sign-in through an external identity provider.
	ChannelSSO Channel = "sso"
	// ChannelSchedule is work a schedule starts as its owner.
	ChannelSchedule Channel = "schedule"
)

// Unexported key types, so no other package can read or overwrite the values
// by accident (or on purpose) with a colliding key.
type (
	principalKey  struct{}
	channelKey    struct{}
	requestIDKey  struct{}
	credentialKey struct{}
)

// WithPrincipal returns a context that carries p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the context carries. ok is false when
// there is none (or it is nil), and callers must then refuse the request.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// WithCredential returns a context that carries the credential a request
// was authenticated with. Only what must authenticate it again later reads
// it: a subscription connection, which outlives the request and re-checks
// its credential after identity changes (a revoked key, a member who left
// a group). It is never logged or returned.
func WithCredential(ctx context.Context, credential string) context.Context {
	return context.WithValue(ctx, credentialKey{}, credential)
}

// CredentialFrom returns the credential the context carries ("" if none).
func CredentialFrom(ctx context.Context) string {
	c, _ := ctx.Value(credentialKey{}).(string)
	return c
}

// WithChannel returns a context that carries the channel c.
func WithChannel(ctx context.Context, c Channel) context.Context {
	return context.WithValue(ctx, channelKey{}, c)
}

// ChannelFrom returns the context's channel, or ChannelSystem when none was
// set: work that did not come through a channel was started by the system.
func ChannelFrom(ctx context.Context) Channel {
	if c, ok := ctx.Value(channelKey{}).(Channel); ok && c != "" {
		return c
	}
	return ChannelSystem
}

// WithRequestID returns a context that carries a request id, so logs and
// errors of one request can be tied together.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the context's request id, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// RequestCaller is where a handler that authenticates its callers itself
// (the LLM gateway reads its own bearer credential) says who called and
// for which project, so that the request's log line names them: the
// server's middleware logs after the handler, from a context the handler's
// own never reaches.
type RequestCaller struct {
	mu            sync.Mutex
	user, project string
}

type requestCallerKey struct{}

// WithRequestCaller returns a context carrying an empty RequestCaller for
// the handlers below to fill.
func WithRequestCaller(ctx context.Context) (context.Context, *RequestCaller) {
	rc := &RequestCaller{}
	return context.WithValue(ctx, requestCallerKey{}, rc), rc
}

// NoteCaller records the caller's user and project name for the request's
// log line ("" leaves a part as it was). Without a RequestCaller in ctx it
// does nothing.
func NoteCaller(ctx context.Context, user, project string) {
	rc, _ := ctx.Value(requestCallerKey{}).(*RequestCaller)
	if rc == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if user != "" {
		rc.user = user
	}
	if project != "" {
		rc.project = project
	}
}

// Caller returns what was noted.
func (rc *RequestCaller) Caller() (user, project string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.user, rc.project
}
