package workflow

import (
	"context"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// scheduleTable is the schedules table: parameters and trigger as JSON
// ("" for no trigger). scheduleUpdate is what an update writes: all but
// the owner and the creation.
var scheduleTable = sqlbase.Table[model.Schedule]{
	sqlbase.C("id", func(s *model.Schedule) any { return &s.ID }),
	sqlbase.C("tenant_id", func(s *model.Schedule) any { return &s.TenantID }),
	sqlbase.C("owner_id", func(s *model.Schedule) any { return &s.OwnerID }),
	sqlbase.C("name", func(s *model.Schedule) any { return &s.Name }),
	sqlbase.C("target_kind", func(s *model.Schedule) any { return &s.TargetKind }),
	sqlbase.C("target_id", func(s *model.Schedule) any { return &s.TargetID }),
	sqlbase.C("parameters", func(s *model.Schedule) any { return sqlbase.Dict(&s.Parameters) }),
	sqlbase.C("cron", func(s *model.Schedule) any { return &s.Cron }),
	sqlbase.C("trigger_doc", func(s *model.Schedule) any { return sqlbase.JSON(&s.Trigger, "") }),
	sqlbase.C("missed_runs", func(s *model.Schedule) any { return &s.MissedRuns }),
	sqlbase.C("paused", func(s *model.Schedule) any { return &s.Paused }),
	sqlbase.C("paused_reason", func(s *model.Schedule) any { return &s.PausedReason }),
	sqlbase.C("next_run_at", func(s *model.Schedule) any { return sqlbase.TimePtr(&s.NextRunAt) }),
	sqlbase.C("last_run_at", func(s *model.Schedule) any { return sqlbase.TimePtr(&s.LastRunAt) }),
	sqlbase.C("last_run_id", func(s *model.Schedule) any { return &s.LastRunID }),
	sqlbase.C("last_result", func(s *model.Schedule) any { return &s.LastResult }),
	sqlbase.C("last_error", func(s *model.Schedule) any { return &s.LastError }),
	sqlbase.C("checked_at", func(s *model.Schedule) any { return sqlbase.TimePtr(&s.CheckedAt) }),
	sqlbase.C("created_at", func(s *model.Schedule) any { return sqlbase.Time(&s.CreatedAt) }),
	sqlbase.C("updated_at", func(s *model.Schedule) any { return sqlbase.Time(&s.UpdatedAt) }),
	sqlbase.C("project_id", func(s *model.Schedule) any { return &s.ProjectID }),
}
var scheduleUpdate = scheduleTable.Without("id", "tenant_id", "owner_id", "created_at")

// CreateSchedule stores a new schedule.
func (q Workflows) CreateSchedule(ctx context.Context, s *model.Schedule) error {
	undo := sqlbase.AssignID(&s.ID)
	_, err := q.Write(ctx, "create schedule "+s.Name, store.ErrNotFound, scheduleTable.Insert("schedules"), scheduleTable.Values(s)...)
	if err != nil {
		undo()
	}
	return err
}

// UpdateSchedule writes a schedule whole, but for its owner and creation.
func (q Workflows) UpdateSchedule(ctx context.Context, s *model.Schedule) error {
	return q.WriteOne(ctx, "update schedule "+s.ID, store.ErrNotFound,
		`UPDATE schedules SET `+scheduleUpdate.Assign()+` WHERE tenant_id = ? AND id = ?`, scheduleUpdate.Values(s, s.TenantID, s.ID)...)
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
	return sqlbase.GetOne(ctx, q.Q, "get schedule "+id, scheduleTable.Scan,
		`SELECT `+scheduleTable.List()+` FROM schedules WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListSchedules lists a tenant's schedules by name.
func (q Workflows) ListSchedules(ctx context.Context, tenantID string) ([]*model.Schedule, error) {
	return sqlbase.GetAll(ctx, q.Q, "list schedules", scheduleTable.Scan,
		`SELECT `+scheduleTable.List()+` FROM schedules WHERE tenant_id = ? ORDER BY name, id`, tenantID)
}

// ListActiveSchedules lists the schedules not paused, in every tenant.
func (q Workflows) ListActiveSchedules(ctx context.Context) ([]*model.Schedule, error) {
	return sqlbase.GetAll(ctx, q.Q, "list active schedules", scheduleTable.Scan,
		`SELECT `+scheduleTable.List()+` FROM schedules WHERE NOT paused ORDER BY tenant_id, id`)
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
		scheduleRunTable.Insert("schedule_runs")+`
		ON CONFLICT (schedule_id, fire_key) DO NOTHING`,
		scheduleRunTable.Values(r)...)
	return n == 1, err
}

// GetScheduleRun returns a schedule's firing of a key.
func (q Workflows) GetScheduleRun(ctx context.Context, tenantID, scheduleID, key string) (*model.ScheduleRun, error) {
	return sqlbase.GetOne(ctx, q.Q, "get a run of schedule "+scheduleID, scheduleRunTable.Scan,
		`SELECT `+scheduleRunTable.List()+` FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? AND fire_key = ?`, tenantID, scheduleID, key)
}

// scheduleRunTable is the schedule_runs table: a schedule's firings.
var scheduleRunTable = sqlbase.Table[model.ScheduleRun]{
	sqlbase.C("tenant_id", func(r *model.ScheduleRun) any { return &r.TenantID }),
	sqlbase.C("schedule_id", func(r *model.ScheduleRun) any { return &r.ScheduleID }),
	sqlbase.C("fire_key", func(r *model.ScheduleRun) any { return &r.Key }),
	sqlbase.C("target_kind", func(r *model.ScheduleRun) any { return &r.TargetKind }),
	sqlbase.C("run_id", func(r *model.ScheduleRun) any { return &r.RunID }),
	sqlbase.C("at", func(r *model.ScheduleRun) any { return sqlbase.Time(&r.At) }),
}

// ListScheduleRuns lists a schedule's firings, newest first.
func (q Workflows) ListScheduleRuns(ctx context.Context, tenantID, scheduleID string, limit int) ([]*model.ScheduleRun, error) {
	return sqlbase.GetAll(ctx, q.Q, "list the runs of schedule "+scheduleID, scheduleRunTable.Scan,
		`SELECT `+scheduleRunTable.List()+` FROM schedule_runs WHERE tenant_id = ? AND schedule_id = ? ORDER BY at DESC, fire_key DESC LIMIT ?`,
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
		runs, err := sqlbase.GetAll(ctx, q.Q, "find the schedules of runs", scheduleRunTable.Scan,
			`SELECT `+scheduleRunTable.List()+` FROM schedule_runs WHERE tenant_id = ? AND run_id IN (`+sqlbase.Placeholders(len(chunk))+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			out[r.RunID] = r
		}
	}
	return out, nil
}
