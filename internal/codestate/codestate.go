// Package codestate records the code a run is started from, so that a
// worker reproduces it exactly ('klique run', docs/experiments.md).
package codestate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/klique-ai/klique/internal/model"
)

// What 'klique run' records of the code it is run from, so that a worker
// reproduces it exactly: in a git checkout, the remote a worker can clone,
// the commit, the uncommitted changes of tracked files as a diff, the
// working directory relative to the repository's root; outside one, the
// script named on the command line, uploaded as a diff that creates it.
// The Python packages come from --package, requirements.txt,
// pyproject.toml or the active environment, in that order.

// Options are the choices 'klique run' leaves to its user.
type Options struct {
	// Untracked: "" refuses a checkout with untracked files, "include"
	// adds them to the diff, "ignore" leaves them out.
	Untracked string
	// Push pushes a commit the remote does not have; DiffOnly instead
	// records the newest commit the remote has and sends everything since
	// as the diff.
	Push, DiffOnly bool
	// Packages, when set, are the packages; NoPackages records none.
	Packages   []string
	NoPackages bool
	// DryRun changes nothing, not even the remote.
	DryRun bool
	// SDK is the requirement that installs the Python SDK from the control
	// plane ("klique @ SERVER/sdk/python/klique-V-py3-none-any.whl"): a
	// package found that installs it from a path of this machine (pip
	// freeze's "klique @ file:///…" for 'pip install ./sdk/python'), which
	// a worker on another host cannot read, is recorded as this instead.
	SDK string
}

// State is the code state of a run.
type State struct {
	Repository, Commit, Diff, WorkingDir string
	// Remote names the git remote Repository is the URL of.
	Remote string
	// Changed counts the files the diff touches; Untracked lists those it
	// adds that git does not track.
	Changed   int
	Untracked []string
	// Uploaded is the script sent from outside a checkout.
	Uploaded string
	Packages []string
	// PackagesFrom says where the packages were read.
	PackagesFrom string
}

// git runs git in dir and returns its standard output, trimmed; its error
// carries what git printed on standard error.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}, env...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

// Capture records the code state of dir for a run of args.
func Capture(ctx context.Context, dir string, args []string, o Options) (*State, error) {
	var c *State
	root, err := git(ctx, dir, nil, "rev-parse", "--show-toplevel")
	switch {
	case err == nil:
		if c, err = captureCheckout(ctx, dir, root, o); err != nil {
			return nil, err
		}
	case strings.Contains(err.Error(), "not a git repository"), errors.Is(err, exec.ErrNotFound):
		if c, err = captureScript(dir, args); err != nil {
			return nil, err
		}
		root = dir
	default:
		return nil, err
	}
	if len(c.Diff) > model.MaxDiffBytes {
		return nil, fmt.Errorf("the changes to send are %d KiB as a diff, more than the %d KiB a task may carry: commit and push them (a task records code, not data), or move data files out of the checkout",
			len(c.Diff)>>10, model.MaxDiffBytes>>10)
	}
	if err := c.findPackages(ctx, filepath.Join(root, filepath.FromSlash(c.WorkingDir)), root, args, o); err != nil {
		return nil, err
	}
	if o.SDK != "" && len(o.Packages) == 0 {
		c.Packages = localSDK(c.Packages, o.SDK)
	}
	return c, nil
}

// captureCheckout records a git checkout whose top is root.
func captureCheckout(ctx context.Context, dir, root string, o Options) (*State, error) {
	c := &State{}
	if rel, err := relativeDir(root, dir); err != nil {
		return nil, err
	} else if rel != "." {
		c.WorkingDir = rel
	}
	head, err := git(ctx, root, nil, "rev-parse", "--verify", "--quiet", "HEAD")
	if err != nil || head == "" {
		return nil, fmt.Errorf("this checkout (%s) has no commit yet: commit once (git commit), push it, and run again", root)
	}
	branch, _ := git(ctx, root, nil, "symbolic-ref", "--short", "-q", "HEAD")
	if c.Remote, err = remoteOf(ctx, root, branch); err != nil {
		return nil, err
	}
	remoteURL, err := git(ctx, root, nil, "remote", "get-url", c.Remote)
	if err != nil {
		return nil, err
	}
	c.Repository = CloneURL(root, remoteURL)

	base := head
	onRemote, err := git(ctx, root, nil, "for-each-ref", "--contains", head, "--format=%(refname)", "refs/remotes/"+c.Remote+"/")
	if err != nil {
		return nil, err
	}
	if onRemote == "" {
		short := head[:min(len(head), 7)]
		switch {
		case o.Push && branch == "":
			return nil, fmt.Errorf("commit %s is not on remote %s, and with no branch checked out there is nothing to push: check out a branch, or pass --diff-only", short, c.Remote)
		case o.Push && !o.DryRun:
			// To the branch's upstream when it has one, else to a branch
			// of the same name.
			target := "refs/heads/" + branch
			if m, _ := git(ctx, root, nil, "config", "branch."+branch+".merge"); m != "" {
				target = m
			}
			if _, err := git(ctx, root, nil, "push", "--quiet", c.Remote, "HEAD:"+target); err != nil {
				return nil, fmt.Errorf("push %s to %s: %w", branch, c.Remote, err)
			}
		case o.Push:
			// A dry run pushes nothing; it records the commit a push
			// would send.
		case o.DiffOnly:
			if base, err = remoteBase(ctx, root, c.Remote); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("commit %s is not on remote %s (%s), so a worker could not check it out: push it (git push, or pass --push), or pass --diff-only to send your changes since the newest commit %s has as a diff",
				short, c.Remote, c.Repository, c.Remote)
		}
	}
	c.Commit = base

	untracked, err := git(ctx, root, nil, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return nil, err
	}
	var extra []string
	if untracked != "" {
		extra = strings.Split(strings.TrimRight(untracked, "\x00"), "\x00")
	}
	var env []string
	switch {
	case len(extra) > 0 && o.Untracked == "include":
		// A copy of the index with the untracked files marked as intended
		// to add: git diff then shows them as new files, and the user's
		// own index is left as it was.
		index, err := git(ctx, root, nil, "rev-parse", "--path-format=absolute", "--git-path", "index")
		if err != nil {
			return nil, err
		}
		tmp := filepath.Join(os.TempDir(), fmt.Sprintf("klique-run-index-%d", os.Getpid()))
		defer os.Remove(tmp)
		if b, err := os.ReadFile(index); err == nil {
			if err := os.WriteFile(tmp, b, 0o600); err != nil {
				return nil, fmt.Errorf("copy the git index: %w", err)
			}
		}
		env = []string{"GIT_INDEX_FILE=" + tmp}
		if _, err := git(ctx, root, env, append([]string{"add", "--intent-to-add", "--"}, extra...)...); err != nil {
			return nil, err
		}
		c.Untracked = extra
	case len(extra) > 0 && o.Untracked != "ignore":
		shown := extra
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(extra)-10))
		}
		return nil, fmt.Errorf("files git does not track would be missing on the worker: %s; add them (git add), ignore them (.gitignore), or pass --include-untracked to send them or --ignore-untracked to leave them out",
			strings.Join(shown, ", "))
	}
	if c.Diff, err = git(ctx, root, env, "diff", "--binary", "--no-color", "--no-ext-diff", base); err != nil {
		return nil, err
	}
	if c.Diff != "" {
		c.Diff += "\n"
		names, err := git(ctx, root, env, "diff", "--name-only", "-z", base)
		if err != nil {
			return nil, err
		}
		c.Changed = strings.Count(names, "\x00")
	}
	return c, nil
}

// relativeDir is dir relative to root, with forward slashes, both with
// their links resolved (git prints the real path of the top).
func relativeDir(root, dir string) (string, error) {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("read the checkout's top %s: %w", root, err)
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("read the working directory %s: %w", dir, err)
	}
	rel, err := filepath.Rel(r, d)
	if err != nil {
		return "", fmt.Errorf("the working directory %s is not in the checkout %s", dir, root)
	}
	return filepath.ToSlash(rel), nil
}

// remoteOf picks the remote a worker clones: the branch's upstream
// remote, else origin, else the only remote there is.
func remoteOf(ctx context.Context, root, branch string) (string, error) {
	if branch != "" {
		if r, _ := git(ctx, root, nil, "config", "branch."+branch+".remote"); r != "" && r != "." {
			return r, nil
		}
	}
	list, err := git(ctx, root, nil, "remote")
	if err != nil {
		return "", err
	}
	remotes := strings.Fields(list)
	for _, r := range remotes {
		if r == "origin" {
			return r, nil
		}
	}
	switch len(remotes) {
	case 0:
		return "", errors.New("this checkout has no git remote, so a worker has nothing to clone: add one (git remote add origin URL) and push, or run from outside a checkout to upload a single script")
	case 1:
		return remotes[0], nil
	}
	return "", fmt.Errorf("this checkout has several remotes (%s) and none is origin or the branch's upstream: set the branch's upstream (git branch --set-upstream-to REMOTE/BRANCH)", strings.Join(remotes, ", "))
}

// remoteBase is the newest commit of HEAD's history that the remote has:
// where --diff-only's diff starts.
func remoteBase(ctx context.Context, root, remote string) (string, error) {
	refs, err := git(ctx, root, nil, "for-each-ref", "--format=%(refname)", "refs/remotes/"+remote+"/")
	if err != nil {
		return "", err
	}
	best, bestCount := "", -1
	for _, ref := range strings.Fields(refs) {
		mb, err := git(ctx, root, nil, "merge-base", "HEAD", ref)
		if err != nil || mb == "" {
			continue
		}
		n, err := git(ctx, root, nil, "rev-list", "--count", mb)
		if err != nil {
			continue
		}
		var count int
		_, _ = fmt.Sscan(n, &count)
		if count > bestCount {
			best, bestCount = mb, count
		}
	}
	if best == "" {
		return "", fmt.Errorf("remote %s has no commit of this branch's history to diff from: push one (git push)", remote)
	}
	return best, nil
}

// CloneURL makes a remote that is a relative local path absolute, so that
// a worker on this machine (or a shared file system) can clone it.
//
// An HTTP URL's user information (https://user:token@host/…, as GitLab CI
// puts its job token there), and any URL's password, are dropped: a task record never holds a credential,
// and the workers clone with their own access.
func CloneURL(root, raw string) string {
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil || u.User == nil {
			return raw
		}
		_, hasPassword := u.User.Password()
		switch {
		case u.Scheme == "http" || u.Scheme == "https":
			// A token may be the user name alone (https://TOKEN@host).
			u.User = nil
		case hasPassword:
			u.User = url.User(u.User.Username())
		}
		return u.String()
	}
	if strings.HasPrefix(raw, "/") || isSCP(raw) {
		return raw
	}
	return filepath.Join(root, raw)
}

// isSCP reports whether url is scp-like (git@host:path): a colon before
// any slash.
func isSCP(url string) bool {
	colon, slash := strings.Index(url, ":"), strings.Index(url, "/")
	return colon > 0 && (slash < 0 || colon < slash)
}

// captureScript records a run from outside a checkout: the script the
// command names is uploaded as a diff that creates it. The script is the
// program itself when that is a file here (./train.sh), else the first
// argument after the program that is not a flag (python -u train.py).
func captureScript(dir string, args []string) (*State, error) {
	c := &State{}
	script := ""
	if len(args) > 0 && !filepath.IsAbs(args[0]) && strings.ContainsRune(args[0], '/') {
		script = args[0]
	} else {
		for _, a := range args[min(1, len(args)):] {
			if !strings.HasPrefix(a, "-") {
				script = a
				break
			}
		}
	}
	if script == "" {
		return c, nil
	}
	p := script
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		// Not a file here: a module (python -m x) or a command of the
		// worker's host; nothing to upload.
		return c, nil
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("the script %s is outside the current directory: run klique run from its directory, or from a git checkout that holds it", script)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read the script %s: %w", script, err)
	}
	if len(b) > model.MaxDiffBytes {
		return nil, fmt.Errorf("the script %s is %d KiB, more than the %d KiB a task may carry: put it in a git repository and run from its checkout",
			script, len(b)>>10, model.MaxDiffBytes>>10)
	}
	c.Uploaded = filepath.ToSlash(rel)
	c.Diff = newFileDiff(c.Uploaded, b, fi.Mode()&0o111 != 0)
	c.Changed = 1
	return c, nil
}

// newFileDiff is a unified diff, as git writes it, that creates name with
// content.
func newFileDiff(name string, content []byte, executable bool) string {
	var b strings.Builder
	mode := "100644"
	if executable {
		mode = "100755"
	}
	fmt.Fprintf(&b, "diff --git a/%s b/%s\nnew file mode %s\n", name, name, mode)
	if len(content) == 0 {
		return b.String()
	}
	text := string(content)
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", name, len(lines))
	for _, l := range lines {
		b.WriteString("+")
		b.WriteString(l)
	}
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n\\ No newline at end of file\n")
	}
	return b.String()
}

// findPackages fills the run's Python packages: --package, else
// requirements.txt (in the working directory, then the repository's
// root), else pyproject.toml's [project] dependencies, else, for a Python
// command, what the active virtual environment has installed.
func (c *State) findPackages(ctx context.Context, dir, root string, args []string, o Options) error {
	switch {
	case o.NoPackages:
		return nil
	case len(o.Packages) > 0:
		c.Packages, c.PackagesFrom = o.Packages, "--package"
		return nil
	}
	for _, d := range uniqueDirs(dir, root) {
		if b, err := os.ReadFile(filepath.Join(d, "requirements.txt")); err == nil {
			c.Packages, c.PackagesFrom = requirements(b), relName(root, filepath.Join(d, "requirements.txt"))
			return nil
		}
	}
	for _, d := range uniqueDirs(dir, root) {
		b, err := os.ReadFile(filepath.Join(d, "pyproject.toml"))
		if err != nil {
			continue
		}
		var doc struct {
			Project struct {
				Dependencies []string `toml:"dependencies"`
			} `toml:"project"`
		}
		name := relName(root, filepath.Join(d, "pyproject.toml"))
		if err := toml.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("read %s: %w; fix it, or give the packages with --package (or --no-packages)", name, err)
		}
		if len(doc.Project.Dependencies) > 0 {
			c.Packages, c.PackagesFrom = doc.Project.Dependencies, name
			return nil
		}
	}
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "python") {
		return nil
	}
	venv := os.Getenv("VIRTUAL_ENV")
	if venv == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(venv, "bin", "python"), "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("list the packages of the active environment %s (pip freeze): %w; give them with --package, or pass --no-packages", venv, err)
	}
	c.Packages, c.PackagesFrom = requirements(out), "the active environment "+venv
	return nil
}

func uniqueDirs(dir, root string) []string {
	if filepath.Clean(dir) == filepath.Clean(root) {
		return []string{dir}
	}
	return []string{dir, root}
}

func relName(root, p string) string {
	if rel, err := filepath.Rel(root, p); err == nil {
		return filepath.ToSlash(rel)
	}
	return p
}

// requirements reads a requirements file's package lines: comments, blank
// lines and options (-r, -e, --index-url) are left out.
func requirements(b []byte) []string {
	var out []string
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		line := s.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "-") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// localSDK returns packages with an entry that installs the SDK (the
// distribution klique) from a local file: URL replaced by sdk.
func localSDK(packages []string, sdk string) []string {
	out := make([]string, 0, len(packages))
	for _, p := range packages {
		name, ref, ok := strings.Cut(p, "@")
		name = strings.ToLower(strings.TrimSpace(name))
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = strings.TrimSpace(name[:i])
		}
		if ok && name == "klique" && strings.HasPrefix(strings.ToLower(strings.TrimSpace(ref)), "file:") {
			p = sdk
		}
		out = append(out, p)
	}
	return out
}
