package workflow

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

const scheduleColumns = `id, tenant_id, owner_id, name, target_kind, target_id, parameters, cron, trigger_doc, missed_runs,
	paused, paused_reason, next_run_at, last_run_at, last_run_id, last_result, last_error, checked_at, created_at, updated_at, project_id`

func scanSchedule(r sqlbase.Scanner) (*model.Schedule, error) {
	var s model.Schedule
	var params, trigger string
	var next, last, checked sql.NullInt64
	var created, updated int64
	if err := r.Scan(&s.ID, &s.TenantID, &s.OwnerID, &s.Name, &s.TargetKind, &s.TargetID, &params, &s.Cron, &trigger,
		&s.MissedRuns, &s.Paused, &s.PausedReason, &next, &last, &s.LastRunID, &s.LastResult, &s.LastError, &checked,
		&created, &updated, &s.ProjectID); err != nil {
		return nil, err
	}
	var err error
	if s.Parameters, err = sqlbase.StringMap(params); err != nil {
		return nil, fmt.Errorf("schedule %s parameters: %w", s.ID, err)
	}
	if trigger != "" {
		s.Trigger = &model.ScheduleTrigger{}
		if err := json.Unmarshal([]byte(trigger), s.Trigger); err != nil {
			return nil, fmt.Errorf("schedule %s trigger: decode JSON: %w", s.ID, err)
		}
	}
	s.NextRunAt, s.LastRunAt, s.CheckedAt = sqlbase.NullTime(next), sqlbase.NullTime(last), sqlbase.NullTime(checked)
	s.CreatedAt, s.UpdatedAt = sqlbase.FromMicros(created), sqlbase.FromMicros(updated)
	return &s, nil
}

// scheduleDocs encodes a schedule's JSON columns.
func scheduleDocs(s *model.Schedule) (params, trigger string, err error) {
	if params, err = sqlbase.MarshalJSON(s.Parameters, "{}"); err != nil {
		return "", "", fmt.Errorf("encode parameters: %w", err)
	}
	if s.Trigger != nil {
		b, err := json.Marshal(s.Trigger)
		if err != nil {
			return "", "", fmt.Errorf("encode trigger: %w", err)
		}
		trigger = string(b)
	}
	return params, trigger, nil
}

// CreateSchedule stores a new schedule.
func (q Workflows) CreateSchedule(ctx context.Context, s *model.Schedule) error {
	what := "create schedule " + s.Name
	params, trigger, err := scheduleDocs(s)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	undo := sqlbase.AssignID(&s.ID)
	_, err = q.Write(ctx, what, store.ErrNotFound,
		`INSERT INTO schedules (`+scheduleColumns+`) VALUES (`+sqlbase.Placeholders(21)+`)`,
		s.ID, s.TenantID, s.OwnerID, s.Name, s.TargetKind, s.TargetID, params, s.Cron, trigger, s.MissedRuns,
		s.Paused, s.PausedReason, sqlbase.NullMicros(s.NextRunAt), sqlbase.NullMicros(s.LastRunAt), s.LastRunID, s.LastResult, s.LastError,
		sqlbase.NullMicros(s.CheckedAt), sqlbase.Micros(s.CreatedAt), sqlbase.Micros(s.UpdatedAt), s.ProjectID)
	if err != nil {
		undo()
	}
	return err
}

// UpdateSchedule writes a schedule whole, but for its owner and creation.
func (q Workflows) UpdateSchedule(ctx context.Context, s *model.Schedule) error {
	what := "update schedule " + s.ID
	params, trigger, err := scheduleDocs(s)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return q.WriteOne(ctx, what, store.ErrNotFound,
		`UPDATE schedules SET name = ?, target_kind = ?, target_id = ?, parameters = ?, cron = ?, trigger_doc = ?, missed_runs = ?,
			paused = ?, paused_reason = ?, next_run_at = ?, last_run_at = ?, last_run_id = ?, last_result = ?, last_error = ?,
			checked_at = ?, updated_at = ?, project_id = ?
		WHERE tenant_id = ? AND id = ?`,
		s.Name, s.TargetKind, s.TargetID, params, s.Cron, trigger, s.MissedRuns,
		s.Paused, s.PausedReason, sqlbase.NullMicros(s.NextRunAt), sqlbase.NullMicros(s.LastRunAt), s.LastRunID, s.LastResult, s.LastError,
		sqlbase.NullMicros(s.CheckedAt), sqlbase.Micros(s.UpdatedAt), s.ProjectID, s.TenantID, s.ID)
}

// DeleteSchedule removes a schedule and its firings.
func (q Workflows) DeleteSchedule(ctx context.Context, tenantID, id string) error {
	return q.Atomic(ctx, func(c *sqlbase.Q) error {
		q := Workflows{c}
		if _, err := q.Write(ctx, "delete the runs of schedule "+id, store.ErrConflict,
			`DELETE FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ?`, tenantID, id); err != nil {
			return err
		}
		return q.WriteOne(ctx, "delete schedule "+id, store.ErrConflict,
			`DELETE FROM schedules WHERE tenant_id = ? AND id = ?`, tenantID, id)
	})
}

// GetSchedule returns a schedule of the tenant.
func (q Workflows) GetSchedule(ctx context.Context, tenantID, id string) (*model.Schedule, error) {
	return sqlbase.GetOne(ctx, q.Q, "get schedule "+id, scanSchedule,
		`SELECT `+scheduleColumns+` FROM schedules WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListSchedules lists a tenant's schedules by name.
func (q Workflows) ListSchedules(ctx context.Context, tenantID string) ([]*model.Schedule, error) {
	return sqlbase.GetAll(ctx, q.Q, "list schedules", scanSchedule,
		`SELECT `+scheduleColumns+` FROM schedules WHERE tenant_id = ? ORDER BY name, id`, tenantID)
}

// ListActiveSchedules lists the schedules not paused, in every tenant.
func (q Workflows) ListActiveSchedules(ctx context.Context) ([]*model.Schedule, error) {
	return sqlbase.GetAll(ctx, q.Q, "list active schedules", scanSchedule,
		`SELECT `+scheduleColumns+` FROM schedules WHERE NOT paused ORDER BY tenant_id, id`)
}

// ClaimScheduleFiring moves next_run_at on from due, if it is still due.
func (q Workflows) ClaimScheduleFiring(ctx context.Context, s *model.Schedule, due time.Time) (bool, error) {
	n, err := q.Write(ctx, "claim a firing of schedule "+s.ID, store.ErrNotFound,
		`UPDATE schedules SET next_run_at = ?, last_run_at = ?, last_run_id = ?, last_result = ?, last_error = ?, updated_at = ?
		WHERE tenant_id = ? AND id = ? AND next_run_at = ? AND NOT paused`,
		sqlbase.NullMicros(s.NextRunAt), sqlbase.NullMicros(s.LastRunAt), s.LastRunID, s.LastResult, s.LastError, sqlbase.Micros(s.UpdatedAt),
		s.TenantID, s.ID, sqlbase.Micros(due))
	return n == 1, err
}

// AdvanceScheduleCheck moves checked_at on from old, if it is still old.
func (q Workflows) AdvanceScheduleCheck(ctx context.Context, tenantID, id string, old *time.Time, checked time.Time) (bool, error) {
	cond, args := `checked_at IS NULL`, []any{sqlbase.Micros(checked), tenantID, id}
	if old != nil {
		cond, args = `checked_at = ?`, append(args, sqlbase.Micros(*old))
	}
	n, err := q.Write(ctx, "advance the check of schedule "+id, store.ErrNotFound,
		`UPDATE schedules SET checked_at = ? WHERE tenant_id = ? AND id = ? AND NOT paused AND `+cond, args...)
	return n == 1, err
}

// NoteScheduleRun writes a schedule's last firing.
func (q Workflows) NoteScheduleRun(ctx context.Context, tenantID, id string, at time.Time, runID, result, lastError string) error {
	return q.WriteOne(ctx, "note a run of schedule "+id, store.ErrNotFound,
		`UPDATE schedules SET last_run_at = ?, last_run_id = ?, last_result = ?, last_error = ?, updated_at = ? WHERE tenant_id = ? AND id = ?`,
		sqlbase.Micros(at), runID, result, lastError, sqlbase.Micros(at), tenantID, id)
}

// PauseScheduleIf pauses a schedule that is not paused.
func (q Workflows) PauseScheduleIf(ctx context.Context, tenantID, id, reason string, at time.Time) (bool, error) {
	n, err := q.Write(ctx, "pause schedule "+id, store.ErrNotFound,
		`UPDATE schedules SET paused = ?, paused_reason = ?, next_run_at = NULL, updated_at = ? WHERE tenant_id = ? AND id = ? AND NOT paused`,
		true, reason, sqlbase.Micros(at), tenantID, id)
	return n == 1, err
}

// RecordScheduleRun records a firing unless its key is already recorded.
func (q Workflows) RecordScheduleRun(ctx context.Context, r *model.ScheduleRun) (bool, error) {
	n, err := q.Write(ctx, "record a run of schedule "+r.ScheduleID, store.ErrNotFound,
		`INSERT INTO schedule_runs (tenant_id, schedule_id, fire_key, target_kind, run_id, at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (schedule_id, fire_key) DO NOTHING`,
		r.TenantID, r.ScheduleID, r.Key, r.TargetKind, r.RunID, sqlbase.Micros(r.At))
	return n == 1, err
}

// GetScheduleRun returns a schedule's firing of a key.
func (q Workflows) GetScheduleRun(ctx context.Context, tenantID, scheduleID, key string) (*model.ScheduleRun, error) {
	return sqlbase.GetOne(ctx, q.Q, "get a run of schedule "+scheduleID, scanScheduleRun,
		`SELECT `+scheduleRunColumns+` FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? AND fire_key = ?`, tenantID, scheduleID, key)
}

const scheduleRunColumns = `tenant_id, schedule_id, fire_key, target_kind, run_id, at`

func scanScheduleRun(r sqlbase.Scanner) (*model.ScheduleRun, error) {
	var sr model.ScheduleRun
	var at int64
	if err := r.Scan(&sr.TenantID, &sr.ScheduleID, &sr.Key, &sr.TargetKind, &sr.RunID, &at); err != nil {
		return nil, err
	}
	sr.At = sqlbase.FromMicros(at)
	return &sr, nil
}

// ListScheduleRuns lists a schedule's firings, newest first.
func (q Workflows) ListScheduleRuns(ctx context.Context, tenantID, scheduleID string, limit int) ([]*model.ScheduleRun, error) {
	return sqlbase.GetAll(ctx, q.Q, "list the runs of schedule "+scheduleID, scanScheduleRun,
		`SELECT `+scheduleRunColumns+` FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? ORDER BY at DESC, fire_key DESC LIMIT ?`,
		tenantID, scheduleID, limit)
}

// CountScheduleRuns counts a schedule's firings since a time that started
// something.
func (q Workflows) CountScheduleRuns(ctx context.Context, tenantID, scheduleID string, since time.Time) (int, error) {
	var n int
	if err := q.QueryRow(ctx,
		`SELECT COUNT(*) FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? AND at > ? AND run_id <> ''`,
		tenantID, scheduleID, sqlbase.Micros(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the runs of schedule %s: %w", scheduleID, err)
	}
	return n, nil
}

// ScheduleRunsOf returns the firings that started the runs named.
func (q Workflows) ScheduleRunsOf(ctx context.Context, tenantID string, runIDs []string) (map[string]*model.ScheduleRun, error) {
	out := map[string]*model.ScheduleRun{}
	for len(runIDs) > 0 {
		chunk := runIDs[:min(len(runIDs), 500)]
		runIDs = runIDs[len(chunk):]
		args := []any{tenantID}
		for _, id := range chunk {
			args = append(args, id)
		}
		runs, err := sqlbase.GetAll(ctx, q.Q, "find the schedules of runs", scanScheduleRun,
			`SELECT `+scheduleRunColumns+` FROM schedule_runs WHERE tenant_id = ? AND run_id IN (`+sqlbase.Placeholders(len(chunk))+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			out[r.RunID] = r
		}
	}
	return out, nil
}
