package clitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitRepo is a throwaway checkout with a bare remote beside it, for
// 'klique run' to record.
type GitRepo struct {
	t *testing.T
	// Dir is the checkout, Remote the bare repository it pushes to,
	// Commit the commit both are at.
	Dir, Remote string
	Commit      string
}

// NewGitRepo makes the checkout and its remote, with a first commit pushed;
// without git it fails the test under CI=true and skips it otherwise.
func NewGitRepo(t *testing.T) *GitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	base := t.TempDir()
	r := &GitRepo{t: t, Dir: filepath.Join(base, "project"), Remote: filepath.Join(base, "remote.git")}
	for k, v := range map[string]string{"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
		"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": filepath.Join(base, "gitconfig")} {
		t.Setenv(k, v)
	}
	r.Git(base, "init", "-q", "--bare", r.Remote)
	r.Git(base, "clone", "-q", r.Remote, r.Dir)
	r.Write("src/train.py", "import sys\nprint('args', sys.argv[1:])\n")
	r.Write("requirements.txt", "# what train.py needs\nnumpy==2.1.0\n-r other.txt\nrequests>=2  # http\n")
	r.Write(".gitignore", "*.log\n")
	r.Git(r.Dir, "add", ".")
	r.Git(r.Dir, "commit", "-qm", "first")
	r.Git(r.Dir, "push", "-q", "origin", "HEAD:refs/heads/main")
	r.Git(r.Dir, "branch", "-q", "--set-upstream-to", "origin/main")
	r.Commit = strings.TrimSpace(r.Git(r.Dir, "rev-parse", "HEAD"))
	return r
}

// Git runs git in dir and returns its output; a failure fails the test.
func (r *GitRepo) Git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Write writes a file of the checkout.
func (r *GitRepo) Write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.Dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}
