package store

import (
	"context"
	"time"

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
	// ListPublishedArtifacts lists the artifacts of a name published
	// after since (exclusive) and at or before until, by publication time
	// then id, at most limit: what an artifact.published trigger
	// matches.
	ListPublishedArtifacts(ctx context.Context, tenantID string, f PublishedArtifactFilter, since, until time.Time, limit int) ([]*model.Artifact, error)
}

// PublishedArtifactFilter narrows ListPublishedArtifacts: Name is
// required; ProjectID, when set, keeps the artifacts of that project's
// tasks; GroupIDs, VisibleToUserID and RestrictToGroups work as
// TaskFilter's, on the artifact's task.
type PublishedArtifactFilter struct {
	Name             string
	ProjectID        string
	GroupIDs         []string
	VisibleToUserID  string
	RestrictToGroups bool
}
