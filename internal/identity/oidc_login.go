package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sign-in through the identity provider's own page (the OAuth 2.0
// authorization code flow with PKCE, RFC 7636), for the dashboard: the
// browser sends the person to the provider, comes back with a code, and the
// control plane exchanges the code for an identity token, which it verifies
// like any other. The dashboard is a public client (no secret), registered
// at the provider under the audience as its client id.

// discoveryTTL is how long the provider's discovery document is kept.
const discoveryTTL = time.Hour

// maxProviderBytes bounds what is read from the provider's discovery and
// token endpoints.
const maxProviderBytes = 1 << 20

// OIDCEndpoints are where the provider signs people in and hands out
// tokens, from its discovery document.
type OIDCEndpoints struct {
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
}

type discovery struct {
	mu  sync.Mutex
	at  time.Time
	eps *OIDCEndpoints
}

// Endpoints reads the provider's discovery document
// (<issuer>/.well-known/openid-configuration), kept for an hour.
func (v *OIDCVerifier) Endpoints(ctx context.Context) (*OIDCEndpoints, error) {
	v.discovery.mu.Lock()
	defer v.discovery.mu.Unlock()
	if v.discovery.eps != nil && time.Since(v.discovery.at) < discoveryTTL {
		return v.discovery.eps, nil
	}
	where := strings.TrimSuffix(v.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	if err := v.providerURL(where); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return nil, fmt.Errorf("identity: discovery request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	var eps OIDCEndpoints
	if err := v.doJSON(req, &eps); err != nil {
		return nil, fmt.Errorf("identity: read the identity provider's discovery document %s: %w", where, err)
	}
	for name, u := range map[string]string{"authorization_endpoint": eps.Authorization, "token_endpoint": eps.Token} {
		if u == "" {
			return nil, fmt.Errorf("identity: the discovery document %s has no %s", where, name)
		}
		if err := v.providerURL(u); err != nil {
			return nil, fmt.Errorf("identity: %s in %s: %w", name, where, err)
		}
	}
	v.discovery.eps, v.discovery.at = &eps, time.Now()
	return &eps, nil
}

// ExchangeCode trades an authorization code and its PKCE verifier for the
// identity token the provider issues with it. A code the provider refuses
// (used, expired, another verifier) is ErrUnauthenticated.
func (v *OIDCVerifier) ExchangeCode(ctx context.Context, code, verifier, redirectURI string) (string, error) {
	eps, err := v.Endpoints(ctx)
	if err != nil {
		return "", err
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"code_verifier": {verifier},
		"redirect_uri":  {redirectURI},
		"client_id":     {v.cfg.Audience},
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, eps.Token, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("identity: token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	var out struct {
		IDToken     string `json:"id_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	err = v.doJSON(req, &out)
	var refused *providerRefusal
	switch {
	case errors.As(err, &refused):
		// RFC 6749 §5.2: the provider says why in error and
		// error_description.
		_ = json.Unmarshal(refused.body, &out)
		why := out.Error
		if out.Description != "" {
			why += ": " + out.Description
		}
		if why == "" {
			why = refused.status
		}
		return "", fmt.Errorf("%w: the identity provider refused the sign-in code (%s); sign in again", ErrUnauthenticated, why)
	case err != nil:
		return "", fmt.Errorf("identity: exchange the sign-in code at %s: %w", eps.Token, err)
	case out.IDToken == "":
		return "", fmt.Errorf("identity: the identity provider answered the sign-in code without an id_token (is the openid scope allowed for client %q?)", v.cfg.Audience)
	}
	return out.IDToken, nil
}

// providerRefusal is a 4xx answer of the provider, with its body.
type providerRefusal struct {
	status string
	body   []byte
}

func (r *providerRefusal) Error() string { return "the identity provider answered " + r.status }

// doJSON sends req and decodes a 200 answer into out.
func (v *OIDCVerifier) doJSON(req *http.Request, out any) error {
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return &providerRefusal{status: resp.Status, body: body}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", req.Method, req.URL.Redacted(), resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: not JSON: %w", req.Method, req.URL.Redacted(), err)
	}
	return nil
}

// providerURL checks that u is an https URL (or http to a loopback host, or
// with AllowHTTP): sign-in codes and tokens must not cross the network in
// the clear.
func (v *OIDCVerifier) providerURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || (p.Scheme != "https" && p.Scheme != "http") {
		return fmt.Errorf("identity: %q is not an http(s) URL", u)
	}
	if p.Scheme == "http" && !v.cfg.AllowHTTP && !isLoopback(p.Hostname()) {
		return fmt.Errorf("identity: %q must use https", u)
	}
	return nil
}
