package identity

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
)

func TestNewAPIKey(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		secret, prefix, hash, err := NewAPIKey()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, "kq_") || len(secret) != 3+43 {
			t.Fatalf("secret has wrong shape (len %d)", len(secret))
		}
		for _, c := range secret[3:] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				t.Fatalf("secret has non-base62 character %q", c)
			}
		}
		if prefix != secret[:10] {
			t.Fatalf("prefix %q is not the first 10 characters", prefix)
		}
		want := sha256.Sum256([]byte(secret))
		if !bytes.Equal(hash, want[:]) || !bytes.Equal(HashAPIKey(secret), want[:]) {
			t.Fatal("hash is not SHA-256 of the secret")
		}
		if seen[secret] {
			t.Fatal("duplicate secret")
		}
		seen[secret] = true
		if looksLikeJWT(secret) {
			t.Fatal("API key looks like a JWT")
		}
	}
}

func TestValidateBootstrapKey(t *testing.T) {
	good := "kq_0123456789abcdefghijklmnopqrstuvwxyz"
	for _, tc := range []struct {
		name, key string
		wantErr   string
	}{
		{"generated style", good, ""},
		{"punctuation ok", "Aa1!@#$%^&*()_+-=[]{};:'\",<>/?`~0123456789", ""},
		{"empty", "", "at least 32"},
		{"short", "kq_short", "at least 32"},
		{"31 chars", strings.Repeat("a", 31), "at least 32"},
		{"space", "kq_0123456789abcdef ghijklmnopqrstuvwxyz", "space"},
		{"tab", "kq_0123456789abcdef\tghijklmnopqrstuvwxyz", "non-printable"},
		{"newline", good + "\n", "non-printable"},
		{"non-ascii", "kq_0123456789abcdefé ghijklmnopqrstuvwxyz", "space"},
		{"non-ascii only", "kq_0123456789abcdeféghijklmnopqrstuvwxyz", "non-ASCII"},
		{"jwt shaped", "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl", "JWT"},
		{"too long", strings.Repeat("a", 513), "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateBootstrapKey(tc.key)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
			if len(tc.key) >= 8 && strings.Contains(err.Error(), tc.key) {
				t.Fatal("error repeats the key")
			}
		})
	}
}
