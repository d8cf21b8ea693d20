package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/store"
)

// SettingTokenSigningKey is the store setting that holds the keys access
// tokens are signed with: a key set sealed by the vault key (see
// keyset.go). Keeping it in the store (rather than in each process) means
// every replica signs and verifies with the same keys, and tokens survive
// restarts.
const SettingTokenSigningKey = "token_signing_key"

// tokenLeeway tolerates clock skew between replicas and clients.
const tokenLeeway = 30 * time.Second

// maxCredentialLen bounds what is parsed at all, so a huge header cannot
// make the server decode megabytes of base64 and JSON.
const maxCredentialLen = 8 << 10

// TokenClaims are the claims of a Klique access token.
type TokenClaims struct {
	jwt.RegisteredClaims
	// TenantID is the tenant of the subject; users are looked up within it.
	TenantID string `json:"tid"`
	// ProjectID carries the project scope of the credential the token was
	// issued from, so a token cannot widen a project-scoped key.
	ProjectID string `json:"pid,omitempty"`
	// Via is how the subject signed in to get the token: MethodAPIKey or
	// MethodOIDC. A token is checked again against what it was issued
	// from on every use, so it ends when that ends.
	Via string `json:"via"`
	// KeyID is the id of the API key the token was issued from (Via
	// MethodAPIKey): revoking the key ends the token at once.
	KeyID string `json:"key,omitempty"`
}

// Signer issues and verifies Klique access tokens, signed with Ed25519
// (EdDSA). Ed25519 has a single, deterministic signature scheme with no
// parameters to get wrong, and a key small enough to keep in a setting.
//
// The signer holds the key set of the store: the newest key signs, every
// key whose tokens may not all have expired verifies (see keyset.go).
type Signer struct {
	issuer   string
	audience string
	ttl      time.Duration

	// q and sealer read the key set again; nil for a signer of one fixed
	// key (NewSigner).
	q      store.Queries
	sealer Sealer

	mu        sync.RWMutex
	keys      []*signingKey // oldest first; the last one signs
	loaded    time.Time     // when keys were last read
	attempted time.Time     // when a read was last tried
}

// NewSigner builds a signer of one fixed Ed25519 key from its seed. Most
// callers want LoadOrCreateSigner; this is for tests and tools that hold
// the seed.
func NewSigner(seed []byte, issuer, audience string, ttl time.Duration) (*Signer, error) {
	k, err := newSigningKey(seed, time.Time{})
	if err != nil {
		return nil, err
	}
	return newSigner([]*signingKey{k}, issuer, audience, ttl)
}

func newSigner(keys []*signingKey, issuer, audience string, ttl time.Duration) (*Signer, error) {
	if issuer == "" || audience == "" {
		return nil, errors.New("identity: token issuer and audience must be set")
	}
	if ttl <= 0 {
		return nil, errors.New("identity: token lifetime must be positive")
	}
	return &Signer{issuer: issuer, audience: audience, ttl: ttl, keys: keys}, nil
}

// LoadOrCreateSigner returns the signer for the key set kept in the store
// setting SettingTokenSigningKey, sealed by sealer (the vault), creating
// the set if there is none and sealing a key an older version stored in
// the clear. ttl is the lifetime of issued tokens and the longest lifetime
// a token may have to be accepted.
func LoadOrCreateSigner(ctx context.Context, q store.Queries, sealer Sealer, issuer, audience string, ttl time.Duration) (*Signer, error) {
	now := time.Now()
	keys, err := loadKeySet(ctx, q, sealer, now)
	if err != nil {
		return nil, err
	}
	s, err := newSigner(keys, issuer, audience, ttl)
	if err != nil {
		return nil, err
	}
	s.q, s.sealer, s.loaded = q, sealer, now
	return s, nil
}

// reload reads the key set again when the signer has a store and the last
// attempt is older than gap. A failure keeps the keys the signer has: a
// database hiccup must not stop tokens from verifying.
func (s *Signer) reload(now time.Time, gap time.Duration) {
	if s.q == nil {
		return
	}
	s.mu.Lock()
	if now.Sub(s.attempted) < gap && !now.Before(s.attempted) {
		s.mu.Unlock()
		return
	}
	s.attempted = now
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	value, err := s.q.GetSetting(ctx, SettingTokenSigningKey)
	if err != nil {
		return
	}
	keys, clear, err := openKeySet(s.sealer, value, now)
	if err != nil || clear {
		return
	}
	s.mu.Lock()
	s.keys, s.loaded = keys, now
	s.mu.Unlock()
}

// signingKeys returns the keys that verify at now, oldest first.
func (s *Signer) signingKeys(now time.Time) []*signingKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return liveKeys(s.keys, s.ttl, now)
}

// Issuer is the iss of the tokens the signer issues.
func (s *Signer) Issuer() string { return s.issuer }

// Audience is the aud of the tokens the signer issues.
func (s *Signer) Audience() string { return s.audience }

// KeyID is the kid of the key that signs new tokens.
func (s *Signer) KeyID() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keys[len(s.keys)-1].id
}

// TTL is the lifetime of an issued token, and the longest one accepted.
func (s *Signer) TTL() time.Duration { return s.ttl }

// Issue signs an access token for p, valid from now for the signer's TTL.
// The token names the user, tenant and the credential p signed in with
// only; role and groups are looked up again on every use, and so is the
// API key it was issued from, so changes to them take effect at once.
func (s *Signer) Issue(p *Principal, now time.Time) (token string, expires time.Time, err error) {
	if p == nil || p.UserID == "" || p.TenantID == "" {
		return "", time.Time{}, errors.New("identity: cannot issue a token without a user and tenant")
	}
	var keyID string
	switch p.Method {
	case MethodAPIKey:
		if keyID = p.CredentialID; keyID == "" {
			return "", time.Time{}, errors.New("identity: cannot issue a token for an API key without its id")
		}
	case MethodOIDC:
	default:
		return "", time.Time{}, fmt.Errorf("identity: cannot issue a token for a principal signed in with %q; only API keys and SSO sign-ins are exchanged", p.Method)
	}
	jti, err := randomID()
	if err != nil {
		return "", time.Time{}, err
	}
	s.mu.RLock()
	stale := now.Sub(s.loaded) >= keyReloadInterval
	s.mu.RUnlock()
	if stale {
		s.reload(now, keyReloadInterval)
	}
	s.mu.RLock()
	key := s.keys[len(s.keys)-1]
	s.mu.RUnlock()
	now = now.Truncate(time.Second) // NumericDate has whole seconds.
	expires = now.Add(s.ttl)
	claims := TokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.issuer,
			Subject:   p.UserID,
			Audience:  jwt.ClaimStrings{s.audience},
			ExpiresAt: jwt.NewNumericDate(expires),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        jti,
		},
		TenantID:  p.TenantID,
		ProjectID: p.ProjectID,
		Via:       p.Method,
		KeyID:     keyID,
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"] = key.id
	token, err = t.SignedString(key.priv)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: sign token: %w", err)
	}
	return token, expires, nil
}

// key returns the verifying key named kid at now. The key set is read
// again every keyReloadInterval (a key dropped by a rotation stops
// verifying), and when kid is unknown (another replica may have rotated),
// at most once per keyReloadGap.
func (s *Signer) key(kid string, now time.Time) (*signingKey, bool) {
	s.mu.RLock()
	stale := now.Sub(s.loaded) >= keyReloadInterval
	s.mu.RUnlock()
	if stale {
		s.reload(now, keyReloadInterval)
	}
	for attempt := 0; attempt < 2; attempt++ {
		for _, k := range s.signingKeys(now) {
			if k.id == kid {
				return k, true
			}
		}
		if attempt == 0 {
			s.reload(now, keyReloadGap)
		}
	}
	return nil, false
}

// Verify checks a token issued by this signer at time now and returns its
// claims. Only EdDSA with the kid of a key of the set is accepted, which
// rules out unsigned tokens ("alg": "none") and algorithm confusion (HS256
// keyed with the public key). iss, aud, exp, iat, jti, sub, tid and via
// are required; nbf and iat are honoured with 30 seconds of leeway, and a
// token that was made to live longer than the signer's TTL is refused
// whoever signed it: a leaked key must not mint tokens for 2200. Errors
// wrap ErrUnauthenticated.
func (s *Signer) Verify(token string, now time.Time) (*TokenClaims, error) {
	if len(token) > maxCredentialLen {
		return nil, unauthenticated(reasonTooLong)
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(s.issuer),
		jwt.WithAudience(s.audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(tokenLeeway),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithStrictDecoding(),
	)
	claims := &TokenClaims{}
	_, err := parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		// WithValidMethods has already refused other algorithms; checking
		// the type again costs nothing and keeps the key from ever reaching
		// a method it was not meant for.
		if _, ok := t.Method.(*jwt.SigningMethodEd25519); !ok {
			return nil, unauthenticated(reasonAlgNotAllowed)
		}
		kid, _ := t.Header["kid"].(string)
		k, ok := s.key(kid, now)
		if !ok {
			return nil, unauthenticated(reasonKeyUnknown)
		}
		return k.pub, nil
	})
	if err != nil {
		return nil, tokenError(err, reasonAccessExpired, reasonAccessNotYet)
	}
	if claims.Subject == "" || claims.TenantID == "" || claims.IssuedAt == nil || claims.ID == "" {
		return nil, unauthenticated(reasonClaimMissing)
	}
	if claims.ExpiresAt.Sub(claims.IssuedAt.Time) > s.ttl {
		return nil, unauthenticated(reasonLifetime)
	}
	switch {
	case claims.Via == MethodAPIKey && claims.KeyID != "":
	case claims.Via == MethodOIDC && claims.KeyID == "":
	default:
		return nil, unauthenticated(reasonTokenSource)
	}
	return claims, nil
}

// tokenError turns a jwt parse error into an authentication error with a
// reason a person can act on. Errors raised by a key function (our own
// authErrors, or a failure to fetch keys) pass through as they are.
func tokenError(err error, expired, notYet string) error {
	var ae *authError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fetchError
	if errors.As(err, &fe) {
		return fe
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthenticated(reasonMalformed)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return unauthenticated(reasonSignature)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return unauthenticated(reasonClaimMissing)
	case errors.Is(err, jwt.ErrTokenExpired):
		return unauthenticated(expired)
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return unauthenticated(notYet)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return unauthenticated(reasonIssuer)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return unauthenticated(reasonAudience)
	}
	return unauthenticated(reasonMalformed)
}

// JWKS returns the signer's verifying public keys as a JSON Web Key Set,
// to serve at /.well-known/jwks.json so other services can verify Klique
// tokens.
func (s *Signer) JWKS() []byte {
	type jwk map[string]string
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	keys := s.signingKeys(time.Now())
	for i := len(keys) - 1; i >= 0; i-- { // the signing key first
		set.Keys = append(set.Keys, jwk{
			"kty": "OKP",
			"crv": "Ed25519",
			"x":   base64.RawURLEncoding.EncodeToString(keys[i].pub),
			"kid": keys[i].id,
			"use": "sig",
			"alg": "EdDSA",
		})
	}
	b, err := json.Marshal(set)
	if err != nil {
		panic("identity: marshal JWKS: " + err.Error()) // cannot happen: only strings
	}
	return b
}

// randomID returns 128 random bits in hex, for token ids.
func randomID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("identity: generate token id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// looksLikeJWT reports whether s has the shape of a compact JWS: three
// non-empty base64url segments. Anything else is treated as an API key.
func looksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '=') {
				return false
			}
		}
	}
	return true
}
