package workflow

import (
	"context"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// studyTable is the studies table: the spec as JSON.
var studyTable = sqlbase.Table[model.Study]{
	sqlbase.C("id", func(s *model.Study) any { return &s.ID }),
	sqlbase.C("tenant_id", func(s *model.Study) any { return &s.TenantID }),
	sqlbase.C("project_id", func(s *model.Study) any { return &s.ProjectID }),
	sqlbase.C("owner_id", func(s *model.Study) any { return &s.OwnerID }),
	sqlbase.C("group_id", func(s *model.Study) any { return &s.GroupID }),
	sqlbase.C("compute_resource_id", func(s *model.Study) any { return &s.ComputeResourceID }),
	sqlbase.C("name", func(s *model.Study) any { return &s.Name }),
	sqlbase.C("base_task_id", func(s *model.Study) any { return &s.BaseTaskID }),
	sqlbase.C("spec", func(s *model.Study) any { return sqlbase.JSON(&s.Spec, "") }),
	sqlbase.C("state", func(s *model.Study) any { return sqlbase.Str(&s.State) }),
	sqlbase.C("reason", func(s *model.Study) any { return &s.Reason }),
	sqlbase.C("best_task_id", func(s *model.Study) any { return &s.BestTaskID }),
	sqlbase.C("version", func(s *model.Study) any { return &s.Version }),
	sqlbase.C("created_at", func(s *model.Study) any { return sqlbase.Time(&s.CreatedAt) }),
	sqlbase.C("updated_at", func(s *model.Study) any { return sqlbase.Time(&s.UpdatedAt) }),
	sqlbase.C("finished_at", func(s *model.Study) any { return sqlbase.TimePtr(&s.FinishedAt) }),
}

// scanStudy reads a study, its search space a list even when empty.
func scanStudy(r sqlbase.Scanner) (*model.Study, error) {
	s, err := studyTable.Scan(r)
	if err == nil && s.Spec.Space == nil {
		s.Spec.Space = []model.SearchParam{}
	}
	return s, err
}

// CreateStudy stores a new study at version 0.
func (q Workflows) CreateStudy(ctx context.Context, s *model.Study) error {
	if s.ID == "" {
		s.ID = model.NewID()
	}
	s.Version = 0
	_, err := q.Write(ctx, "create study "+s.Name, store.ErrNotFound, studyTable.Insert("studies"), studyTable.Values(s)...)
	return err
}

// GetStudy reads one study of a tenant.
func (q Workflows) GetStudy(ctx context.Context, tenantID, id string) (*model.Study, error) {
	return sqlbase.GetOne(ctx, q.Q, "get study "+id, scanStudy,
		`SELECT `+studyTable.List()+` FROM studies WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListStudies lists a tenant's studies (of one project when set), newest
// first.
func (q Workflows) ListStudies(ctx context.Context, tenantID, projectID string) ([]*model.Study, error) {
	if projectID != "" {
		return sqlbase.GetAll(ctx, q.Q, "list studies", scanStudy,
			`SELECT `+studyTable.List()+` FROM studies WHERE tenant_id = ? AND project_id = ? ORDER BY created_at DESC, id DESC`, tenantID, projectID)
	}
	return sqlbase.GetAll(ctx, q.Q, "list studies", scanStudy,
		`SELECT `+studyTable.List()+` FROM studies WHERE tenant_id = ? ORDER BY created_at DESC, id DESC`, tenantID)
}

// ListRunningStudies lists every tenant's running studies.
func (q Workflows) ListRunningStudies(ctx context.Context) ([]*model.Study, error) {
	return sqlbase.GetAll(ctx, q.Q, "list running studies", scanStudy,
		`SELECT `+studyTable.List()+` FROM studies WHERE state = ? ORDER BY created_at, id`, string(model.StudyRunning))
}

// UpdateStudy writes a study still at the version read, and bumps it.
func (q Workflows) UpdateStudy(ctx context.Context, s *model.Study) error {
	n, err := q.Write(ctx, "update study "+s.ID, store.ErrNotFound,
		`UPDATE studies SET state = ?, reason = ?, best_task_id = ?, version = version + 1, updated_at = ?, finished_at = ?
		WHERE tenant_id = ? AND id = ? AND version = ?`,
		string(s.State), s.Reason, s.BestTaskID, sqlbase.Micros(s.UpdatedAt), sqlbase.NullMicros(s.FinishedAt), s.TenantID, s.ID, s.Version)
	if err != nil {
		return err
	}
	if n == 0 {
		if _, err := q.GetStudy(ctx, s.TenantID, s.ID); err != nil {
			return err
		}
		return fmt.Errorf("update study %s: changed since version %d: %w", s.ID, s.Version, store.ErrConflict)
	}
	s.Version++
	return nil
}

// trialTable is the study_trials table: a trial's task NULL until it has one.
var trialTable = sqlbase.Table[model.StudyTrial]{
	sqlbase.C("tenant_id", func(tr *model.StudyTrial) any { return &tr.TenantID }),
	sqlbase.C("study_id", func(tr *model.StudyTrial) any { return &tr.StudyID }),
	sqlbase.C("number", func(tr *model.StudyTrial) any { return &tr.Number }),
	sqlbase.C("task_id", func(tr *model.StudyTrial) any { return sqlbase.Ref(&tr.TaskID) }),
	sqlbase.C("params", func(tr *model.StudyTrial) any { return sqlbase.Dict(&tr.Params) }),
	sqlbase.C("state", func(tr *model.StudyTrial) any { return sqlbase.Str(&tr.State) }),
	sqlbase.C("rung", func(tr *model.StudyTrial) any { return &tr.Rung }),
	sqlbase.C("objective", func(tr *model.StudyTrial) any { return sqlbase.FloatPtr(&tr.Objective) }),
	sqlbase.C("objective_step", func(tr *model.StudyTrial) any { return &tr.ObjectiveStep }),
	sqlbase.C("reason", func(tr *model.StudyTrial) any { return &tr.Reason }),
	sqlbase.C("created_at", func(tr *model.StudyTrial) any { return sqlbase.Time(&tr.CreatedAt) }),
	sqlbase.C("ended_at", func(tr *model.StudyTrial) any { return sqlbase.TimePtr(&tr.EndedAt) }),
}

// CreateStudyTrial stores a trial; its number is unique in its study.
func (q Workflows) CreateStudyTrial(ctx context.Context, tr *model.StudyTrial) error {
	_, err := q.Write(ctx, fmt.Sprintf("create trial %d of study %s", tr.Number, tr.StudyID), store.ErrNotFound,
		trialTable.Insert("study_trials"), trialTable.Values(tr)...)
	return err
}

// UpdateStudyTrial writes a trial's changing fields.
func (q Workflows) UpdateStudyTrial(ctx context.Context, tr *model.StudyTrial) error {
	return q.WriteOne(ctx, fmt.Sprintf("update trial %d of study %s", tr.Number, tr.StudyID), store.ErrNotFound,
		`UPDATE study_trials SET task_id = COALESCE(?, task_id), state = ?, rung = ?, objective = ?, objective_step = ?, reason = ?, ended_at = ?
		WHERE tenant_id = ? AND study_id = ? AND number = ?`,
		sqlbase.NullString(tr.TaskID), string(tr.State), tr.Rung, sqlbase.NullFloat(tr.Objective), tr.ObjectiveStep, tr.Reason, sqlbase.NullMicros(tr.EndedAt),
		tr.TenantID, tr.StudyID, tr.Number)
}

// SetStudyTrialTask links a pending trial without a task to its task.
func (q Workflows) SetStudyTrialTask(ctx context.Context, tenantID, studyID string, number int, taskID string) (bool, error) {
	n, err := q.Write(ctx, fmt.Sprintf("link trial %d of study %s", number, studyID), store.ErrNotFound,
		`UPDATE study_trials SET task_id = ?, state = ? WHERE tenant_id = ? AND study_id = ? AND number = ? AND task_id IS NULL AND state = ?`,
		taskID, string(model.TrialRunning), tenantID, studyID, number, string(model.TrialPending))
	return n == 1, err
}

// ListStudyTrials lists a study's trials by number.
func (q Workflows) ListStudyTrials(ctx context.Context, tenantID, studyID string) ([]*model.StudyTrial, error) {
	return sqlbase.GetAll(ctx, q.Q, "list trials of study "+studyID, trialTable.Scan,
		`SELECT `+trialTable.List()+` FROM study_trials WHERE tenant_id = ? AND study_id = ? ORDER BY number`, tenantID, studyID)
}

// GetStudyTrialByTask returns the trial a task runs.
func (q Workflows) GetStudyTrialByTask(ctx context.Context, tenantID, taskID string) (*model.StudyTrial, error) {
	return sqlbase.GetOne(ctx, q.Q, "get the study trial of task "+taskID, trialTable.Scan,
		`SELECT `+trialTable.List()+` FROM study_trials WHERE tenant_id = ? AND task_id = ?`, tenantID, taskID)
}
