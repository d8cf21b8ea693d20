package mcp

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/studies"
)

// Platform is what the tools ask of the platform service: the operations
// MCP offers agents, nothing else. *platform.Service satisfies it.

type Platform interface {
	PipelinesPlatform
	CreateSchedule(ctx context.Context, in platform.ScheduleInput) (*model.Schedule, error)
	Schedules(ctx context.Context) ([]*model.Schedule, error)
	ScheduleWhen(sc *model.Schedule) string
	AbortTask(ctx context.Context, id string, reason string) (*model.Task, error)
	Apps(ctx context.Context) ([]*model.App, error)
	AppInstance(ctx context.Context, id string) (*model.AppInstance, error)
	LaunchApp(ctx context.Context, in platform.LaunchInput) (*model.AppInstance, error)
	StopApp(ctx context.Context, id string) (*model.AppInstance, error)
	CloneTask(ctx context.Context, id string, in platform.CloneInput) (*model.Task, error)
	EnqueueTask(ctx context.Context, in platform.EnqueueInput) (*model.Task, error)
	Estate(ctx context.Context) (*estate.Estate, error)
	ModelAliases(ctx context.Context, projectRef string) ([]*model.Alias, error)
	Now() time.Time
	PolicyViews(ctx context.Context, groupRef string) ([]*platform.PolicyView, error)
	QueueState(ctx context.Context, computeResourceID string) (*model.QueueState, error)
	QueuedTasks(ctx context.Context, computeResourceID string) (int, error)
	RecordToolCall(ctx context.Context, tool string, detail string) error
	Task(ctx context.Context, id string) (*model.Task, error)
	TaskLogs(ctx context.Context, t *model.Task, after int64, first int, tail int) (*platform.LogPage, error)
	TaskMetrics(ctx context.Context, t *model.Task, name string, after int64, first int, last bool) ([]model.MetricPoint, error)
	CompareTasks(ctx context.Context, ids []string) (*platform.Comparison, error)
	StartStudy(ctx context.Context, in studies.StartInput) (*model.Study, error)
	StudyView(ctx context.Context, id string) (*studies.View, error)
	TaskOwner(ctx context.Context, t *model.Task) (*model.User, error)
	TaskPosition(ctx context.Context, t *model.Task) (int, error)
	TaskProject(ctx context.Context, t *model.Task) (*model.Project, error)
	TaskReason(ctx context.Context, t *model.Task) (string, error)
	Tasks(ctx context.Context, f platform.TaskListFilter, page platform.Page) ([]*model.Task, error)
	Usage(ctx context.Context, in platform.UsageQuery) ([]platform.UsageRow, error)
	TokenBudgetViews(ctx context.Context, projectRef string) ([]*platform.TokenBudgetView, error)
	Worker(ctx context.Context, id string) (*platform.WorkerView, error)
}

// The service satisfies the interface.
var _ Platform = (*platform.Service)(nil)
