package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
)

// minRSABits refuses RSA keys too short to trust. 2048 bits is the floor
// every current guideline sets and every real identity provider meets.
const minRSABits = 2048

// jwk is one key of a JSON Web Key Set, as far as verification needs it.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// verificationKey is a parsed public key with what is needed to decide
// which algorithms may use it.
type verificationKey struct {
	key crypto.PublicKey
	// alg is the key's "alg" parameter; when set, tokens must use exactly it.
	alg string
}

// parseJWKS reads a JSON Web Key Set and returns its usable signature keys by
// kid. Keys that cannot be parsed, have no kid, are meant for encryption
// ("use" other than "sig") or are of a type we do not verify with are
// skipped rather than failing the whole set, because identity providers
// publish keys for other purposes next to their signing keys. A repeated kid
// keeps its first key, so a later entry cannot shadow it.
func parseJWKS(data []byte) (map[string]verificationKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, errors.New("JWKS is not a JSON object with a keys array")
	}
	if set.Keys == nil {
		return nil, errors.New("JWKS has no keys array")
	}
	keys := make(map[string]verificationKey, len(set.Keys))
	for _, raw := range set.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			continue
		}
		if k.Kid == "" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if _, dup := keys[k.Kid]; dup {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			continue
		}
		keys[k.Kid] = verificationKey{key: pub, alg: k.Alg}
	}
	return keys, nil
}

// publicKey parses the key material of k with the standard library only.
func (k *jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		n, err := b64Int(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64Int(k.E)
		if err != nil {
			return nil, err
		}
		if n.BitLen() < minRSABits {
			return nil, errors.New("RSA key too short")
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
			return nil, errors.New("RSA exponent invalid")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		var size int
		switch k.Crv {
		case "P-256":
			curve, size = elliptic.P256(), 32
		case "P-384":
			curve, size = elliptic.P384(), 48
		default:
			return nil, errors.New("unsupported curve")
		}
		x, err := b64(k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64(k.Y)
		if err != nil {
			return nil, err
		}
		if len(x) != size || len(y) != size {
			return nil, errors.New("EC coordinates have the wrong length")
		}
		point := make([]byte, 0, 1+2*size)
		point = append(point, 4)
		point = append(point, x...)
		point = append(point, y...)
		// Refuses points that are not on the curve (invalid-curve attacks).
		return ecdsa.ParseUncompressedPublicKey(curve, point)
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, errors.New("unsupported OKP curve")
		}
		x, err := b64(k.X)
		if err != nil {
			return nil, err
		}
		if len(x) != ed25519.PublicKeySize {
			return nil, errors.New("Ed25519 key has the wrong length")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, errors.New("unsupported key type")
}

// b64 decodes base64url without padding, tolerating padding some providers
// add.
func b64(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty key parameter")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

func b64Int(s string) (*big.Int, error) {
	b, err := b64(s)
	if err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}

// oidcAlgorithms are the signing algorithms accepted from an external issuer:
// asymmetric only. HS* would let anyone who knows a public key forge tokens
// (algorithm confusion), and "none" is no signature at all.
var oidcAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"}

// keyFitsAlg reports whether key is of the family alg signs with (and, for
// ECDSA, on the matching curve). The jwt library would refuse most
// mismatches by itself; checking here makes the rule explicit and gives a
// clear reason.
func keyFitsAlg(key crypto.PublicKey, alg string) bool {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		_, ok := key.(*rsa.PublicKey)
		return ok
	case "ES256", "ES384":
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return false
		}
		if alg == "ES256" {
			return k.Curve == elliptic.P256()
		}
		return k.Curve == elliptic.P384()
	case "EdDSA":
		_, ok := key.(ed25519.PublicKey)
		return ok
	}
	return false
}
