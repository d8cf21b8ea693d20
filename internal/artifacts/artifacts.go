// Package artifacts keeps the bytes of stored artifacts: the files and
// models runs publish to the control plane (docs/experiments.md,
// "Artifacts and output destinations"). It knows nothing of runs, tenants
// or who may read what; the platform's artifacts domain decides that and
// names each blob by a key of its own.
//
// Two stores implement Blobs: Local, a directory under the control
// plane's data directory (the default), and S3, an S3-compatible bucket
// (KLIQUE_ARTIFACT_BUCKET). Keys are per artifact (tenant/task/artifact
// id), not content addresses: replacing or deleting one artifact never
// touches another's bytes, so no reference counting is needed.
package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNotFound is returned by Open for a key that holds nothing.
var ErrNotFound = errors.New("artifact blob not found")

// Blobs stores artifact bytes by key.
type Blobs interface {
	// Put stores what r gives, read to its end, under key, replacing what
	// was there. When r fails (the publisher went away, the platform's
	// limit or hash check refused it) nothing is left under key.
	Put(ctx context.Context, key string, r io.Reader) error
	// Open reads what key holds; ErrNotFound when nothing.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes key; a key that holds nothing is not an error.
	Delete(ctx context.Context, key string) error
	// Describe says where the blobs are, for the start line and docs
	// (never credentials).
	Describe() string
}

// Key names the blob of one artifact. The parts are ids the control plane
// made (letters, digits, '-'), so a key is a safe relative path.
func Key(tenantID, taskID, artifactID string) string {
	return tenantID + "/" + taskID + "/" + artifactID
}

// checkKey refuses a key that is not a plain relative path of ids: a blob
// store never writes outside its root, whatever it is given.
func checkKey(key string) error {
	if key == "" || len(key) > 512 {
		return fmt.Errorf("artifact key %q: must be 1 to 512 characters", key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("artifact key %q: empty, '.' or '..' segment", key)
		}
		for _, r := range part {
			ok := r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
			if !ok {
				return fmt.Errorf("artifact key %q: only letters, digits, '-', '_', '.' and '/' are allowed", key)
			}
		}
	}
	return nil
}
