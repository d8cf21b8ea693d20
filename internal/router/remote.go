package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/identity"
)

// Remote resolves through the control plane's public API: the router run
// as `klique router` at a site. The platform checks access there, with
// the caller's own credential (GraphQL appInstance and routeInstances);
// the router caches the answer for its cache TTL, which bounds how long a
// revoked credential keeps working. Klique access tokens are also verified
// here, against the control plane's published keys
// (/.well-known/jwks.json), so a forged or expired token is refused
// without a call home.
type Remote struct {
	base   string
	client *http.Client
	tokens *identity.OIDCVerifier
	issuer string
	log    *slog.Logger
	now    func() time.Time
}

// RemoteConfig configures a Remote.
type RemoteConfig struct {
	// ControlPlane is the control plane's base URL.
	ControlPlane string
	// Issuer is the iss of the control plane's access tokens: its public
	// URL (default ControlPlane).
	Issuer string
	Client *http.Client
	Log    *slog.Logger
	// AllowHTTP permits a plain-HTTP control plane that is not on
	// loopback, whose keys could be replaced in transit (development only).
	AllowHTTP bool
}

// tokenAudience is the aud of Klique access tokens.
const tokenAudience = "klique"

// NewRemote checks cfg and returns a resolver.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	u, err := url.Parse(strings.TrimRight(cfg.ControlPlane, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--control-plane %q is not an http(s) URL such as https://klique.corp", cfg.ControlPlane)
	}
	base := u.String()
	if h := u.Hostname(); u.Scheme == "http" && !cfg.AllowHTTP && h != "localhost" && !net.ParseIP(h).IsLoopback() {
		return nil, fmt.Errorf("--control-plane %s must use https: the control plane's keys, fetched over plain HTTP, could be forged in transit (--allow-http for development only)", base)
	}
	if cfg.Issuer == "" {
		cfg.Issuer = base
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	v, err := identity.NewOIDCVerifier(identity.OIDCConfig{Issuer: cfg.Issuer, JWKSURL: base + "/.well-known/jwks.json",
		Audience: tokenAudience, AllowHTTP: cfg.AllowHTTP}, cfg.Client)
	if err != nil {
		return nil, fmt.Errorf("the control plane's keys: %w", err)
	}
	return &Remote{base: base, client: cfg.Client, tokens: v, issuer: cfg.Issuer, log: cfg.Log, now: time.Now}, nil
}

// checkToken verifies a Klique access token locally; other credentials
// (API keys, an identity provider's tokens) are left to the control plane.
// It returns the token's expiry (zero when not a Klique token).
func (r *Remote) checkToken(ctx context.Context, cred string) (time.Time, error) {
	if strings.HasPrefix(cred, identity.APIKeyPrefix) || strings.Count(cred, ".") != 2 {
		return time.Time{}, nil
	}
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(cred, claims); err != nil {
		return time.Time{}, unauthenticated("the credential is not a well-formed token")
	}
	if iss, _ := claims["iss"].(string); iss != r.issuer {
		return time.Time{}, nil
	}
	if _, err := r.tokens.Verify(ctx, cred, r.now()); err != nil {
		if isUnauthenticated(err) {
			return time.Time{}, unauthenticated(err.Error())
		}
		r.log.WarnContext(ctx, "router: the control plane's keys are unavailable", "err", err)
		return time.Time{}, unavailable("could not check the access token right now (the control plane's keys are unavailable); try again")
	}
	exp, _ := claims.GetExpirationTime()
	if exp == nil {
		return time.Time{}, nil
	}
	return exp.Time, nil
}

func isUnauthenticated(err error) bool { return errors.Is(err, identity.ErrUnauthenticated) }

const (
	instanceQuery = `query($id: ID!) { appInstance(id: $id) { id name state reason address addressRefused addressNetworks task { attempt spec { command } } } }`
	routeQuery    = `query($r: String!) { routeInstances(route: $r) { id name state reason address addressRefused addressNetworks task { attempt spec { command } } } }`
)

type remoteInstance struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
	Address string `json:"address"`
	// AddressRefused and AddressNetworks are the control plane's verdict
	// on the address (the router's address rule): this router dials only
	// inside the networks, and never a refused address.
	AddressRefused  string   `json:"addressRefused"`
	AddressNetworks []string `json:"addressNetworks"`
	Task            struct {
		Attempt int `json:"attempt"`
		Spec    struct {
			Command []string `json:"command"`
		} `json:"spec"`
	} `json:"task"`
}

func (ri *remoteInstance) instance() *Instance {
	return &Instance{ID: ri.ID, Name: ri.Name, State: ri.State, Reason: ri.Reason, KeepPrefix: namesOwnPath(ri.ID, ri.Task.Spec.Command...),
		Target: appnet.TargetOf("", ri.ID, "", ri.Task.Attempt, ri.Address, strings.Join(ri.AddressNetworks, ","), ri.AddressRefused)}
}

// Instance implements Resolver.
func (r *Remote) Instance(ctx context.Context, cred, id string) (*Instance, error) {
	if _, err := r.checkToken(ctx, cred); err != nil {
		return nil, err
	}
	var out struct {
		AppInstance *remoteInstance `json:"appInstance"`
	}
	if err := r.graphql(ctx, cred, instanceQuery, map[string]any{"id": id}, &out); err != nil {
		return nil, err
	}
	if out.AppInstance == nil {
		return nil, notFound("no app instance '" + id + "'")
	}
	return out.AppInstance.instance(), nil
}

// Route implements Resolver.
func (r *Remote) Route(ctx context.Context, cred, route string) ([]*Instance, error) {
	if _, err := r.checkToken(ctx, cred); err != nil {
		return nil, err
	}
	var out struct {
		RouteInstances []*remoteInstance `json:"routeInstances"`
	}
	if err := r.graphql(ctx, cred, routeQuery, map[string]any{"r": route}, &out); err != nil {
		return nil, err
	}
	ins := make([]*Instance, 0, len(out.RouteInstances))
	for _, ri := range out.RouteInstances {
		ins = append(ins, ri.instance())
	}
	return ins, nil
}

// CookieCredential implements Resolver: a token is kept; anything else is
// exchanged at the control plane (POST /api/v1/auth/token) for one.
func (r *Remote) CookieCredential(ctx context.Context, cred string) (string, time.Time, error) {
	exp, err := r.checkToken(ctx, cred)
	if err != nil {
		return "", time.Time{}, err
	}
	if !exp.IsZero() {
		return cred, exp, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/api/v1/auth/token", nil)
	if err != nil {
		return "", time.Time{}, unavailable("could not reach the control plane; try again")
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	var out struct {
		Token   string    `json:"access_token"`
		Expires time.Time `json:"expires_at"`
	}
	if err := r.do(req, &out); err != nil {
		return "", time.Time{}, err
	}
	return out.Token, out.Expires, nil
}

// graphql runs a query as the credential's holder.
func (r *Remote) graphql(ctx context.Context, cred, query string, vars map[string]any, data any) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return unavailable("could not reach the control plane; try again")
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	var out struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := r.do(req, &out); err != nil {
		return err
	}
	if len(out.Errors) > 0 {
		e := out.Errors[0]
		code, _ := e.Extensions["code"].(string)
		switch code {
		case "NOT_FOUND":
			return notFound(e.Message)
		case "UNAUTHENTICATED":
			return unauthenticated(e.Message)
		case "FORBIDDEN":
			return &Error{Status: http.StatusForbidden, Code: code, Message: e.Message}
		case "BAD_USER_INPUT":
			return &Error{Status: http.StatusBadRequest, Code: code, Message: e.Message}
		}
		r.log.WarnContext(ctx, "router: the control plane refused a lookup", "code", code, "message", e.Message)
		return unavailable("the control plane could not look the instance up right now; try again")
	}
	if err := json.Unmarshal(out.Data, data); err != nil {
		return unavailable("the control plane's answer was not understood; is --control-plane a Klique control plane?")
	}
	return nil
}

// do sends a request to the control plane and reads its JSON answer; a
// 401 is the credential's refusal, with the control plane's message.
func (r *Remote) do(req *http.Request, out any) error {
	resp, err := r.client.Do(req)
	if err != nil {
		r.log.WarnContext(req.Context(), "router: the control plane does not answer", "url", req.URL.String(), "err", err)
		return unavailable("the control plane does not answer; try again")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return unavailable("the control plane's answer broke off; try again")
	}
	if resp.StatusCode == http.StatusUnauthorized {
		// REST answers {"error": {...}}, GraphQL {"errors": [{...}]}.
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
			Errors []struct {
				Message string `json:"message"`
			} `json:"errors"`
		}
		_ = json.Unmarshal(b, &e)
		msg := e.Error.Message
		if msg == "" && len(e.Errors) > 0 {
			msg = e.Errors[0].Message
		}
		if msg == "" {
			msg = "the control plane refused the credential"
		}
		return unauthenticated(msg)
	}
	if resp.StatusCode != http.StatusOK {
		r.log.WarnContext(req.Context(), "router: the control plane answered an error", "url", req.URL.String(), "status", resp.Status)
		return unavailable(fmt.Sprintf("the control plane answered %s; try again", resp.Status))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return unavailable("the control plane's answer was not understood; is --control-plane a Klique control plane?")
	}
	return nil
}
