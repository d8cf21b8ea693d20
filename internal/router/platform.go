package router

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// Authenticator is what the embedded router needs of identity: the same
// check of a credential as the API's (cached, and dropped at once on a
// change to keys and users), and the exchange of a key for a token.
type Authenticator interface {
	AuthenticateCached(ctx context.Context, credential string) (*identity.Principal, error)
	IssueToken(p *identity.Principal) (string, time.Time, error)
}

// Apps is the platform service's part the embedded router reads.
type Apps interface {
	OpenAppInstance(ctx context.Context, id string) (*model.AppInstance, error)
	RouteInstances(ctx context.Context, route string) ([]*model.AppInstance, error)
}

// Platform resolves through the platform service in the same process:
// the router embedded in `klique serve`.
type Platform struct {
	Auth Authenticator
	Apps Apps
	Log  *slog.Logger
}

func (p *Platform) caller(ctx context.Context, cred string) (context.Context, *identity.Principal, error) {
	who, err := p.Auth.AuthenticateCached(ctx, cred)
	if err != nil {
		return nil, nil, p.refusal(ctx, err)
	}
	ctx = identity.WithChannel(identity.WithPrincipal(ctx, who), identity.ChannelAPI)
	return platform.WithRequestCache(ctx), who, nil
}

// Instance implements Resolver.
func (p *Platform) Instance(ctx context.Context, cred, id string) (*Instance, error) {
	ctx, _, err := p.caller(ctx, cred)
	if err != nil {
		return nil, err
	}
	in, err := p.Apps.OpenAppInstance(ctx, id)
	if err != nil {
		return nil, p.refusal(ctx, err)
	}
	return instanceOf(in), nil
}

// Route implements Resolver.
func (p *Platform) Route(ctx context.Context, cred, route string) ([]*Instance, error) {
	ctx, _, err := p.caller(ctx, cred)
	if err != nil {
		return nil, err
	}
	list, err := p.Apps.RouteInstances(ctx, route)
	if err != nil {
		return nil, p.refusal(ctx, err)
	}
	out := make([]*Instance, 0, len(list))
	for _, in := range list {
		out = append(out, instanceOf(in))
	}
	return out, nil
}

// CookieCredential implements Resolver: an API key or an SSO identity
// token is exchanged for an access token; an access token is kept.
func (p *Platform) CookieCredential(ctx context.Context, cred string) (string, time.Time, error) {
	_, who, err := p.caller(ctx, cred)
	if err != nil {
		return "", time.Time{}, err
	}
	if who.Method == identity.MethodToken {
		return cred, time.Time{}, nil // a session cookie; the token ends it
	}
	tok, exp, err := p.Auth.IssueToken(who)
	if err != nil {
		return "", time.Time{}, p.refusal(ctx, err)
	}
	return tok, exp, nil
}

// refusal turns a platform or identity error into the router's answer;
// anything else is logged and answered as unavailable, without details.
func (p *Platform) refusal(ctx context.Context, err error) error {
	msg := platform.PublicMessage(err)
	switch platform.ErrorCode(err) {
	case platform.CodeUnauthenticated:
		return unauthenticated(msg)
	case platform.CodeNotFound:
		return notFound(msg)
	case platform.CodeForbidden:
		return &Error{Status: http.StatusForbidden, Code: "FORBIDDEN", Message: msg}
	case platform.CodeInvalid:
		return &Error{Status: http.StatusBadRequest, Code: "BAD_USER_INPUT", Message: msg}
	}
	if p.Log != nil && !errors.Is(err, context.Canceled) {
		p.Log.ErrorContext(ctx, "router: could not resolve an app instance", "err", err)
	}
	return unavailable("could not check the request right now; try again")
}

// instanceOf is a platform instance as the router sees it.
func instanceOf(in *model.AppInstance) *Instance {
	t := in.Task
	keep := false
	if a := t.Spec.App; a != nil {
		keep = namesOwnPath(t.ID, append([]string{a.Run.Process, a.Run.Batch, strings.Join(t.Spec.Command, " ")}, a.Run.Args...)...)
	}
	return &Instance{ID: t.ID, Name: t.Name, State: in.State, Reason: t.Reason, KeepPrefix: keep,
		Target: appnet.TargetOf(t.TenantID, t.ID, t.Run.WorkerID, t.Run.Attempt, in.Address, t.Run.AppAllow, t.Run.AppRefused)}
}
