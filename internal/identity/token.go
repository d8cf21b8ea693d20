package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/store"
)

// SettingTokenSigningKey is the store setting that holds the base64 seed of
// the Ed25519 key access tokens are signed with. Keeping it in the store
// (rather than in each process) means every replica signs and verifies with
// the same key, and tokens survive restarts.
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
}

// Signer issues and verifies Klique access tokens, signed with Ed25519
// (EdDSA). Ed25519 has a single, deterministic signature scheme with no
// parameters to get wrong, and a key small enough to keep in a setting.
type Signer struct {
	issuer   string
	audience string
	ttl      time.Duration
	priv     ed25519.PrivateKey
	pub      ed25519.PublicKey
	kid      string
}

// NewSigner builds a signer from an Ed25519 seed. Most callers want
// LoadOrCreateSigner; this is for tests and tools that hold the seed.
func NewSigner(seed []byte, issuer, audience string, ttl time.Duration) (*Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("identity: token signing key seed is %d bytes; want %d", len(seed), ed25519.SeedSize)
	}
	if issuer == "" || audience == "" {
		return nil, errors.New("identity: token issuer and audience must be set")
	}
	if ttl <= 0 {
		return nil, errors.New("identity: token lifetime must be positive")
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(pub)
	return &Signer{
		issuer:   issuer,
		audience: audience,
		ttl:      ttl,
		priv:     priv,
		pub:      pub,
		// A short hash of the public key: stable across replicas and
		// restarts, and it changes whenever the key does.
		kid: hex.EncodeToString(sum[:8]),
	}, nil
}

// LoadOrCreateSigner returns the signer for the key kept in the store
// setting SettingTokenSigningKey, creating the key if there is none. Replicas
// starting at the same time race through PutSettingIfAbsent and all end up
// with the key that won. A stored value that is not a valid seed is an
// error, not a reason to make a new key: silently replacing it would split
// replicas and log everyone out.
func LoadOrCreateSigner(ctx context.Context, q store.Queries, issuer, audience string, ttl time.Duration) (*Signer, error) {
	value, err := q.GetSetting(ctx, SettingTokenSigningKey)
	if errors.Is(err, store.ErrNotFound) {
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, fmt.Errorf("identity: generate token signing key: %w", err)
		}
		value, err = q.PutSettingIfAbsent(ctx, SettingTokenSigningKey, base64.StdEncoding.EncodeToString(seed))
		if err != nil {
			return nil, fmt.Errorf("identity: store token signing key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("identity: read token signing key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("identity: setting %q does not hold a base64 Ed25519 seed of %d bytes", SettingTokenSigningKey, ed25519.SeedSize)
	}
	return NewSigner(seed, issuer, audience, ttl)
}

// Issuer is the iss of the tokens the signer issues.
func (s *Signer) Issuer() string { return s.issuer }

// Audience is the aud of the tokens the signer issues.
func (s *Signer) Audience() string { return s.audience }

// KeyID is the kid of the signing key.
func (s *Signer) KeyID() string { return s.kid }

// TTL is the lifetime of an issued token.
func (s *Signer) TTL() time.Duration { return s.ttl }

// Issue signs an access token for p, valid from now for the signer's TTL.
// The token names the user and tenant only; role and groups are looked up
// again on every use, so changes to them take effect at once.
func (s *Signer) Issue(p *Principal, now time.Time) (token string, expires time.Time, err error) {
	if p == nil || p.UserID == "" || p.TenantID == "" {
		return "", time.Time{}, errors.New("identity: cannot issue a token without a user and tenant")
	}
	jti, err := randomID()
	if err != nil {
		return "", time.Time{}, err
	}
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
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"] = s.kid
	token, err = t.SignedString(s.priv)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: sign token: %w", err)
	}
	return token, expires, nil
}

// Verify checks a token issued by this signer at time now and returns its
// claims. Only EdDSA with this signer's key id is accepted, which rules out
// unsigned tokens ("alg": "none") and algorithm confusion (HS256 keyed with
// the public key). iss, aud, exp, sub and tid are required; nbf and iat are
// honoured with 30 seconds of leeway. Errors wrap ErrUnauthenticated.
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
		if kid, _ := t.Header["kid"].(string); kid != s.kid {
			return nil, unauthenticated(reasonKeyUnknown)
		}
		return s.pub, nil
	})
	if err != nil {
		return nil, tokenError(err, reasonAccessExpired, reasonAccessNotYet)
	}
	if claims.Subject == "" || claims.TenantID == "" {
		return nil, unauthenticated(reasonClaimMissing)
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

// JWKS returns the signer's public key as a JSON Web Key Set, to serve at
// /.well-known/jwks.json so other services can verify Klique tokens.
func (s *Signer) JWKS() []byte {
	set := struct {
		Keys []map[string]string `json:"keys"`
	}{Keys: []map[string]string{{
		"kty": "OKP",
		"crv": "Ed25519",
		"x":   base64.RawURLEncoding.EncodeToString(s.pub),
		"kid": s.kid,
		"use": "sig",
		"alg": "EdDSA",
	}}}
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
