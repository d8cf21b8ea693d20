package workflow

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// Pipeline runs, their steps and the link from a task to the step that
// made it (migration 0023).

const pipelineRunColumns = `id, tenant_id, project_id, group_id, owner_id, name, definition, params, state, reason, created_at, updated_at, finished_at`

const pipelineStepColumns = `run_id, name, position, state, compute_resource_id, task_id, task_ids, attempts, cache_key, cached_from_run_id, reason, started_at, finished_at, updated_at`

func scanPipelineRun(r sqlbase.Scanner) (*model.PipelineRun, error) {
	var p model.PipelineRun
	var def, params, state string
	var created, updated int64
	var finished sql.NullInt64
	if err := r.Scan(&p.ID, &p.TenantID, &p.ProjectID, &p.GroupID, &p.OwnerID, &p.Name, &def, &params, &state, &p.Reason,
		&created, &updated, &finished); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(def), &p.Definition); err != nil {
		return nil, fmt.Errorf("pipeline run %s definition: decode JSON: %w", p.ID, err)
	}
	m, err := sqlbase.StringMap(params)
	if err != nil {
		return nil, fmt.Errorf("pipeline run %s params: %w", p.ID, err)
	}
	p.Params, p.State = m, model.PipelineRunState(state)
	p.CreatedAt, p.UpdatedAt, p.FinishedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated), sqlbase.NullTime(finished)
	return &p, nil
}

func scanPipelineStep(r sqlbase.Scanner) (*model.PipelineStep, error) {
	var s model.PipelineStep
	var state, taskIDs string
	var updated int64
	var started, finished sql.NullInt64
	if err := r.Scan(&s.RunID, &s.Name, &s.Position, &state, &s.ComputeResourceID, &s.TaskID, &taskIDs, &s.Attempts,
		&s.CacheKey, &s.CachedFromRunID, &s.Reason, &started, &finished, &updated); err != nil {
		return nil, err
	}
	ids, err := sqlbase.StringSlice(taskIDs)
	if err != nil {
		return nil, fmt.Errorf("pipeline step %s task ids: %w", s.Name, err)
	}
	s.State, s.TaskIDs = model.PipelineStepState(state), ids
	s.StartedAt, s.FinishedAt, s.UpdatedAt = sqlbase.NullTime(started), sqlbase.NullTime(finished), sqlbase.FromMicros(updated)
	return &s, nil
}

// CreatePipelineRun stores a run and its steps together.
func (q Workflows) CreatePipelineRun(ctx context.Context, r *model.PipelineRun) error {
	def, err := json.Marshal(r.Definition)
	if err != nil {
		return fmt.Errorf("create pipeline run %s: encode definition: %w", r.Name, err)
	}
	params, err := sqlbase.MarshalJSON(r.Params, "{}")
	if err != nil {
		return fmt.Errorf("create pipeline run %s: encode params: %w", r.Name, err)
	}
	undo := sqlbase.AssignID(&r.ID)
	err = q.Atomic(ctx, func(c *sqlbase.Q) error {
		q := Workflows{c}
		if _, err := q.Write(ctx, "create pipeline run "+r.Name, store.ErrNotFound,
			`INSERT INTO pipeline_runs (`+pipelineRunColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.TenantID, r.ProjectID, r.GroupID, r.OwnerID, r.Name, string(def), params, string(r.State), r.Reason,
			sqlbase.Micros(r.CreatedAt), sqlbase.Micros(r.UpdatedAt), sqlbase.NullMicros(r.FinishedAt)); err != nil {
			return err
		}
		for _, s := range r.Steps {
			s.RunID = r.ID
			ids, err := sqlbase.MarshalJSON(s.TaskIDs, "[]")
			if err != nil {
				return fmt.Errorf("create pipeline step %s: encode task ids: %w", s.Name, err)
			}
			if _, err := q.Write(ctx, "create pipeline step "+s.Name, store.ErrNotFound,
				`INSERT INTO pipeline_steps (tenant_id, `+pipelineStepColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.TenantID, s.RunID, s.Name, s.Position, string(s.State), s.ComputeResourceID, s.TaskID, ids, s.Attempts,
				s.CacheKey, s.CachedFromRunID, s.Reason, sqlbase.NullMicros(s.StartedAt), sqlbase.NullMicros(s.FinishedAt), sqlbase.Micros(s.UpdatedAt)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		undo()
	}
	return err
}

// GetPipelineRun returns a run with its steps.
func (q Workflows) GetPipelineRun(ctx context.Context, tenantID, id string) (*model.PipelineRun, error) {
	r, err := sqlbase.GetOne(ctx, q.Q, "get pipeline run "+id, scanPipelineRun,
		`SELECT `+pipelineRunColumns+` FROM pipeline_runs WHERE tenant_id = ? AND id = ?`, tenantID, id)
	if err != nil {
		return nil, err
	}
	r.Steps, err = sqlbase.GetAll(ctx, q.Q, "list the steps of pipeline run "+id, scanPipelineStep,
		`SELECT `+pipelineStepColumns+` FROM pipeline_steps WHERE tenant_id = ? AND run_id = ? ORDER BY position`, tenantID, id)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ListPipelineRuns lists runs newest first (ids are time-ordered).
func (q Workflows) ListPipelineRuns(ctx context.Context, tenantID string, f store.PipelineRunFilter, page store.Page) ([]*model.PipelineRun, error) {
	where, args := pipelineRunWhere(tenantID, f)
	if page.After != "" {
		where, args = where+` AND id < ?`, append(args, page.After)
	}
	query, args := sqlbase.WithLimit(`SELECT `+pipelineRunColumns+` FROM pipeline_runs`+where+` ORDER BY id DESC`, args, page.Limit)
	return sqlbase.GetAll(ctx, q.Q, "list pipeline runs", scanPipelineRun, query, args...)
}

// ListFinishedPipelineRuns lists the runs that ended in (since, until];
// pipelineRunWhere is the WHERE clause of a filter of runs.
func (q Workflows) ListFinishedPipelineRuns(ctx context.Context, tenantID string, f store.PipelineRunFilter, since, until time.Time, limit int) ([]*model.PipelineRun, error) {
	where, args := pipelineRunWhere(tenantID, f)
	return sqlbase.GetAll(ctx, q.Q, "list finished pipeline runs", scanPipelineRun, `SELECT `+pipelineRunColumns+` FROM pipeline_runs`+where+
		` AND finished_at > ? AND finished_at <= ? ORDER BY finished_at, id LIMIT ?`, append(args, sqlbase.Micros(since), sqlbase.Micros(until), limit)...)
}

func pipelineRunWhere(tenantID string, f store.PipelineRunFilter) (string, []any) {
	where, args := ` WHERE tenant_id = ?`, []any{tenantID}
	if f.ProjectID != "" {
		where, args = where+` AND project_id = ?`, append(args, f.ProjectID)
	}
	if f.Name != "" {
		where, args = where+` AND name = ?`, append(args, f.Name)
	}
	if len(f.States) > 0 {
		where += ` AND state IN (` + sqlbase.Placeholders(len(f.States)) + `)`
		for _, s := range f.States {
			args = append(args, string(s))
		}
	}
	vis, vargs := sqlbase.VisibleTo("", f.RestrictToGroups, f.GroupIDs, f.VisibleToUserID)
	return where + vis, append(args, vargs...)
}

// ListActivePipelineRuns returns the ids of the runs not yet ended.
func (q Workflows) ListActivePipelineRuns(ctx context.Context, tenantID string) ([]string, error) {
	return sqlbase.GetAll(ctx, q.Q, "list active pipeline runs", func(r sqlbase.Scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT id FROM pipeline_runs WHERE tenant_id = ? AND state IN (?, ?) ORDER BY id`,
		tenantID, string(model.PipelineRunPending), string(model.PipelineRunRunning))
}

// SetPipelineRunState moves a run from one of the from states to to.
func (q Workflows) SetPipelineRunState(ctx context.Context, tenantID, id string, from []model.PipelineRunState, to model.PipelineRunState, reason string, at time.Time) (bool, error) {
	if len(from) == 0 {
		return false, nil
	}
	var finished any
	if to.Final() {
		finished = sqlbase.Micros(at)
	}
	args := []any{string(to), reason, sqlbase.Micros(at), finished, tenantID, id}
	for _, s := range from {
		args = append(args, string(s))
	}
	n, err := q.Write(ctx, "set the state of pipeline run "+id, store.ErrNotFound,
		`UPDATE pipeline_runs SET state = ?, reason = ?, updated_at = ?, finished_at = ? WHERE tenant_id = ? AND id = ? AND state IN (`+sqlbase.Placeholders(len(from))+`)`,
		args...)
	return n == 1, err
}

// UpdatePipelineStep writes a step when it is still as the caller read it.
func (q Workflows) UpdatePipelineStep(ctx context.Context, tenantID string, s *model.PipelineStep, from model.PipelineStepState, fromAttempts int) (bool, error) {
	ids, err := sqlbase.MarshalJSON(s.TaskIDs, "[]")
	if err != nil {
		return false, fmt.Errorf("update pipeline step %s: encode task ids: %w", s.Name, err)
	}
	n, err := q.Write(ctx, "update pipeline step "+s.Name, store.ErrNotFound,
		`UPDATE pipeline_steps SET state = ?, compute_resource_id = ?, task_id = ?, task_ids = ?, attempts = ?, cache_key = ?,
		cached_from_run_id = ?, reason = ?, started_at = ?, finished_at = ?, updated_at = ?
		WHERE tenant_id = ? AND run_id = ? AND name = ? AND state = ? AND attempts = ?`,
		string(s.State), s.ComputeResourceID, s.TaskID, ids, s.Attempts, s.CacheKey, s.CachedFromRunID, s.Reason,
		sqlbase.NullMicros(s.StartedAt), sqlbase.NullMicros(s.FinishedAt), sqlbase.Micros(s.UpdatedAt),
		tenantID, s.RunID, s.Name, string(from), fromAttempts)
	return n == 1, err
}

// LinkPipelineTask records the step that made a task, once.
func (q Workflows) LinkPipelineTask(ctx context.Context, l *model.PipelineTaskLink) error {
	_, err := q.Write(ctx, "link task "+l.TaskID+" to pipeline run "+l.RunID, store.ErrNotFound,
		`INSERT INTO pipeline_tasks (tenant_id, task_id, run_id, step, attempt) VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, task_id) DO NOTHING`,
		l.TenantID, l.TaskID, l.RunID, l.Step, l.Attempt)
	return err
}

// GetPipelineTaskLink returns the step that made a task.
func (q Workflows) GetPipelineTaskLink(ctx context.Context, tenantID, taskID string) (*model.PipelineTaskLink, error) {
	return sqlbase.GetOne(ctx, q.Q, "get the pipeline step of task "+taskID, func(r sqlbase.Scanner) (*model.PipelineTaskLink, error) {
		var l model.PipelineTaskLink
		return &l, r.Scan(&l.TenantID, &l.TaskID, &l.RunID, &l.Step, &l.Attempt)
	}, `SELECT tenant_id, task_id, run_id, step, attempt FROM pipeline_tasks WHERE tenant_id = ? AND task_id = ?`, tenantID, taskID)
}

// FindCachedPipelineStep returns the newest completed step of the same
// name and key in another run of the pipeline.
func (q Workflows) FindCachedPipelineStep(ctx context.Context, tenantID, projectID, pipeline, step, cacheKey, exceptRunID string) (*model.PipelineStep, error) {
	cols := strings.ReplaceAll("s."+pipelineStepColumns, ", ", ", s.")
	return sqlbase.GetOne(ctx, q.Q, "find a cached result of pipeline step "+step, scanPipelineStep,
		`SELECT `+cols+` FROM pipeline_steps s JOIN pipeline_runs r ON r.tenant_id = s.tenant_id AND r.id = s.run_id
		WHERE s.tenant_id = ? AND s.name = ? AND s.cache_key = ? AND s.state = ? AND r.project_id = ? AND r.name = ? AND r.id <> ?
		ORDER BY s.finished_at DESC LIMIT 1`,
		tenantID, step, cacheKey, string(model.StepCompleted), projectID, pipeline, exceptRunID)
}
