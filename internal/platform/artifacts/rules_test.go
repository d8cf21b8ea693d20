package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/klique-ai/klique/internal/platform/kernel"
)

// The pure rules of publishing: a pointer's URL, a publisher's SHA-256, a
// content type, and the counter that bounds an upload.

func TestCheckPointerURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"s3://bucket/runs/1/model.pt":   true,
		"gs://bucket/key":               true,
		"https://example.com/out.tar":   true,
		"/data/outputs/run-1/model.pt":  true,
		"urn:x-klique:thing":            true,
		"":                              false,
		"relative/path":                 false,
		"s3://bucket/a key":             false,
		"/data/a\tb":                    false,
		"s3:":                           false,
		"/" + strings.Repeat("a", 2048): false,
	} {
		err := checkPointerURL(raw)
		if ok && err != nil {
			t.Errorf("%q refused: %v", raw, err)
		}
		if !ok && (kernel.ErrorCode(err) != kernel.CodeInvalid || !strings.Contains(err.Error(), "give a URL (s3://bucket/key, https://…) or an absolute path")) {
			t.Errorf("%.40q taken: %v", raw, err)
		}
	}
}

func TestNormalHash(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	lower := hex.EncodeToString(sum[:])
	for in, want := range map[string]string{"": "", "  ": "", lower: lower, strings.ToUpper(lower): lower, " " + lower + " ": lower} {
		if got, err := normalHash(in); err != nil || got != want {
			t.Errorf("normalHash(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{lower[:63], lower + "0", "z" + lower[1:], "sha256:" + lower} {
		if _, err := normalHash(bad); kernel.ErrorCode(err) != kernel.CodeInvalid || !strings.Contains(err.Error(), "not 64 hexadecimal digits") {
			t.Errorf("normalHash(%q): %v", bad, err)
		}
	}
}

func TestContentType(t *testing.T) {
	for in, want := range map[string]string{"": "application/octet-stream", "text/plain; charset=utf-8": "text/plain; charset=utf-8", "application/json": "application/json"} {
		if got, err := contentType(in); err != nil || got != want {
			t.Errorf("contentType(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"not a type", "text/", "a/" + strings.Repeat("b", 255)} {
		if _, err := contentType(bad); kernel.ErrorCode(err) != kernel.CodeInvalid {
			t.Errorf("contentType(%.30q) taken: %v", bad, err)
		}
	}
}

// The counter hashes what passes and fails once past its bound, so that an
// upload that lied about its size is cut off rather than stored.
func TestCounterBoundsAnUpload(t *testing.T) {
	c := &counter{r: bytes.NewReader([]byte("hello")), h: sha256.New(), max: 5}
	got, err := io.ReadAll(c)
	sum := sha256.Sum256([]byte("hello"))
	if err != nil || string(got) != "hello" || c.n != 5 || c.over || hex.EncodeToString(c.h.Sum(nil)) != hex.EncodeToString(sum[:]) {
		t.Errorf("at the bound: %q, %v, n %d, over %v", got, err, c.n, c.over)
	}
	c = &counter{r: bytes.NewReader([]byte("hello!")), h: sha256.New(), max: 5}
	if _, err := io.ReadAll(iotest.OneByteReader(c)); err == nil || !c.over {
		t.Errorf("past the bound: %v, over %v", err, c.over)
	}
	cut := errors.New("connection reset")
	c = &counter{r: io.MultiReader(strings.NewReader("he"), iotest.ErrReader(cut)), h: sha256.New(), max: 5}
	if _, err := io.ReadAll(c); !errors.Is(err, cut) || !errors.Is(c.readErr, cut) || c.over {
		t.Errorf("a cut upload: %v, readErr %v", err, c.readErr)
	}
}

// A limit of 0 is the default; the stored limit is what the server gives.
func TestStorageLimit(t *testing.T) {
	s := New(nil, Options{})
	if s.ArtifactMaxBytes() != DefaultMaxBytes {
		t.Errorf("default limit %d", s.ArtifactMaxBytes())
	}
	s = New(nil, Options{MaxBytes: 10})
	if s.ArtifactMaxBytes() != 10 {
		t.Errorf("set limit %d", s.ArtifactMaxBytes())
	}
	s = New(nil, Options{MaxBytes: -1})
	if s.ArtifactMaxBytes() != DefaultMaxBytes {
		t.Errorf("a negative limit: %d", s.ArtifactMaxBytes())
	}
	err := s.tooLarge("model.pt", 11)
	var tl *TooLargeError
	if !errors.As(err, &tl) || kernel.ErrorCode(err) != kernel.CodeInvalid || !strings.Contains(err.Error(), "is 11 bytes, more than the") ||
		!strings.Contains(err.Error(), "publish it as a pointer instead; nothing was kept") {
		t.Errorf("tooLarge: %v", err)
	}
}
