package store

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// PipelineRunFilter narrows a list of pipeline runs. Empty fields do not
// filter; GroupIDs, VisibleToUserID and RestrictToGroups work as
// TaskFilter's.
type PipelineRunFilter struct {
	ProjectID        string
	Name             string
	States           []model.PipelineRunState
	GroupIDs         []string
	VisibleToUserID  string
	RestrictToGroups bool
}

// PipelineQueries keep pipeline runs, their steps and which step made
// which task. Embedded in Queries.
type PipelineQueries interface {
	// CreatePipelineRun stores a run and its steps.
	CreatePipelineRun(ctx context.Context, r *model.PipelineRun) error
	// GetPipelineRun returns a run with its steps in definition order.
	GetPipelineRun(ctx context.Context, tenantID, id string) (*model.PipelineRun, error)
	// ListPipelineRuns lists runs, newest first, without their steps.
	// Page.After is the id of the last run of the previous page.
	ListPipelineRuns(ctx context.Context, tenantID string, f PipelineRunFilter, page Page) ([]*model.PipelineRun, error)
	// ListFinishedPipelineRuns lists the runs that ended after since
	// (exclusive) and at or before until, by end time then id, at most
	// limit, without their steps: what a pipeline.finished trigger
	// matches. f filters as ListPipelineRuns'.
	ListFinishedPipelineRuns(ctx context.Context, tenantID string, f PipelineRunFilter, since, until time.Time, limit int) ([]*model.PipelineRun, error)
	// ListActivePipelineRuns returns the ids of the runs not yet ended.
	ListActivePipelineRuns(ctx context.Context, tenantID string) ([]string, error)
	// SetPipelineRunState moves a run to state to, with reason, only when
	// it is in one of the from states; it reports whether it did. A final
	// state sets the run's finish time to at.
	SetPipelineRunState(ctx context.Context, tenantID, id string, from []model.PipelineRunState, to model.PipelineRunState, reason string, at time.Time) (bool, error)
	// UpdatePipelineStep writes every mutable field of a step only when the
	// stored step is still in state from with fromAttempts attempts; it
	// reports whether it did. This is how two controllers never both move
	// one step.
	UpdatePipelineStep(ctx context.Context, tenantID string, s *model.PipelineStep, from model.PipelineStepState, fromAttempts int) (bool, error)
	// LinkPipelineTask records which step made a task; recording the
	// same task again changes nothing.
	LinkPipelineTask(ctx context.Context, l *model.PipelineTaskLink) error
	// GetPipelineTaskLink returns the step that made a task (ErrNotFound:
	// none did).
	GetPipelineTaskLink(ctx context.Context, tenantID, taskID string) (*model.PipelineTaskLink, error)
	// FindCachedPipelineStep returns the newest step that completed (not
	// cached itself) in another run of the named pipeline of the project,
	// with the same step name and cache key; ErrNotFound when none.
	FindCachedPipelineStep(ctx context.Context, tenantID, projectID, pipeline, step, cacheKey, exceptRunID string) (*model.PipelineStep, error)
}
