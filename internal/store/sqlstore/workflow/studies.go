package workflow

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const studyColumns = `id, tenant_id, project_id, owner_id, group_id, compute_resource_id, name, base_task_id,
	spec, state, reason, best_task_id, version, created_at, updated_at, finished_at`

// CreateStudy stores a new study at version 0.
func (q Workflows) CreateStudy(ctx context.Context, s *model.Study) error {
	if s.ID == "" {
		s.ID = model.NewID()
	}
	spec, err := json.Marshal(s.Spec)
	if err != nil {
		return fmt.Errorf("create study: encode spec: %w", err)
	}
	s.Version = 0
	_, err = q.Write(ctx, "create study "+s.Name, store.ErrNotFound,
		`INSERT INTO studies (`+studyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.TenantID, s.ProjectID, s.OwnerID, s.GroupID, s.ComputeResourceID, s.Name, s.BaseTaskID,
		string(spec), string(s.State), s.Reason, s.BestTaskID, s.Version, sqlbase.Micros(s.CreatedAt), sqlbase.Micros(s.UpdatedAt), sqlbase.NullMicros(s.FinishedAt))
	return err
}

func scanStudy(r sqlbase.Scanner) (*model.Study, error) {
	var s model.Study
	var spec, state string
	var created, updated int64
	var finished sql.NullInt64
	if err := r.Scan(&s.ID, &s.TenantID, &s.ProjectID, &s.OwnerID, &s.GroupID, &s.ComputeResourceID, &s.Name, &s.BaseTaskID,
		&spec, &state, &s.Reason, &s.BestTaskID, &s.Version, &created, &updated, &finished); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(spec), &s.Spec); err != nil {
		return nil, fmt.Errorf("decode study spec: %w", err)
	}
	s.State, s.CreatedAt, s.UpdatedAt, s.FinishedAt = model.StudyState(state), sqlbase.FromMicros(created), sqlbase.FromMicros(updated), sqlbase.NullTime(finished)
	if s.Spec.Space == nil {
		s.Spec.Space = []model.SearchParam{}
	}
	return &s, nil
}

// GetStudy reads one study of a tenant.
func (q Workflows) GetStudy(ctx context.Context, tenantID, id string) (*model.Study, error) {
	return sqlbase.GetOne(ctx, q.Q, "get study "+id, scanStudy,
		`SELECT `+studyColumns+` FROM studies WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListStudies lists a tenant's studies (of one project when set), newest
// first.
func (q Workflows) ListStudies(ctx context.Context, tenantID, projectID string) ([]*model.Study, error) {
	if projectID != "" {
		return sqlbase.GetAll(ctx, q.Q, "list studies", scanStudy,
			`SELECT `+studyColumns+` FROM studies WHERE tenant_id = ? AND project_id = ? ORDER BY created_at DESC, id DESC`, tenantID, projectID)
	}
	return sqlbase.GetAll(ctx, q.Q, "list studies", scanStudy,
		`SELECT `+studyColumns+` FROM studies WHERE tenant_id = ? ORDER BY created_at DESC, id DESC`, tenantID)
}

// ListRunningStudies lists every tenant's running studies.
func (q Workflows) ListRunningStudies(ctx context.Context) ([]*model.Study, error) {
	return sqlbase.GetAll(ctx, q.Q, "list running studies", scanStudy,
		`SELECT `+studyColumns+` FROM studies WHERE state = ? ORDER BY created_at, id`, string(model.StudyRunning))
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

const trialColumns = `tenant_id, study_id, number, task_id, params, state, rung, objective, objective_step, reason, created_at, ended_at`

// CreateStudyTrial stores a trial; its number is unique in its study.
func (q Workflows) CreateStudyTrial(ctx context.Context, tr *model.StudyTrial) error {
	params, err := json.Marshal(tr.Params)
	if err != nil {
		return fmt.Errorf("create study trial: encode parameters: %w", err)
	}
	_, err = q.Write(ctx, fmt.Sprintf("create trial %d of study %s", tr.Number, tr.StudyID), store.ErrNotFound,
		`INSERT INTO study_trials (`+trialColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tr.TenantID, tr.StudyID, tr.Number, sqlbase.NullString(tr.TaskID), string(params), string(tr.State), tr.Rung,
		sqlbase.NullFloat(tr.Objective), tr.ObjectiveStep, tr.Reason, sqlbase.Micros(tr.CreatedAt), sqlbase.NullMicros(tr.EndedAt))
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

func scanTrial(r sqlbase.Scanner) (*model.StudyTrial, error) {
	var tr model.StudyTrial
	var task sql.NullString
	var params, state string
	var objective sql.NullFloat64
	var created int64
	var ended sql.NullInt64
	if err := r.Scan(&tr.TenantID, &tr.StudyID, &tr.Number, &task, &params, &state, &tr.Rung, &objective, &tr.ObjectiveStep,
		&tr.Reason, &created, &ended); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(params), &tr.Params); err != nil {
		return nil, fmt.Errorf("decode trial parameters: %w", err)
	}
	if tr.Params == nil {
		tr.Params = map[string]string{}
	}
	if objective.Valid {
		v := objective.Float64
		tr.Objective = &v
	}
	tr.TaskID, tr.State, tr.CreatedAt, tr.EndedAt = task.String, model.TrialState(state), sqlbase.FromMicros(created), sqlbase.NullTime(ended)
	return &tr, nil
}

// ListStudyTrials lists a study's trials by number.
func (q Workflows) ListStudyTrials(ctx context.Context, tenantID, studyID string) ([]*model.StudyTrial, error) {
	return sqlbase.GetAll(ctx, q.Q, "list trials of study "+studyID, scanTrial,
		`SELECT `+trialColumns+` FROM study_trials WHERE tenant_id = ? AND study_id = ? ORDER BY number`, tenantID, studyID)
}

// GetStudyTrialByTask returns the trial a task runs.
func (q Workflows) GetStudyTrialByTask(ctx context.Context, tenantID, taskID string) (*model.StudyTrial, error) {
	return sqlbase.GetOne(ctx, q.Q, "get the study trial of task "+taskID, scanTrial,
		`SELECT `+trialColumns+` FROM study_trials WHERE tenant_id = ? AND task_id = ?`, tenantID, taskID)
}
