package source

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func execIn(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return &execError{err: err, out: string(out)}
	}
	return nil
}

type execError struct {
	err error
	out string
}

func (e *execError) Error() string { return e.err.Error() + ": " + e.out }

const uploaded = `diff --git a/train.py b/train.py
new file mode 100644
--- /dev/null
+++ b/train.py
@@ -0,0 +1,2 @@
+import sys
+print("args", sys.argv[1:])
`

func TestCreateWritesAnUploadedScript(t *testing.T) {
	needGit(t)
	ctx := context.Background()
	dest := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Create(ctx, execIn, "", uploaded, dest, filepath.Join(t.TempDir(), "p.diff")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dest, "train.py"))
	if err != nil || !strings.Contains(string(b), `print("args", sys.argv[1:])`) {
		t.Fatalf("train.py = %q, %v", b, err)
	}
}

func TestCreateRefusesAPathOutsideTheWorkingDirectory(t *testing.T) {
	needGit(t)
	ctx := context.Background()
	root := t.TempDir()
	dest := filepath.Join(root, "work")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	escape := strings.ReplaceAll(uploaded, "train.py", "../escaped.py")
	err := Create(ctx, execIn, "", escape, dest, filepath.Join(t.TempDir(), "p.diff"))
	if err == nil {
		t.Fatal("a diff writing outside the working directory was applied")
	}
	if _, statErr := os.Stat(filepath.Join(root, "escaped.py")); statErr == nil {
		t.Fatal("the file outside the working directory was written")
	}
}

// needGit skips a test where git is not installed, except under CI, where
// it must be.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
}
