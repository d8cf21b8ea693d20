package store

import (
	"context"

	"github.com/klique-ai/klique/internal/model"
)

// StudyQueries keep hyperparameter searches and their trials. Embedded in
// Queries.
type StudyQueries interface {
	// CreateStudy stores a new study at version 0.
	CreateStudy(ctx context.Context, s *model.Study) error
	GetStudy(ctx context.Context, tenantID, id string) (*model.Study, error)
	// ListStudies lists a tenant's studies, of one project when projectID
	// is set, newest first.
	ListStudies(ctx context.Context, tenantID, projectID string) ([]*model.Study, error)
	// ListRunningStudies lists the running studies of every tenant, for
	// the controller's pass.
	ListRunningStudies(ctx context.Context) ([]*model.Study, error)
	// UpdateStudy writes the state, reason, best task and end time of a
	// study still at version s.Version, and bumps the version; a study
	// another writer changed since it was read is ErrConflict.
	UpdateStudy(ctx context.Context, s *model.Study) error
	// CreateStudyTrial stores a trial; ErrConflict when the study already
	// has a trial of that number.
	CreateStudyTrial(ctx context.Context, tr *model.StudyTrial) error
	// UpdateStudyTrial writes a trial's task, state, rung, objective,
	// reason and end.
	UpdateStudyTrial(ctx context.Context, tr *model.StudyTrial) error
	// SetStudyTrialTask links a pending trial to the task enqueued for
	// it; false when the trial already has a task.
	SetStudyTrialTask(ctx context.Context, tenantID, studyID string, number int, taskID string) (bool, error)
	// ListStudyTrials lists a study's trials by number.
	ListStudyTrials(ctx context.Context, tenantID, studyID string) ([]*model.StudyTrial, error)
	// GetStudyTrialByTask returns the trial a task runs, ErrNotFound when
	// no study made the task.
	GetStudyTrialByTask(ctx context.Context, tenantID, taskID string) (*model.StudyTrial, error)
}
