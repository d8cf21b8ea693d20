// Package vault encrypts secrets at rest. A secret's plaintext exists only
// in memory: it is sealed with AES-256-GCM under the server's vault key
// before it is stored, and bound to where it belongs (tenant, scope, name)
// so that a ciphertext copied to another secret's row does not open.
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of a vault key: AES-256.
const KeySize = 32

// Vault seals and opens secrets with one key.
type Vault struct {
	aead cipher.AEAD
}

// New returns a vault for a 32-byte key.
func New(key []byte) (*Vault, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("vault key is %d bytes; it must be %d (base64 of 32 random bytes)", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("vault key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("vault key: %w", err)
	}
	return &Vault{aead: aead}, nil
}

// ParseKey reads a key given as base64 (standard or URL alphabet).
func ParseKey(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	return nil, errors.New("the vault key must be base64 of 32 random bytes (make one with: head -c 32 /dev/urandom | base64)")
}

// LoadOrCreateKeyFile reads the key in path, or, when there is none, makes a
// new random key and writes it there with mode 0600. It reports whether it
// made one.
func LoadOrCreateKeyFile(path string) ([]byte, bool, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		key, err := ParseKey(string(data))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return key, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("read vault key %s: %w", path, err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, fmt.Errorf("make vault key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("write vault key %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("write vault key %s: %w", path, err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("write vault key %s: %w", path, err)
	}
	return key, true, f.Close()
}

// Seal encrypts plaintext for the place named by context: the ciphertext
// opens only with the same context.
func (v *Vault) Seal(plaintext []byte, context string) ([]byte, error) {
	nonce := make([]byte, v.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	return v.aead.Seal(nonce, nonce, plaintext, []byte(context)), nil
}

// ErrTampered is returned when a ciphertext does not open: the wrong key,
// the wrong place, or changed bytes.
var ErrTampered = errors.New("vault: ciphertext does not open with this key and context")

// Open decrypts a ciphertext made by Seal with the same context.
func (v *Vault) Open(ciphertext []byte, context string) ([]byte, error) {
	n := v.aead.NonceSize()
	if len(ciphertext) < n {
		return nil, ErrTampered
	}
	out, err := v.aead.Open(nil, ciphertext[:n], ciphertext[n:], []byte(context))
	if err != nil {
		return nil, ErrTampered
	}
	return out, nil
}
