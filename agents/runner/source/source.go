// Package source rebuilds a task's code on the host the way it was
// recorded: the repository cloned at the recorded commit, with the recorded
// uncommitted changes applied on top.
package source

import (
	"context"
	"fmt"
	"os"
)

// Exec runs one preparation command in dir and returns an error when it
// fails. Each runner supplies its own (as which user, where output goes).
type Exec func(ctx context.Context, dir, name string, args ...string) error

// Checkout clones repo into dest (which must not exist), checks out commit
// (the default branch when empty) and applies diff, a unified diff as
// `git diff` prints it, writing it to patchFile first. git is the git
// executable ("git" when empty).
func Checkout(ctx context.Context, run Exec, git, repo, commit, diff, dest, patchFile string) error {
	if git == "" {
		git = "git"
	}
	if err := run(ctx, "", git, "clone", "--quiet", "--no-checkout", "--", repo, dest); err != nil {
		return fmt.Errorf("clone %s: %w", repo, err)
	}
	args := []string{"-c", "advice.detachedHead=false", "checkout", "--quiet"}
	if commit != "" {
		args = append(args, "--detach", commit)
	}
	if err := run(ctx, dest, git, args...); err != nil {
		if commit == "" {
			return fmt.Errorf("check out the default branch of %s: %w", repo, err)
		}
		return fmt.Errorf("check out commit %s of %s: %w", commit, repo, err)
	}
	if diff == "" {
		return nil
	}
	if err := apply(ctx, run, git, diff, dest, patchFile); err != nil {
		return fmt.Errorf("apply the uncommitted changes: %w", err)
	}
	return nil
}

// Create writes the files a diff creates into dest, an empty directory: the
// script 'klique run' uploads from outside a git checkout.
func Create(ctx context.Context, run Exec, git, diff, dest, patchFile string) error {
	if git == "" {
		git = "git"
	}
	// Its own repository, so that git apply takes the paths as relative to
	// dest even when dest lies inside another checkout, and refuses any
	// that would leave it.
	if err := run(ctx, dest, git, "-c", "init.defaultBranch=main", "init", "--quiet"); err != nil {
		return fmt.Errorf("prepare the working directory for the uploaded files: %w", err)
	}
	if err := apply(ctx, run, git, diff, dest, patchFile); err != nil {
		return fmt.Errorf("write the uploaded files: %w", err)
	}
	return nil
}

// apply applies diff in dir with git apply (which works outside a
// repository too), writing it to patchFile first.
func apply(ctx context.Context, run Exec, git, diff, dir, patchFile string) error {
	if diff[len(diff)-1] != '\n' {
		diff += "\n"
	}
	if err := os.WriteFile(patchFile, []byte(diff), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", patchFile, err)
	}
	return run(ctx, dir, git, "apply", "--whitespace=nowarn", patchFile)
}
