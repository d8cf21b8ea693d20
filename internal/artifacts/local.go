package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Local keeps blobs as files under a directory (the control plane's data
// directory's "artifacts"). A Put writes a temporary file beside the
// final one, syncs it and renames it into place, so a reader sees the
// whole old blob or the whole new one, and a crash leaves at worst a
// temporary file (".put-*"), never a torn blob.
type Local struct {
	root string
}

// NewLocal returns a store under dir, creating it (0700: artifacts are
// readable only through the API's checks).
func NewLocal(dir string) (*Local, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the artifact directory %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("artifact directory %s: %w", dir, err)
	}
	return &Local{root: abs}, nil
}

// Describe names the directory.
func (l *Local) Describe() string { return "directory " + l.root }

func (l *Local) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// Put writes r under key: temporary file, fsync, rename, fsync of the
// directory.
func (l *Local) Put(ctx context.Context, key string, r io.Reader) error {
	path, err := l.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("put artifact %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return fmt.Errorf("put artifact %s: %w", key, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, readerWithContext(ctx, r)); err != nil {
		return fmt.Errorf("put artifact %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("put artifact %s: sync: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("put artifact %s: close: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("put artifact %s: rename: %w", key, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename survives a crash
		_ = d.Close()
	}
	return nil
}

// Open reads a blob.
func (l *Local) Open(_ context.Context, key string) (io.ReadCloser, error) {
	path, err := l.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("open artifact %s: %w", key, err)
	}
	return f, nil
}

// Delete removes a blob.
func (l *Local) Delete(_ context.Context, key string) error {
	path, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete artifact %s: %w", key, err)
	}
	return nil
}

// readerWithContext stops a copy once ctx is done (a client gone away).
func readerWithContext(ctx context.Context, r io.Reader) io.Reader {
	return ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
