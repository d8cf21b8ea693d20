package artifacts_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/artifacts"
)

// FuzzLocalKey puts a blob under a fuzzed key in the local store. A key
// the store takes reads back what was put and is removed by Delete; any
// key, taken or refused, leaves nothing outside the store's directory.
//
//	go test -run '^$' -fuzz '^FuzzLocalKey$' -fuzztime 30s ./internal/artifacts
func FuzzLocalKey(f *testing.F) {
	for _, k := range []string{"t1/task-2/art_3", "a/../../b", "../x", "a//b", "/abs", "a/./b", ".hidden/x", "a/b/", "é", strings.Repeat("k/", 300)} {
		f.Add(k)
	}
	parent := f.TempDir()
	root := filepath.Join(parent, "store")
	l, err := artifacts.NewLocal(root)
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, key string) {
		data := []byte("blob of " + key)
		if err := l.Put(ctx, key, bytes.NewReader(data)); err == nil {
			r, err := l.Open(ctx, key)
			if err != nil {
				t.Fatalf("put %q, then open: %v", key, err)
			}
			got, _ := io.ReadAll(r)
			r.Close()
			if !bytes.Equal(got, data) {
				t.Fatalf("put %q, read back %q", key, got)
			}
			if err := l.Delete(ctx, key); err != nil {
				t.Fatalf("delete %q: %v", key, err)
			}
			if _, err := l.Open(ctx, key); err != artifacts.ErrNotFound {
				t.Fatalf("deleted %q, then open: %v", key, err)
			}
		}
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "store" {
			t.Fatalf("key %q left something beside the store: %v", key, entries)
		}
	})
}
