package artifacts_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/klique-ai/klique/internal/artifacts"
)

// exercise runs the behaviour every Blobs implementation shares.
func exercise(t *testing.T, b artifacts.Blobs) {
	ctx := context.Background()
	key := artifacts.Key("tenant1", "task1", "art1")
	read := func(key string) string {
		t.Helper()
		rc, err := b.Open(ctx, key)
		if err != nil {
			t.Fatalf("open %s: %v", key, err)
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}

	t.Run("a blob round-trips and a second put replaces it", func(t *testing.T) {
		if err := b.Put(ctx, key, strings.NewReader("first")); err != nil {
			t.Fatal(err)
		}
		if got := read(key); got != "first" {
			t.Fatalf("read %q", got)
		}
		if err := b.Put(ctx, key, strings.NewReader("second, longer")); err != nil {
			t.Fatal(err)
		}
		if got := read(key); got != "second, longer" {
			t.Fatalf("read %q", got)
		}
	})

	t.Run("a reader that fails part way leaves nothing under a new key and the old bytes under an old one", func(t *testing.T) {
		fresh := artifacts.Key("tenant1", "task1", "art2")
		failing := io.MultiReader(strings.NewReader("partial"), errReader{})
		if err := b.Put(ctx, fresh, failing); err == nil {
			t.Fatal("a failing reader is an error")
		}
		if _, err := b.Open(ctx, fresh); !errors.Is(err, artifacts.ErrNotFound) {
			t.Fatalf("open after a failed put: %v, want ErrNotFound", err)
		}
		if err := b.Put(ctx, key, io.MultiReader(strings.NewReader("x"), errReader{})); err == nil {
			t.Fatal("a failing reader is an error")
		}
		if got := read(key); got != "second, longer" {
			t.Fatalf("a failed replacement changed the blob: %q", got)
		}
	})

	t.Run("delete removes, and deleting nothing is fine", func(t *testing.T) {
		if err := b.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Open(ctx, key); !errors.Is(err, artifacts.ErrNotFound) {
			t.Fatalf("open after delete: %v", err)
		}
		if err := b.Delete(ctx, key); err != nil {
			t.Fatalf("delete of nothing: %v", err)
		}
	})

	t.Run("keys that would leave the store are refused", func(t *testing.T) {
		for _, bad := range []string{"", "../x", "a/../../b", "/abs", "a//b", "a b", `a\b`} {
			if err := b.Put(ctx, bad, strings.NewReader("x")); err == nil {
				t.Errorf("key %q accepted", bad)
			}
			if _, err := b.Open(ctx, bad); err == nil || errors.Is(err, artifacts.ErrNotFound) {
				t.Errorf("open of key %q: %v, want a refusal", bad, err)
			}
		}
	})

	t.Run("a large blob streams through", func(t *testing.T) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		k := artifacts.Key("tenant1", "task2", "big")
		if err := b.Put(ctx, k, bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
		if got := read(k); got != string(big) {
			t.Fatalf("read %d bytes, want %d", len(got), len(big))
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the publisher went away") }

func TestLocal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "artifacts")
	b, err := artifacts.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, b)
	t.Run("no temporary files are left behind", func(t *testing.T) {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".put-") {
				t.Errorf("left behind: %s", path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestS3 runs the same behaviour against gofakes3, an in-memory S3 server
// on loopback, through the real AWS SDK client.
func TestS3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("runs"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test-access-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret-key")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	bucket, prefix, err := artifacts.ParseBucketURL("s3://runs/klique/artifacts/")
	if err != nil || bucket != "runs" || prefix != "klique/artifacts" {
		t.Fatalf("parse: %q %q %v", bucket, prefix, err)
	}
	b, err := artifacts.NewS3(context.Background(), artifacts.S3Config{Bucket: bucket, Prefix: prefix, Endpoint: srv.URL, Region: "eu-west-1", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Describe(); strings.Contains(d, "test-secret-key") || strings.Contains(d, "test-access-key") {
		t.Fatalf("Describe shows a credential: %s", d)
	}
	exercise(t, b)
	t.Run("objects live under the prefix", func(t *testing.T) {
		if err := b.Put(context.Background(), "t/k/a", strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := backend.HeadObject("runs", "klique/artifacts/t/k/a"); err != nil {
			t.Fatalf("object not under the prefix: %v", err)
		}
	})
}

func TestParseBucketURL(t *testing.T) {
	for _, bad := range []string{"", "bucket", "http://b/p", "s3://", "s3://b/p?x=1"} {
		if _, _, err := artifacts.ParseBucketURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
