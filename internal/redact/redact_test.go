package redact

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// Values shorter than MinSecretLength are not redacted: they would cut
// ordinary words out of every log.
func TestShortValuesAreIgnored(t *testing.T) {
	r := New("abc", "")
	if !r.Empty() || r.String("abc abc") != "abc abc" {
		t.Fatalf("a 3-byte value was redacted")
	}
	if got := New("abcd").String("x abcd y"); got != "x "+Redacted+" y" {
		t.Fatalf("a 4-byte value: %q", got)
	}
}

// A secret inside a longer base64 blob is found at each byte alignment.
func TestBase64InsideABlob(t *testing.T) {
	s := "s3cr3t-token-value"
	r := New(s)
	for k := 0; k < 3; k++ {
		blob := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 10+k) + s + strings.Repeat("y", 7)))
		got := r.String(blob)
		if !strings.Contains(got, Redacted) {
			t.Errorf("offset %d: %q not redacted", k, blob)
		}
	}
}

// A secret cut over two lines, or over two batches, is redacted on both
// sides; text around it stays.
func TestLines(t *testing.T) {
	s := "s3cr3t-token-value"
	r := New(s)
	lines := []string{"a " + s[:5], s[5:] + " b"}
	tail := r.Lines("", lines)
	if lines[0] != "a "+Redacted || lines[1] != Redacted+" b" {
		t.Fatalf("one batch: %q", lines)
	}
	if tail != s[5:]+" b" {
		t.Fatalf("tail %q", tail)
	}
	first := []string{"c " + s[:8]}
	tail = r.Lines(tail, first)
	second := []string{s[8:] + " d"}
	r.Lines(tail, second)
	if first[0] != "c "+Redacted || second[0] != Redacted+" d" {
		t.Fatalf("two batches: %q %q", first, second)
	}
}

// BenchmarkRedact measures a 200-byte log line against 10 secrets (about
// 30 variants each), with and without a secret in it, and a batch of
// 1,000 such lines through Lines.
func BenchmarkRedact(b *testing.B) {
	var secrets []string
	for i := range 10 {
		secrets = append(secrets, fmt.Sprintf("sk-live-%02d-4f8a9c2e7b1d6e3f", i))
	}
	r := New(secrets...)
	clean := strings.Repeat("epoch 12 step 3400 loss=0.2345 lr=3e-4 ", 5)
	dirty := clean[:100] + base64.StdEncoding.EncodeToString([]byte(secrets[7])) + clean[100:]
	b.Run("clean line", func(b *testing.B) {
		b.SetBytes(int64(len(clean)))
		for b.Loop() {
			_ = r.String(clean)
		}
	})
	b.Run("line with a secret", func(b *testing.B) {
		b.SetBytes(int64(len(dirty)))
		for b.Loop() {
			_ = r.String(dirty)
		}
	})
	b.Run("batch of 1000 lines", func(b *testing.B) {
		lines := make([]string, 1000)
		b.SetBytes(int64(1000 * len(clean)))
		for b.Loop() {
			for i := range lines {
				lines[i] = clean
			}
			r.Lines("", lines)
		}
	})
}

func TestQuotedCutsTheStartAndEndOfASecret(t *testing.T) {
	r := New("bob-secret-1234567890")
	for in, want := range map[string]string{
		"last line: 1234567890 done":       "last line: [redacted] done",
		"last line: token bob-secret-12":   "last line: token [redacted]",
		"whole bob-secret-1234567890 here": "whole [redacted] here",
		"short ones stay: bob-s 67890":     "short ones stay: bob-s 67890",
		"both -1234567890 and bob-secret":  "both [redacted] and [redacted]",
	} {
		if got := r.Quoted(in); got != want {
			t.Errorf("Quoted(%q) = %q, want %q", in, got, want)
		}
	}
}
