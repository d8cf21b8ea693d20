package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// APIKeyPrefix starts every generated API key. It lets the authenticator
// tell a key from a token without trying both, and lets secret scanners
// recognise a leaked key.
const APIKeyPrefix = "kq_"

// apiKeyDisplayLen is how much of a secret is kept as APIKey.Prefix: "kq_"
// and seven characters, enough to tell keys apart, far too little to guess
// the remaining 36 base62 characters (over 200 bits).
const apiKeyDisplayLen = 10

// apiKeyBytes is the entropy of a generated key: 256 bits.
const apiKeyBytes = 32

// base62Len is the number of base62 digits needed for apiKeyBytes bytes
// (62^43 > 2^256), so every key has the same length.
const base62Len = 43

// NewAPIKey makes a new API key. secret is shown to the user once and never
// stored; prefix is stored for display; hash (SHA-256 of the whole secret) is
// stored and is how the key is found again. A fast hash is right here, unlike
// for passwords: the secret has 256 random bits, so there is nothing to
// brute-force, and the lookup happens on every request.
func NewAPIKey() (secret, prefix string, hash []byte, err error) {
	buf := make([]byte, apiKeyBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", "", nil, fmt.Errorf("identity: generate API key: %w", err)
	}
	secret = APIKeyPrefix + base62(buf)
	return secret, secret[:apiKeyDisplayLen], HashAPIKey(secret), nil
}

// base62 encodes b as a fixed-length base62 number (digits 0-9, a-z, A-Z),
// left-padded with zeros. Base62 keeps the key free of characters that need
// quoting in shells, URLs or headers, and double-click selects all of it.
func base62(b []byte) string {
	s := new(big.Int).SetBytes(b).Text(62)
	return strings.Repeat("0", base62Len-len(s)) + s
}

// HashAPIKey returns the SHA-256 of the whole secret, the value stored in
// model.APIKey.Hash and passed to store.GetAPIKeyByHash.
func HashAPIKey(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// Limits on a bootstrap key set by an operator.
const (
	minBootstrapKeyLen = 32
	maxBootstrapKeyLen = 512
)

// ValidateBootstrapKey checks a key an operator chose (through an
// environment variable) for the first admin. It must be long enough to be
// unguessable, printable ASCII without spaces (so it survives headers and
// shells unchanged), and must not look like a JWT, which the authenticator
// would try to verify as a token instead. The error says what is wrong but
// never repeats the key.
func ValidateBootstrapKey(s string) error {
	if len(s) < minBootstrapKeyLen {
		return fmt.Errorf("bootstrap API key is %d characters long; it must be at least %d (generate one with: openssl rand -base64 48)", len(s), minBootstrapKeyLen)
	}
	if len(s) > maxBootstrapKeyLen {
		return fmt.Errorf("bootstrap API key is %d characters long; it must be at most %d", len(s), maxBootstrapKeyLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' {
			return errors.New("bootstrap API key contains a space; use printable ASCII characters without spaces")
		}
		if c < 0x21 || c > 0x7e {
			return fmt.Errorf("bootstrap API key contains a non-printable or non-ASCII character at position %d; use printable ASCII characters without spaces", i+1)
		}
	}
	if looksLikeJWT(s) {
		return errors.New("bootstrap API key looks like a JWT (three dot-separated base64url parts); choose a key without that shape")
	}
	return nil
}
