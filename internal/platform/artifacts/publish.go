package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/url"
	"strings"

	"github.com/klique-ai/klique/internal/artifacts"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Upload is a stored artifact as its publisher sends it.
type Upload struct {
	Name string
	// ContentType is kept as given (application/octet-stream when empty).
	ContentType string
	// SHA256, when set (hex), is what the publisher computed: the upload
	// is refused, and nothing kept, when the bytes that arrived differ.
	SHA256 string
	// Size is the length the publisher declared (-1: unknown): an upload
	// declared over the limit is refused before any byte is read.
	Size int64
	Body io.Reader
}

// Pointer is a pointer artifact: where an output stays, with what the
// publisher knows of it.
type Pointer struct {
	Name string
	// URL is where the bytes are: a URL (s3://, gs://, https://…) or an
	// absolute path in the run's output destination.
	URL         string
	Size        int64
	SHA256      string
	ContentType string
}

// TooLargeError refuses an upload over the stored limit (HTTP 413).
type TooLargeError struct{ E *kernel.Error }

func (e *TooLargeError) Error() string { return e.E.Error() }

// Unwrap lets the channels read the platform error's code and message.
func (e *TooLargeError) Unwrap() error { return e.E }

// PublishArtifact stores an upload on a run of the caller's own.
func (s *Artifacts) PublishArtifact(ctx context.Context, taskID string, up Upload) (*model.Artifact, error) {
	p, t, err := s.ownRun(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return s.store(ctx, p, t, up)
}

// PublishPointer registers a pointer on a run of the caller's own.
func (s *Artifacts) PublishPointer(ctx context.Context, taskID string, ptr Pointer) (*model.Artifact, error) {
	p, t, err := s.ownRun(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return s.pointer(ctx, p, t, ptr)
}

// WorkerPublishArtifact stores an upload for the attempt of a task the
// calling worker holds.
func (s *Artifacts) WorkerPublishArtifact(ctx context.Context, taskID string, attempt int, up Upload) (*model.Artifact, error) {
	t, err := s.heldTask(ctx, taskID, attempt)
	if err != nil {
		return nil, err
	}
	return s.store(identity.WithChannel(ctx, identity.ChannelWorker), s.workerActor(ctx, t), t, up)
}

// WorkerPublishPointer registers a pointer for the attempt of a task the
// calling worker holds.
func (s *Artifacts) WorkerPublishPointer(ctx context.Context, taskID string, attempt int, ptr Pointer) (*model.Artifact, error) {
	t, err := s.heldTask(ctx, taskID, attempt)
	if err != nil {
		return nil, err
	}
	return s.pointer(identity.WithChannel(ctx, identity.ChannelWorker), s.workerActor(ctx, t), t, ptr)
}

// workerActor is who the audit trail names for a worker's publication.
func (s *Artifacts) workerActor(ctx context.Context, t *model.Task) *identity.Principal {
	name := "worker"
	if w, ok := identity.WorkerFrom(ctx); ok && w.PoolName != "" {
		name = "worker of pool " + w.PoolName
	}
	return kernel.System(t.TenantID, name)
}

// ownRun is the task of taskID when the caller owns it: another's run they
// may see is forbidden, one they may not see is not found.
func (s *Artifacts) ownRun(ctx context.Context, taskID string) (*identity.Principal, *model.Task, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	t, err := s.k.Task(ctx, taskID)
	if err != nil {
		return nil, nil, err
	}
	if t.OwnerID != p.UserID {
		return nil, nil, kernel.Forbidden("only the owner of task %s publishes artifacts on it", kernel.Quote(taskID))
	}
	if err := kernel.RequireWrite(p, "publish artifacts"); err != nil {
		return nil, nil, err
	}
	return p, t, nil
}

// store streams an upload into the blob store, counting and hashing it,
// then records it, replacing an artifact of the same name.
func (s *Artifacts) store(ctx context.Context, p *identity.Principal, t *model.Task, up Upload) (*model.Artifact, error) {
	if msg := model.ArtifactNameProblem(up.Name); msg != "" {
		return nil, kernel.Invalid("%s", msg)
	}
	want, err := normalHash(up.SHA256)
	if err != nil {
		return nil, err
	}
	ctype, err := contentType(up.ContentType)
	if err != nil {
		return nil, err
	}
	if s.blobs == nil {
		return nil, kernel.Unavailable("this control plane stores no artifacts: publish %s as a pointer to where it is", kernel.Quote(up.Name))
	}
	if up.Size > s.maxBytes {
		return nil, s.tooLarge(up.Name, up.Size)
	}
	a := &model.Artifact{ID: model.NewID(), TenantID: t.TenantID, TaskID: t.ID, Name: up.Name, ContentType: ctype, CreatedBy: t.OwnerID}
	a.StorageKey = artifacts.Key(t.TenantID, t.ID, a.ID)
	body := &counter{r: up.Body, h: sha256.New(), max: s.maxBytes}
	if err := s.blobs.Put(ctx, a.StorageKey, body); err != nil {
		switch {
		case body.over:
			return nil, s.tooLarge(up.Name, -1)
		case body.readErr != nil:
			return nil, kernel.Invalid("the upload of %s was cut short after %d bytes: send it again", kernel.Quote(up.Name), body.n)
		}
		return nil, s.k.Internal(ctx, fmt.Errorf("store artifact %s of task %s: %w", up.Name, t.ID, err))
	}
	a.Size, a.SHA256 = body.n, hex.EncodeToString(body.h.Sum(nil))
	if want != "" && want != a.SHA256 {
		s.dropBlob(ctx, a.StorageKey)
		return nil, kernel.Invalid("artifact %s arrived with SHA-256 %s, not the %s sent with it: nothing was kept; send it again",
			kernel.Quote(up.Name), a.SHA256, want)
	}
	if err := s.record(ctx, p, t, a); err != nil {
		s.dropBlob(ctx, a.StorageKey)
		return nil, err
	}
	return a, nil
}

// pointer records a pointer artifact.
func (s *Artifacts) pointer(ctx context.Context, p *identity.Principal, t *model.Task, ptr Pointer) (*model.Artifact, error) {
	if msg := model.ArtifactNameProblem(ptr.Name); msg != "" {
		return nil, kernel.Invalid("%s", msg)
	}
	if err := checkPointerURL(ptr.URL); err != nil {
		return nil, err
	}
	want, err := normalHash(ptr.SHA256)
	if err != nil {
		return nil, err
	}
	if ptr.Size < 0 {
		return nil, kernel.Invalid("the size of pointer %s is negative: give its size in bytes, or none", kernel.Quote(ptr.Name))
	}
	ctype, err := contentType(ptr.ContentType)
	if err != nil {
		return nil, err
	}
	a := &model.Artifact{ID: model.NewID(), TenantID: t.TenantID, TaskID: t.ID, Name: ptr.Name, Size: ptr.Size,
		SHA256: want, ContentType: ctype, Pointer: ptr.URL, CreatedBy: t.OwnerID}
	if err := s.record(ctx, p, t, a); err != nil {
		return nil, err
	}
	return a, nil
}

// record writes the artifact in one transaction with its audit entry,
// replacing (and, after commit, deleting the bytes of) one of the same
// name. p has passed its checks already (the owner of a run, or the
// worker holding its attempt): the runner asks no further right.
func (s *Artifacts) record(ctx context.Context, p *identity.Principal, t *model.Task, a *model.Artifact) error {
	old, err := kernel.RunAs(ctx, s.k, p, kernel.Op[*model.Artifact]{
		Name: "publishArtifact", Right: kernel.RightRead, What: "publish artifacts",
		Body: func(tx *kernel.Txn) (*model.Artifact, kernel.Audit, error) {
			var old *model.Artifact
			a.CreatedAt = tx.Now
			prev, err := tx.Q.GetArtifact(ctx, t.TenantID, t.ID, a.Name)
			switch {
			case err == nil:
				if err := tx.Q.DeleteArtifact(ctx, t.TenantID, prev.ID); err != nil {
					return nil, kernel.Audit{}, err
				}
				old = prev
			case !errors.Is(err, store.ErrNotFound):
				return nil, kernel.Audit{}, err
			}
			if err := tx.Q.CreateArtifact(ctx, a); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return nil, kernel.Audit{}, kernel.NotFound("no task %s", kernel.Quote(t.ID))
				}
				return nil, kernel.Audit{}, err
			}
			what := fmt.Sprintf("stored, %d bytes, sha256 %s", a.Size, a.SHA256)
			if a.IsPointer() {
				what = "pointer to " + a.Pointer
			}
			if old != nil {
				what += ", replacing the earlier one"
			}
			return old, kernel.Audit{Action: "artifact.published", Kind: "task", ID: t.ID, Name: t.Name, GroupID: t.GroupID,
				Detail: fmt.Sprintf("artifact %s %s", kernel.Quote(a.Name), what)}, nil
		},
	})
	if err != nil {
		return err
	}
	if old != nil && old.StorageKey != "" {
		s.dropBlob(ctx, old.StorageKey)
	}
	return nil
}

// dropBlob deletes bytes no row points to any more; a failure is logged
// (the orphan costs space, not correctness).
func (s *Artifacts) dropBlob(ctx context.Context, key string) {
	if err := s.blobs.Delete(context.WithoutCancel(ctx), key); err != nil {
		_ = s.k.Internal(ctx, fmt.Errorf("delete replaced artifact bytes: %w", err))
	}
}

func (s *Artifacts) tooLarge(name string, size int64) error {
	got := "is larger than"
	if size >= 0 {
		got = fmt.Sprintf("is %d bytes, more than", size)
	}
	return &TooLargeError{E: kernel.Invalid("artifact %s %s the %d bytes the control plane stores (KLIQUE_ARTIFACT_MAX_BYTES): "+
		"write it to the run's output destination (KLIQUE_OUTPUT_DESTINATION) and publish it as a pointer instead; nothing was kept",
		kernel.Quote(name), got, s.maxBytes)}
}

// normalHash checks a hex SHA-256 and lowercases it ("" stays "").
func normalHash(h string) (string, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" {
		return "", nil
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", kernel.Invalid("SHA-256 %q is not 64 hexadecimal digits", h)
	}
	return h, nil
}

func contentType(ct string) (string, error) {
	if ct == "" {
		return "application/octet-stream", nil
	}
	if len(ct) > 255 {
		return "", kernel.Invalid("the content type is longer than 255 bytes")
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return "", kernel.Invalid("content type %q is not a media type such as application/octet-stream", ct)
	}
	return ct, nil
}

// checkPointerURL accepts a URL with a scheme and something after it, or an
// absolute path, of printable text.
func checkPointerURL(raw string) error {
	bad := kernel.Invalid("pointer %q: give a URL (s3://bucket/key, https://…) or an absolute path, at most 2048 bytes", raw)
	if raw == "" || len(raw) > 2048 || strings.ContainsAny(raw, " \t\r\n") {
		return bad
	}
	if strings.HasPrefix(raw, "/") {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || (u.Host == "" && u.Opaque == "" && u.Path == "") {
		return bad
	}
	return nil
}

// counter counts and hashes what passes, and fails once more than max has.
type counter struct {
	r       io.Reader
	h       hash.Hash
	n, max  int64
	over    bool
	readErr error
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	if c.n > c.max {
		c.over = true
		return 0, errors.New("artifact over the stored limit")
	}
	if err != nil && err != io.EOF {
		c.readErr = err
	}
	return n, err
}
