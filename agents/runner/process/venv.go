package process

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/klique-ai/klique/internal/agentapi"
)

// readyFile marks a virtual environment whose packages installed fully; a
// directory without it is a build that was interrupted.
const readyFile = ".klique-ready"

// VenvKey names the cached environment of a package set: the same packages,
// in any order and with repeats, give the same key. The interpreter is part
// of the key, since an environment belongs to one Python.
func VenvKey(python string, packages []string) string {
	set := map[string]bool{}
	for _, p := range packages {
		if p = strings.TrimSpace(p); p != "" {
			set[p] = true
		}
	}
	list := make([]string, 0, len(set))
	for p := range set {
		list = append(list, p)
	}
	sort.Strings(list)
	sum := sha256.Sum256([]byte(python + "\x00" + strings.Join(list, "\x00")))
	return hex.EncodeToString(sum[:])[:20]
}

// venv returns a virtual environment with packages installed, building it
// unless a complete one for the same set is cached.
func (r *Runner) venv(ctx context.Context, h *handle, env []string, packages []string) (string, error) {
	key := VenvKey(r.opts.Python, packages)
	// The job's project's cache when the worker gave one (tasks of other
	// projects cannot enter it), else the runner's.
	cache := h.job.Cache
	if cache == "" {
		cache = r.opts.VenvCache
		if err := mkdirOwned(cache, r.opts.User); err != nil {
			return "", fmt.Errorf("create the environment cache: %w", err)
		}
	}
	dir := filepath.Join(cache, key)
	r.mu.Lock()
	lock, ok := r.venvs[dir]
	if !ok {
		lock = &sync.Mutex{}
		r.venvs[dir] = lock
	}
	r.mu.Unlock()
	h.setPending(fmt.Sprintf("waiting for the Python environment %s", key))
	lock.Lock()
	defer lock.Unlock()

	if _, err := os.Stat(filepath.Join(dir, readyFile)); err == nil {
		h.log(agentapi.StreamWorker, fmt.Sprintf("reusing the cached Python environment %s (%d packages)", key, len(packages)))
		return dir, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("remove an unfinished environment: %w", err)
	}
	run := h.exec(env)
	h.setPending("creating a Python environment")
	h.log(agentapi.StreamWorker, "creating the Python environment "+key)
	if err := run(ctx, cache, r.opts.Python, "-m", "venv", dir); err != nil {
		return "", fmt.Errorf("create a virtual environment: %w", err)
	}
	h.setPending(fmt.Sprintf("installing %d packages", len(packages)))
	h.log(agentapi.StreamWorker, "installing "+strings.Join(packages, " "))
	args := []string{"-m", "pip", "install", "--disable-pip-version-check", "--no-input"}
	args = append(args, r.opts.PipArgs...)
	args = append(args, packages...)
	if err := run(ctx, dir, filepath.Join(dir, "bin", "python"), args...); err != nil {
		return "", fmt.Errorf("install packages: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, readyFile), []byte(strings.Join(packages, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}
