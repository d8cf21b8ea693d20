package store

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// ScheduleQueries keep schedules and their firings (docs/schedules.md).
// Embedded in Queries.
type ScheduleQueries interface {
	// CreateSchedule returns ErrConflict when the owner already has a
	// schedule of that name.
	CreateSchedule(ctx context.Context, s *model.Schedule) error
	// UpdateSchedule writes every field but the owner, tenant and
	// creation time.
	UpdateSchedule(ctx context.Context, s *model.Schedule) error
	DeleteSchedule(ctx context.Context, tenantID, id string) error
	GetSchedule(ctx context.Context, tenantID, id string) (*model.Schedule, error)
	// ListSchedules orders a tenant's schedules by name, then id.
	ListSchedules(ctx context.Context, tenantID string) ([]*model.Schedule, error)
	// ListActiveSchedules lists the schedules that are not paused, in
	// every tenant: what the pass looks at.
	ListActiveSchedules(ctx context.Context) ([]*model.Schedule, error)
	// ClaimScheduleFiring moves a cron schedule's next firing from due to
	// next (nil: none) and records the last firing, only if its next
	// firing is still due and it is not paused: the conditional write
	// that makes replicas fire once. It reports whether it wrote.
	ClaimScheduleFiring(ctx context.Context, s *model.Schedule, due time.Time) (bool, error)
	// AdvanceScheduleCheck moves a trigger schedule's CheckedAt from old
	// (nil: never checked) to checked, only if it is still old and the
	// schedule is not paused. It reports whether it wrote.
	AdvanceScheduleCheck(ctx context.Context, tenantID, id string, old *time.Time, checked time.Time) (bool, error)
	// NoteScheduleRun writes what a schedule's last firing was: when,
	// what it started, its result and error.
	NoteScheduleRun(ctx context.Context, tenantID, id string, at time.Time, runID, result, lastError string) error
	// PauseScheduleIf pauses a schedule with a reason unless it is
	// already paused; it reports whether it wrote.
	PauseScheduleIf(ctx context.Context, tenantID, id, reason string, at time.Time) (bool, error)
	// GetScheduleRun returns a schedule's firing of a key (ErrNotFound:
	// none).
	GetScheduleRun(ctx context.Context, tenantID, scheduleID, key string) (*model.ScheduleRun, error)
	// RecordScheduleRun records a firing once: it reports false, writing
	// nothing, when the schedule already has a run with the key.
	RecordScheduleRun(ctx context.Context, r *model.ScheduleRun) (bool, error)
	// ListScheduleRuns lists a schedule's firings, newest first, at most
	// limit.
	ListScheduleRuns(ctx context.Context, tenantID, scheduleID string, limit int) ([]*model.ScheduleRun, error)
	// CountScheduleRuns counts a schedule's firings after since that
	// started something (a run id): what the cap on a trigger's runs per
	// hour counts.
	CountScheduleRuns(ctx context.Context, tenantID, scheduleID string, since time.Time) (int, error)
	// ScheduleRunsOf returns the firings that started the given runs
	// (task, pipeline run or study ids), by run id.
	ScheduleRunsOf(ctx context.Context, tenantID string, runIDs []string) (map[string]*model.ScheduleRun, error)
	// ListFinishedTasks lists a project's tasks with a tag that finished
	// in the status after since (exclusive) and at or before until, by
	// finish time then id, at most limit: what a task trigger matches.
	ListFinishedTasks(ctx context.Context, tenantID, projectID, tag string, status model.TaskStatus, since, until time.Time, limit int) ([]*model.Task, error)
}
