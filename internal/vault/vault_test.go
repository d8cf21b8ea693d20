package vault

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSealOpensOnlyWithItsKeyAndPlace(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	v, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := v.Seal([]byte("hf_secret_value"), "t1|project|p1|HF_TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte("hf_secret_value")) {
		t.Fatal("the ciphertext holds the plaintext")
	}
	pt, err := v.Open(ct, "t1|project|p1|HF_TOKEN")
	if err != nil || string(pt) != "hf_secret_value" {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	if _, err := v.Open(ct, "t1|project|p2|HF_TOKEN"); !errors.Is(err, ErrTampered) {
		t.Fatalf("opened in another place: %v", err)
	}
	other, _ := New(bytes.Repeat([]byte{8}, KeySize))
	if _, err := other.Open(ct, "t1|project|p1|HF_TOKEN"); !errors.Is(err, ErrTampered) {
		t.Fatalf("opened with another key: %v", err)
	}
	ct[len(ct)-1] ^= 1
	if _, err := v.Open(ct, "t1|project|p1|HF_TOKEN"); !errors.Is(err, ErrTampered) {
		t.Fatalf("opened a changed ciphertext: %v", err)
	}
	again, _ := v.Seal([]byte("hf_secret_value"), "t1|project|p1|HF_TOKEN")
	if bytes.Equal(again[:12], ct[:12]) {
		t.Fatal("two seals share a nonce")
	}
}

func TestKeys(t *testing.T) {
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a short key was accepted")
	}
	if _, err := ParseKey("not base64!"); err == nil {
		t.Fatal("a bad key text was accepted")
	}
	path := filepath.Join(t.TempDir(), "sub", "vault.key")
	k1, made, err := LoadOrCreateKeyFile(path)
	if err != nil || !made || len(k1) != KeySize {
		t.Fatalf("first load: %d bytes, made %v, %v", len(k1), made, err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", info.Mode(), err)
	}
	k2, made, err := LoadOrCreateKeyFile(path)
	if err != nil || made || !bytes.Equal(k1, k2) {
		t.Fatalf("second load: made %v, same %v, %v", made, bytes.Equal(k1, k2), err)
	}
}
