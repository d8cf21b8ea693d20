package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// OIDC defaults and limits.
const (
	DefaultGroupsClaim   = "groups"
	DefaultUsernameClaim = "preferred_username"
	DefaultSSOTenant     = "default"

	// jwksTimeout bounds one fetch of the identity provider's keys.
	jwksTimeout = 10 * time.Second
	// jwksRefetchInterval is the least time between two fetches. A token with
	// an unknown kid triggers a fetch (the provider may have rotated its
	// keys), but a flood of made-up kids must not turn into a flood of
	// requests to the provider.
	jwksRefetchInterval = 30 * time.Second
	// maxJWKSBytes bounds the key set read from the provider.
	maxJWKSBytes = 1 << 20
)

// OIDCConfig configures sign-in with identity tokens from an external OIDC
// issuer, so people can use Klique without Klique storing passwords.
type OIDCConfig struct {
	// Issuer is the exact iss of the provider's tokens.
	Issuer string
	// JWKSURL is where the provider publishes its signing keys. It must be
	// https unless AllowHTTP is set or the host is a loopback address: keys
	// fetched over plain HTTP could be replaced by anyone on the path.
	JWKSURL string
	// Audience must be one of the token's aud values (the client id Klique
	// is registered under).
	Audience string
	// GroupsClaim names the claim that lists the user's groups
	// (default "groups").
	GroupsClaim string
	// UsernameClaim names the claim a new user's name is taken from
	// (default "preferred_username"; then "email", then "sub").
	UsernameClaim string
	// Tenant is the name of the tenant SSO users belong to (default
	// "default").
	Tenant string
	// AllowHTTP permits a plain-HTTP JWKSURL, for development setups only.
	AllowHTTP bool
}

// OIDCIdentity is what a verified identity token says about a person.
type OIDCIdentity struct {
	Issuer      string
	Subject     string
	Username    string
	Email       string
	DisplayName string
	Groups      []string
	// TokenID is the token's jti, "" when it has none.
	TokenID string
}

// ExternalID is the user's model.User.ExternalID: issuer and subject, since
// a subject is unique only within its issuer.
func (id *OIDCIdentity) ExternalID() string { return id.Issuer + "|" + id.Subject }

// OIDCVerifier verifies identity tokens of one external issuer against the
// issuer's published keys, which it caches by kid.
type OIDCVerifier struct {
	cfg    OIDCConfig
	client *http.Client

	mu   sync.RWMutex
	keys map[string]verificationKey

	// fetchMu serialises fetches, so concurrent requests with an unknown
	// kid cause one fetch, not one each. lastFetch is guarded by it.
	fetchMu   sync.Mutex
	lastFetch time.Time
	fetched   bool

	// discovery keeps the provider's endpoints, for the dashboard's
	// sign-in (oidc_login.go).
	discovery discovery
}

// NewOIDCVerifier checks cfg, fills in defaults, and returns a verifier. The
// keys are fetched on first use, so the control plane starts even while the
// provider is down. client may be nil for a default client with a 10 second
// timeout.
func NewOIDCVerifier(cfg OIDCConfig, client *http.Client) (*OIDCVerifier, error) {
	if cfg.Issuer == "" || cfg.JWKSURL == "" || cfg.Audience == "" {
		return nil, errors.New("identity: OIDC needs an issuer, a JWKS URL and an audience")
	}
	u, err := url.Parse(cfg.JWKSURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("identity: OIDC JWKS URL %q is not an http(s) URL", cfg.JWKSURL)
	}
	if u.Scheme == "http" && !cfg.AllowHTTP && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("identity: OIDC JWKS URL %q must use https (keys fetched over plain HTTP can be forged in transit)", cfg.JWKSURL)
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = DefaultUsernameClaim
	}
	if cfg.Tenant == "" {
		cfg.Tenant = DefaultSSOTenant
	}
	if client == nil {
		client = &http.Client{Timeout: jwksTimeout}
	}
	return &OIDCVerifier{cfg: cfg, client: client, keys: map[string]verificationKey{}}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Config returns the verifier's configuration with defaults filled in.
func (v *OIDCVerifier) Config() OIDCConfig { return v.cfg }

// Issuer is the configured issuer.
func (v *OIDCVerifier) Issuer() string { return v.cfg.Issuer }

// fetchError is a failure to get the provider's keys. It does not wrap
// ErrUnauthenticated: the token may be fine, the provider is unreachable.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return "identity provider keys unavailable: " + e.err.Error() }

func (e *fetchError) Unwrap() error { return e.err }

// Verify checks an identity token at time now: an allowed asymmetric
// algorithm, a key of the provider whose type fits the algorithm, the
// configured issuer and audience, exp present, nbf and iat honoured with 30
// seconds of leeway, and a subject. Authentication failures wrap
// ErrUnauthenticated; a provider that cannot be reached is reported as a
// plain error.
func (v *OIDCVerifier) Verify(ctx context.Context, token string, now time.Time) (*OIDCIdentity, error) {
	if len(token) > maxCredentialLen {
		return nil, unauthenticated(reasonTooLong)
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods(oidcAlgorithms),
		jwt.WithIssuer(v.cfg.Issuer),
		jwt.WithAudience(v.cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(tokenLeeway),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	claims := jwt.MapClaims{}
	_, err := parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		if !slices.Contains(oidcAlgorithms, alg) {
			return nil, unauthenticated(reasonAlgNotAllowed)
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, unauthenticated(reasonKeyUnknown)
		}
		k, err := v.key(ctx, kid, now)
		if err != nil {
			return nil, err
		}
		if (k.alg != "" && k.alg != alg) || !keyFitsAlg(k.key, alg) {
			return nil, unauthenticated(reasonAlgKeyMismatch)
		}
		return k.key, nil
	})
	if err != nil {
		return nil, tokenError(err, reasonIdentityExpired, reasonIdentityNotYet)
	}
	id := &OIDCIdentity{Issuer: v.cfg.Issuer}
	id.Subject, _ = claims["sub"].(string)
	if id.Subject == "" {
		return nil, unauthenticated(reasonClaimMissing)
	}
	id.Email, _ = claims["email"].(string)
	id.DisplayName, _ = claims["name"].(string)
	id.TokenID, _ = claims["jti"].(string)
	id.Username, _ = claims[v.cfg.UsernameClaim].(string)
	if id.Username == "" {
		id.Username = id.Email
	}
	if id.Username == "" {
		id.Username = id.Subject
	}
	id.Groups = stringList(claims[v.cfg.GroupsClaim])
	return id, nil
}

// stringList reads a claim that is a JSON array of strings or a single
// string. Other values (and non-string items) are ignored: a malformed
// groups claim grants nothing.
func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return nil
		}
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, item := range x {
			if s, ok := item.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// key returns the key for kid, fetching the provider's key set when the kid
// is unknown and no fetch happened in the last 30 seconds.
func (v *OIDCVerifier) key(ctx context.Context, kid string, now time.Time) (verificationKey, error) {
	v.mu.RLock()
	k, ok := v.keys[kid]
	v.mu.RUnlock()
	if ok {
		return k, nil
	}

	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	// Another request may have fetched while this one waited.
	v.mu.RLock()
	k, ok = v.keys[kid]
	v.mu.RUnlock()
	if ok {
		return k, nil
	}
	if v.fetched && now.Sub(v.lastFetch) < jwksRefetchInterval && now.Sub(v.lastFetch) >= -jwksRefetchInterval {
		return verificationKey{}, unauthenticated(reasonKeyUnknown)
	}
	// The attempt counts even if it fails, so a provider that is down is
	// not retried on every request either.
	v.fetched, v.lastFetch = true, now
	keys, err := v.fetch(ctx)
	if err != nil {
		return verificationKey{}, &fetchError{err: err}
	}
	v.mu.Lock()
	v.keys = keys
	v.mu.Unlock()
	if k, ok = keys[kid]; ok {
		return k, nil
	}
	return verificationKey{}, unauthenticated(reasonKeyUnknown)
}

// fetch downloads and parses the key set. It does not stop when the request
// that caused it is cancelled (other requests wait on the result), but is
// bounded by jwksTimeout.
func (v *OIDCVerifier) fetch(ctx context.Context) (map[string]verificationKey, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", v.cfg.JWKSURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("GET %s: key set larger than %d bytes", v.cfg.JWKSURL, maxJWKSBytes)
	}
	return parseJWKS(body)
}
