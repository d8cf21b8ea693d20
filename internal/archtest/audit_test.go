package archtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneAuditWriter checks that the audit trail has one writer: outside
// the store itself, only the kernel's Txn.Record path (kernel/txn.go)
// inserts audit entries. The engine's decisions, the worker protocol and
// SSO sign-in all write through it.
func TestOneAuditWriter(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	writers := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || under(filepath.ToSlash(rel), "internal/store") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), ".InsertAudit(") || strings.Contains(string(b), ".InsertAudits(") {
			writers[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !writers["internal/platform/kernel/txn.go"] {
		t.Error("the kernel's Write no longer inserts audit entries: is this test looking at the right file?")
	}
	for f := range writers {
		if f != "internal/platform/kernel/txn.go" {
			t.Errorf("%s inserts audit entries itself: record them with kernel.Txn.Record", f)
		}
	}
}
