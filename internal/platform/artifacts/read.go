package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/klique-ai/klique/internal/artifacts"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// TaskArtifacts lists a run's artifacts, by name, for a caller who may see
// the run (its logs' rule).
func (s *Artifacts) TaskArtifacts(ctx context.Context, t *model.Task) ([]*model.Artifact, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !kernel.SeesTask(p, t) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(t.ID))
	}
	list, err := s.k.Store.ListArtifacts(ctx, p.TenantID, t.ID)
	return list, s.k.Internal(ctx, err)
}

// Artifact returns one artifact of a run the caller may see.
func (s *Artifacts) Artifact(ctx context.Context, taskID, name string) (*model.Artifact, error) {
	t, err := s.k.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	a, err := s.k.Store.GetArtifact(ctx, t.TenantID, t.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, kernel.NotFound("task %s has no artifact %s", kernel.Quote(taskID), kernel.Quote(name))
	}
	return a, s.k.Internal(ctx, err)
}

// OpenArtifact returns an artifact of a run the caller may see and, for a
// stored one, its bytes (the caller closes them); a pointer has none.
func (s *Artifacts) OpenArtifact(ctx context.Context, taskID, name string) (*model.Artifact, io.ReadCloser, error) {
	a, err := s.Artifact(ctx, taskID, name)
	if err != nil {
		return nil, nil, err
	}
	rc, err := s.open(ctx, a)
	return a, rc, err
}

func (s *Artifacts) open(ctx context.Context, a *model.Artifact) (io.ReadCloser, error) {
	if a.IsPointer() {
		return nil, nil
	}
	if s.blobs == nil {
		return nil, kernel.Unavailable("artifact %s is stored, but this control plane has no artifact storage configured", kernel.Quote(a.Name))
	}
	rc, err := s.blobs.Open(ctx, a.StorageKey)
	if errors.Is(err, artifacts.ErrNotFound) {
		return nil, s.k.Internal(ctx, fmt.Errorf("artifact %s of task %s: its bytes are missing from %s", a.Name, a.TaskID, s.blobs.Describe()))
	}
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return rc, nil
}

// CheckInputs is the enqueue's check of a task's inputs, inside its
// transaction: each names a run the enqueuer may read that has the
// artifact. The refusal names the input, the run and the artifact.
func CheckInputs(ctx context.Context, q store.Queries, p *identity.Principal, inputs []model.ArtifactInput) error {
	for _, in := range inputs {
		src, err := q.GetTask(ctx, p.TenantID, in.TaskID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !kernel.SeesTask(p, src)) {
			return kernel.Invalid("input %s: no run %s that you may read; give the id of a run of yours or of your groups",
				in.Name, kernel.Quote(in.TaskID))
		}
		if err != nil {
			return err
		}
		_, err = q.GetArtifact(ctx, p.TenantID, src.ID, in.Artifact)
		if errors.Is(err, store.ErrNotFound) {
			return kernel.Invalid("input %s: run %s (%s) has no artifact %s; 'klique artifact ls %s' lists what it has",
				in.Name, kernel.Quote(src.Name), src.ID, kernel.Quote(in.Artifact), src.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// WorkerOpenInput returns an input of a task the calling worker holds at
// attempt: the artifact and, when stored, its bytes. The task's owner must
// still be able to read the run it comes from (their groups may have
// changed since the enqueue).
func (s *Artifacts) WorkerOpenInput(ctx context.Context, taskID string, attempt int, input string) (*model.Artifact, io.ReadCloser, error) {
	t, err := s.heldTask(ctx, taskID, attempt)
	if err != nil {
		return nil, nil, err
	}
	var in *model.ArtifactInput
	for i := range t.Spec.Inputs {
		if t.Spec.Inputs[i].Name == input {
			in = &t.Spec.Inputs[i]
		}
	}
	if in == nil {
		return nil, nil, kernel.NotFound("task %s has no input %s", kernel.Quote(taskID), kernel.Quote(input))
	}
	owner, err := identity.LoadPrincipal(ctx, s.k.Store, t.TenantID, t.OwnerID)
	if errors.Is(err, identity.ErrUnauthenticated) {
		return nil, nil, kernel.Forbidden("input %s: the owner of task %s can no longer sign in, so its inputs are not read", input, kernel.Quote(taskID))
	}
	if err != nil {
		return nil, nil, s.k.Internal(ctx, err)
	}
	noLonger := kernel.Forbidden("input %s: the owner of task %s may no longer read run %s or it has no artifact %s",
		input, kernel.Quote(taskID), kernel.Quote(in.TaskID), kernel.Quote(in.Artifact))
	src, err := s.k.Store.GetTask(ctx, t.TenantID, in.TaskID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !kernel.SeesTask(owner, src)) {
		return nil, nil, noLonger
	}
	if err != nil {
		return nil, nil, s.k.Internal(ctx, err)
	}
	a, err := s.k.Store.GetArtifact(ctx, t.TenantID, src.ID, in.Artifact)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, noLonger
	}
	if err != nil {
		return nil, nil, s.k.Internal(ctx, err)
	}
	rc, err := s.open(ctx, a)
	return a, rc, err
}
