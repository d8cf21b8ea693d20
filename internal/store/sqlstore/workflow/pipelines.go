package workflow

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// Pipeline runs, their steps and the link from a task to the step that
// made it (migration 0023).

// pipelineRunTable is the pipeline_runs table: the definition and parameters as JSON.
var pipelineRunTable = sqlbase.Table[model.PipelineRun]{
	sqlbase.C("id", func(r *model.PipelineRun) any { return &r.ID }),
	sqlbase.C("tenant_id", func(r *model.PipelineRun) any { return &r.TenantID }),
	sqlbase.C("project_id", func(r *model.PipelineRun) any { return &r.ProjectID }),
	sqlbase.C("group_id", func(r *model.PipelineRun) any { return &r.GroupID }),
	sqlbase.C("owner_id", func(r *model.PipelineRun) any { return &r.OwnerID }),
	sqlbase.C("name", func(r *model.PipelineRun) any { return &r.Name }),
	sqlbase.C("definition", func(r *model.PipelineRun) any { return sqlbase.JSON(&r.Definition, "") }),
	sqlbase.C("params", func(r *model.PipelineRun) any { return sqlbase.Dict(&r.Params) }),
	sqlbase.C("state", func(r *model.PipelineRun) any { return sqlbase.Str(&r.State) }),
	sqlbase.C("reason", func(r *model.PipelineRun) any { return &r.Reason }),
	sqlbase.C("created_at", func(r *model.PipelineRun) any { return sqlbase.Time(&r.CreatedAt) }),
	sqlbase.C("updated_at", func(r *model.PipelineRun) any { return sqlbase.Time(&r.UpdatedAt) }),
	sqlbase.C("finished_at", func(r *model.PipelineRun) any { return sqlbase.TimePtr(&r.FinishedAt) }),
}

// pipelineStepTable is the pipeline_steps table but for its tenant_id,
// which a step has from its run. pipelineStepUpdate is what an update
// writes.
var pipelineStepTable = sqlbase.Table[model.PipelineStep]{
	sqlbase.C("run_id", func(s *model.PipelineStep) any { return &s.RunID }),
	sqlbase.C("name", func(s *model.PipelineStep) any { return &s.Name }),
	sqlbase.C("position", func(s *model.PipelineStep) any { return &s.Position }),
	sqlbase.C("state", func(s *model.PipelineStep) any { return sqlbase.Str(&s.State) }),
	sqlbase.C("compute_resource_id", func(s *model.PipelineStep) any { return &s.ComputeResourceID }),
	sqlbase.C("task_id", func(s *model.PipelineStep) any { return &s.TaskID }),
	sqlbase.C("task_ids", func(s *model.PipelineStep) any { return sqlbase.List(&s.TaskIDs) }),
	sqlbase.C("attempts", func(s *model.PipelineStep) any { return &s.Attempts }),
	sqlbase.C("cache_key", func(s *model.PipelineStep) any { return &s.CacheKey }),
	sqlbase.C("cached_from_run_id", func(s *model.PipelineStep) any { return &s.CachedFromRunID }),
	sqlbase.C("reason", func(s *model.PipelineStep) any { return &s.Reason }),
	sqlbase.C("started_at", func(s *model.PipelineStep) any { return sqlbase.TimePtr(&s.StartedAt) }),
	sqlbase.C("finished_at", func(s *model.PipelineStep) any { return sqlbase.TimePtr(&s.FinishedAt) }),
	sqlbase.C("updated_at", func(s *model.PipelineStep) any { return sqlbase.Time(&s.UpdatedAt) }),
}
var pipelineStepUpdate = pipelineStepTable.Without("run_id", "name", "position")

// CreatePipelineRun stores a run and its steps together.
func (q Workflows) CreatePipelineRun(ctx context.Context, r *model.PipelineRun) error {
	undo := sqlbase.AssignID(&r.ID)
	err := q.Atomic(ctx, func(c *sqlbase.Q) error {
		if _, err := c.Write(ctx, "create pipeline run "+r.Name, store.ErrNotFound,
			pipelineRunTable.Insert("pipeline_runs"), pipelineRunTable.Values(r)...); err != nil {
			return err
		}
		for _, s := range r.Steps {
			s.RunID = r.ID
			if _, err := c.Write(ctx, "create pipeline step "+s.Name, store.ErrNotFound,
				`INSERT INTO pipeline_steps (tenant_id, `+pipelineStepTable.List()+`) VALUES (?, `+sqlbase.Placeholders(len(pipelineStepTable))+`)`,
				append([]any{r.TenantID}, pipelineStepTable.Values(s)...)...); err != nil {
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
	r, err := sqlbase.GetOne(ctx, q.Q, "get pipeline run "+id, pipelineRunTable.Scan,
		`SELECT `+pipelineRunTable.List()+` FROM pipeline_runs WHERE tenant_id = ? AND id = ?`, tenantID, id)
	if err != nil {
		return nil, err
	}
	r.Steps, err = sqlbase.GetAll(ctx, q.Q, "list the steps of pipeline run "+id, pipelineStepTable.Scan,
		`SELECT `+pipelineStepTable.List()+` FROM pipeline_steps WHERE tenant_id = ? AND run_id = ? ORDER BY position`, tenantID, id)
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
	query, args := sqlbase.WithLimit(`SELECT `+pipelineRunTable.List()+` FROM pipeline_runs`+where+` ORDER BY id DESC`, args, page.Limit)
	return sqlbase.GetAll(ctx, q.Q, "list pipeline runs", pipelineRunTable.Scan, query, args...)
}

// ListFinishedPipelineRuns lists the runs that ended in (since, until];
// pipelineRunWhere is the WHERE clause of a filter of runs.
func (q Workflows) ListFinishedPipelineRuns(ctx context.Context, tenantID string, f store.PipelineRunFilter, since, until time.Time, limit int) ([]*model.PipelineRun, error) {
	where, args := pipelineRunWhere(tenantID, f)
	return sqlbase.GetAll(ctx, q.Q, "list finished pipeline runs", pipelineRunTable.Scan, `SELECT `+pipelineRunTable.List()+` FROM pipeline_runs`+where+
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
	n, err := q.Write(ctx, "update pipeline step "+s.Name, store.ErrNotFound,
		`UPDATE pipeline_steps SET `+pipelineStepUpdate.Assign()+` WHERE tenant_id = ? AND run_id = ? AND name = ? AND state = ? AND attempts = ?`,
		pipelineStepUpdate.Values(s, tenantID, s.RunID, s.Name, string(from), fromAttempts)...)
	return n == 1, err
}

// pipelineTaskTable is the pipeline_tasks table: the step that made a task.
var pipelineTaskTable = sqlbase.Table[model.PipelineTaskLink]{
	sqlbase.C("tenant_id", func(l *model.PipelineTaskLink) any { return &l.TenantID }),
	sqlbase.C("task_id", func(l *model.PipelineTaskLink) any { return &l.TaskID }),
	sqlbase.C("run_id", func(l *model.PipelineTaskLink) any { return &l.RunID }),
	sqlbase.C("step", func(l *model.PipelineTaskLink) any { return &l.Step }),
	sqlbase.C("attempt", func(l *model.PipelineTaskLink) any { return &l.Attempt }),
}

// LinkPipelineTask records the step that made a task, once.
func (q Workflows) LinkPipelineTask(ctx context.Context, l *model.PipelineTaskLink) error {
	_, err := q.Write(ctx, "link task "+l.TaskID+" to pipeline run "+l.RunID, store.ErrNotFound,
		pipelineTaskTable.Insert("pipeline_tasks")+` ON CONFLICT (tenant_id, task_id) DO NOTHING`, pipelineTaskTable.Values(l)...)
	return err
}

// GetPipelineTaskLink returns the step that made a task.
func (q Workflows) GetPipelineTaskLink(ctx context.Context, tenantID, taskID string) (*model.PipelineTaskLink, error) {
	return sqlbase.GetOne(ctx, q.Q, "get the pipeline step of task "+taskID, pipelineTaskTable.Scan,
		`SELECT `+pipelineTaskTable.List()+` FROM pipeline_tasks WHERE tenant_id = ? AND task_id = ?`, tenantID, taskID)
}

// FindCachedPipelineStep returns the newest completed step of the same
// name and key in another run of the pipeline.
func (q Workflows) FindCachedPipelineStep(ctx context.Context, tenantID, projectID, pipeline, step, cacheKey, exceptRunID string) (*model.PipelineStep, error) {
	return sqlbase.GetOne(ctx, q.Q, "find a cached result of pipeline step "+step, pipelineStepTable.Scan,
		`SELECT `+pipelineStepTable.As("s")+` FROM pipeline_steps s JOIN pipeline_runs r ON r.tenant_id = s.tenant_id AND r.id = s.run_id
		WHERE s.tenant_id = ? AND s.name = ? AND s.cache_key = ? AND s.state = ? AND r.project_id = ? AND r.name = ? AND r.id <> ?
		ORDER BY s.finished_at DESC LIMIT 1`,
		tenantID, step, cacheKey, string(model.StepCompleted), projectID, pipeline, exceptRunID)
}
