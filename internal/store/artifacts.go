package store

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
)

// ArtifactQueries keep the artifacts runs published (the rows; a stored
// artifact's bytes are in the control plane's artifact storage, which the
// platform writes). Embedded in Queries.
type ArtifactQueries interface {
	// CreateArtifact stores an artifact. ErrConflict when the run already
	// has one of that name (the platform deletes it first to replace it),
	// ErrNotFound when the task does not exist.
	CreateArtifact(ctx context.Context, a *model.Artifact) error
	// GetArtifact returns a run's artifact by name.
	GetArtifact(ctx context.Context, tenantID, taskID, name string) (*model.Artifact, error)
	// ListArtifacts lists a run's artifacts by name.
	ListArtifacts(ctx context.Context, tenantID, taskID string) ([]*model.Artifact, error)
	// DeleteArtifact removes an artifact row.
	DeleteArtifact(ctx context.Context, tenantID, id string) error
}
