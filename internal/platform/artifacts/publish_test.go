package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	blobs "github.com/klique-ai/klique/internal/artifacts"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/artifacts"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/kernel/kerneltest"
	"github.com/klique-ai/klique/internal/store"
)

// world is the artifacts domain alone, on a kernel over a fresh SQLite
// store, with its blobs in a directory: no facade, no other domain. Runs
// are written to the store directly.
type world struct {
	k        *kernel.Kernel
	st       store.Store
	arts     *artifacts.Artifacts
	e        *estate.Estate
	blobsDir string
	// opts built arts, for a world whose worker holds tasks (holding).
	opts artifacts.Options
}

const testEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: k8s, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [k8s]}
groups:
  - {name: ml}
  - {name: vision}
policies:
  - group: ml
    limit: 8
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: ml-proj, group: ml}
`

func newWorld(t *testing.T, maxBytes int64) *world {
	t.Helper()
	st := kerneltest.Store(t)
	w := &world{st: st, k: kernel.New(kernel.Options{Store: st}), blobsDir: filepath.Join(t.TempDir(), "blobs")}
	b, err := blobs.NewLocal(w.blobsDir)
	if err != nil {
		t.Fatal(err)
	}
	w.opts = artifacts.Options{Blobs: b, MaxBytes: maxBytes}
	w.arts = artifacts.New(w.k, w.opts)
	res, err := kerneltest.ApplyEstate(w.as(t, "admin", model.RoleTenantAdmin), w.k, testEstate, false)
	if err != nil {
		t.Fatalf("apply the test estate: %v", err)
	}
	w.e = res.Estate
	return w
}

// holding rebuilds the domain with held as the fleet's check of a
// worker's hold on a task.
func (w *world) holding(held artifacts.HeldTaskFunc) {
	w.opts.HeldTask = held
	w.arts = artifacts.New(w.k, w.opts)
}

func (w *world) as(t *testing.T, name string, role model.Role, groups ...string) context.Context {
	t.Helper()
	return kerneltest.User(t, w.st, w.e, name, role, groups...)
}

// run writes a running task of owner's in group ml.
func (w *world) run(t *testing.T, owner context.Context) *model.Task {
	t.Helper()
	p, _ := kernel.Caller(owner)
	cr := w.e.ComputeResources[0]
	pol := w.e.Policy(cr.PolicyID)
	task := &model.Task{ID: model.NewID(), TenantID: "t1", ProjectID: w.e.ProjectByName("ml-proj").ID, OwnerID: p.UserID,
		ComputeResourceID: cr.ID, PolicyID: pol.ID, ProfileID: cr.ProfileID, GroupID: pol.GroupID, Name: "train",
		Spec: model.TaskSpec{Command: []string{"x"}}, Status: model.TaskRunning, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := w.st.CreateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	return task
}

// blobCount is how many files the blob store keeps.
func (w *world) blobCount(t *testing.T) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(w.blobsDir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func upload(name, body string) artifacts.Upload {
	return artifacts.Upload{Name: name, Size: int64(len(body)), Body: strings.NewReader(body)}
}

func wantError(t *testing.T, what string, err error, code kernel.Code, words ...string) {
	t.Helper()
	if kernel.ErrorCode(err) != code {
		t.Errorf("%s: %v (code %s), want %s", what, err, kernel.ErrorCode(err), code)
		return
	}
	for _, wd := range words {
		if !strings.Contains(err.Error(), wd) {
			t.Errorf("%s: %q does not say %q", what, err, wd)
		}
	}
}

// Who may publish on a run, and which names and pointers are taken.
func TestPublishRules(t *testing.T) {
	w := newWorld(t, 16)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	mo := w.as(t, "mo", model.RoleMember, "ml")
	vic := w.as(t, "vic", model.RoleMember, "vision")
	run := w.run(t, rita)

	for _, name := range []string{"", "../model.pt", "a//b", "./x", `a\b`, "a\nb", strings.Repeat("n", model.MaxArtifactNameLength+1)} {
		_, err := w.arts.PublishArtifact(rita, run.ID, upload(name, "x"))
		wantError(t, "name "+name, err, kernel.CodeInvalid)
	}
	_, err := w.arts.PublishArtifact(mo, run.ID, upload("model.pt", "x"))
	wantError(t, "a member of the run's group", err, kernel.CodeForbidden, "only the owner of task")
	_, err = w.arts.PublishPointer(vic, run.ID, artifacts.Pointer{Name: "model.pt", URL: "s3://b/k"})
	wantError(t, "another group's member", err, kernel.CodeNotFound, "no task")
	_, err = w.arts.PublishPointer(rita, run.ID, artifacts.Pointer{Name: "model.pt", URL: "model.pt"})
	wantError(t, "a relative pointer", err, kernel.CodeInvalid, "give a URL")
	_, err = w.arts.PublishPointer(rita, run.ID, artifacts.Pointer{Name: "model.pt", URL: "s3://b/k", Size: -1})
	wantError(t, "a negative size", err, kernel.CodeInvalid, "is negative")
	_, err = w.arts.PublishPointer(rita, run.ID, artifacts.Pointer{Name: "model.pt", URL: "s3://b/k", SHA256: "abc"})
	wantError(t, "a short hash", err, kernel.CodeInvalid, "not 64 hexadecimal digits")
	if list, err := w.arts.TaskArtifacts(rita, run); err != nil || len(list) != 0 {
		t.Fatalf("refused publications were kept: %v, %v", list, err)
	}

	a, err := w.arts.PublishPointer(rita, run.ID, artifacts.Pointer{Name: "ckpt/model.pt", URL: "s3://b/k", Size: 1 << 40})
	if err != nil || !a.IsPointer() || a.ContentType != "application/octet-stream" || a.CreatedBy != run.OwnerID {
		t.Errorf("a pointer: %+v, %v", a, err)
	}
	// Whoever sees the run reads it; another group finds nothing.
	if got, err := w.arts.Artifact(mo, run.ID, "ckpt/model.pt"); err != nil || got.ID != a.ID {
		t.Errorf("a member of the group reads it: %v", err)
	}
	if _, err := w.arts.TaskArtifacts(vic, run); kernel.ErrorCode(err) != kernel.CodeNotFound {
		t.Errorf("another group lists it: %v", err)
	}
	_, err = w.arts.Artifact(rita, run.ID, "nope")
	wantError(t, "an unknown artifact", err, kernel.CodeNotFound, "has no artifact 'nope'")
}

// A stored upload is hashed as it arrives; one over the limit or whose
// hash differs is refused and leaves nothing; a second of the same name
// replaces the first, bytes included.
func TestStoredUploads(t *testing.T) {
	w := newWorld(t, 16)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	run := w.run(t, rita)

	_, err := w.arts.PublishArtifact(rita, run.ID, upload("big", strings.Repeat("x", 17)))
	var tl *artifacts.TooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "is 17 bytes, more than the 16 bytes") {
		t.Errorf("declared over the limit: %v", err)
	}
	up := upload("big", strings.Repeat("x", 17))
	up.Size = -1
	if _, err := w.arts.PublishArtifact(rita, run.ID, up); !errors.As(err, &tl) {
		t.Errorf("over the limit, size unknown: %v", err)
	}
	up = upload("m", "hello")
	up.SHA256 = strings.Repeat("0", 64)
	_, err = w.arts.PublishArtifact(rita, run.ID, up)
	wantError(t, "a hash that differs", err, kernel.CodeInvalid, "nothing was kept")
	if n := w.blobCount(t); n != 0 {
		t.Fatalf("refused uploads left %d blobs", n)
	}

	sum := sha256.Sum256([]byte("hello"))
	up = upload("m", "hello")
	up.SHA256 = strings.ToUpper(hex.EncodeToString(sum[:]))
	first, err := w.arts.PublishArtifact(rita, run.ID, up)
	if err != nil || first.Size != 5 || first.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("a stored upload: %+v, %v", first, err)
	}
	second, err := w.arts.PublishArtifact(rita, run.ID, upload("m", "world!"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := w.arts.TaskArtifacts(rita, run)
	if len(list) != 1 || list[0].ID != second.ID || w.blobCount(t) != 1 {
		t.Errorf("after a replacement: %d artifacts, %d blobs; want one of each", len(list), w.blobCount(t))
	}
	_, rc, err := w.arts.OpenArtifact(rita, run.ID, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "world!" {
		t.Errorf("the replacement reads %q", b)
	}
	es, _ := w.st.ListAudit(context.Background(), "t1", store.AuditFilter{}, store.Page{Limit: 100})
	replaced := 0
	for _, e := range es {
		if e.Action == "artifact.published" && strings.Contains(e.Detail, "replacing the earlier one") {
			replaced++
		}
	}
	if replaced != 1 {
		t.Errorf("%d audit entries say they replaced one; want 1", replaced)
	}

	noBlobs := artifacts.New(w.k, artifacts.Options{})
	_, err = noBlobs.PublishArtifact(rita, run.ID, upload("x", "y"))
	wantError(t, "no storage", err, kernel.CodeUnavailable, "publish 'x' as a pointer")
}

// A worker publishes only for the attempt the fleet says it holds.
func TestWorkerPublishes(t *testing.T) {
	w := newWorld(t, 16)
	rita := w.as(t, "rita", model.RoleMember, "ml")
	run := w.run(t, rita)
	_, err := w.arts.WorkerPublishPointer(context.Background(), run.ID, 1, artifacts.Pointer{Name: "m", URL: "s3://b/k"})
	wantError(t, "unwired", err, kernel.CodeUnavailable)
	w.holding(func(ctx context.Context, id string, attempt int) (*model.Task, error) {
		if attempt != 2 {
			return nil, kernel.Conflict("attempt %d is not the current one", attempt)
		}
		return w.st.GetTask(ctx, "t1", id)
	})
	_, err = w.arts.WorkerPublishArtifact(context.Background(), run.ID, 1, upload("m", "x"))
	wantError(t, "an old attempt", err, kernel.CodeConflict)
	a, err := w.arts.WorkerPublishArtifact(context.Background(), run.ID, 2, upload("m", "x"))
	if err != nil || a.CreatedBy != run.OwnerID {
		t.Fatalf("the current attempt: %+v, %v", a, err)
	}
	es, _ := w.st.ListAudit(context.Background(), "t1", store.AuditFilter{}, store.Page{Limit: 100})
	if len(es) == 0 || es[0].Action != "artifact.published" || es[0].ActorName != "worker" || es[0].Channel != string(identity.ChannelWorker) {
		t.Errorf("the worker's publication is audited as the worker's: %+v", es[0])
	}
}
