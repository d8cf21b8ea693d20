package mcp

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/studies"
)

// The platform, as the tools see it: one interface per domain, each holding
// only what this channel asks of that domain, so a tool's dependency on a
// domain is visible and small. *platform.Service satisfies every one
// (asserted below) and is passed for each (Platforms).

// AllocationPlatform is what the tools ask of the allocation domain: the
// estate (groups, projects, policies, pools, GPU classes, profiles, compute
// resources), the engine, queues and usage.
type AllocationPlatform interface {
	Estate(ctx context.Context) (*estate.Estate, error)
	// Now is the service's clock, for the usage window.
	Now() time.Time
	PolicyViews(ctx context.Context, groupRef string) ([]*platform.PolicyView, error)
	// PolicyTree is the policy view of the organisation tree, level by level.
	PolicyTree(ctx context.Context, rootRef string) ([]*platform.TreeNode, error)
	QueueState(ctx context.Context, computeResourceID string) (*model.QueueState, error)
	Usage(ctx context.Context, in platform.UsageQuery) ([]platform.UsageRow, error)
}

// TasksPlatform is what the tools ask of the tasks domain: enqueueing,
// cloning and aborting tasks, local runs, and reading tasks, their logs and
// metrics.
type TasksPlatform interface {
	AbortTask(ctx context.Context, id string, reason string) (*model.Task, error)
	CloneTask(ctx context.Context, id string, in platform.CloneInput) (*model.Task, error)
	EnqueueTask(ctx context.Context, in platform.EnqueueInput) (*model.Task, error)
	QueuedTasks(ctx context.Context, computeResourceID string) (int, error)
	MoveQueuedTask(ctx context.Context, in platform.QueueMove) (*platform.MovedTask, error)
	SetProjectPriorities(ctx context.Context, groupRef string, projectRefs []string) (*platform.ProjectPriority, error)
	Task(ctx context.Context, id string) (*model.Task, error)
	TaskLogs(ctx context.Context, t *model.Task, after int64, first int, tail int) (*platform.LogPage, error)
	TaskMetrics(ctx context.Context, t *model.Task, name string, after int64, first int, last bool) ([]model.MetricPoint, error)
	CompareTasks(ctx context.Context, ids []string) (*platform.Comparison, error)
	TaskOwner(ctx context.Context, t *model.Task) (*model.User, error)
	TaskPosition(ctx context.Context, t *model.Task) (int, error)
	TaskProject(ctx context.Context, t *model.Task) (*model.Project, error)
	TaskReason(ctx context.Context, t *model.Task) (string, error)
	Tasks(ctx context.Context, f platform.TaskListFilter, page platform.Page) ([]*model.Task, error)
}

// FleetPlatform is what the tools ask of the fleet domain: workers, their
// credentials and the pools' autoscalers.
type FleetPlatform interface {
	Worker(ctx context.Context, id string) (*platform.WorkerView, error)
}

// LLMPlatform is what the tools ask of the llm domain: the gateway's
// configuration (providers, models, aliases, routes, limits, budgets,
// guardrails) and what it saw.
type LLMPlatform interface {
	ModelAliases(ctx context.Context, projectRef string) ([]*model.Alias, error)
	TokenBudgetViews(ctx context.Context, projectRef string) ([]*platform.TokenBudgetView, error)
}

// AccessPlatform is what the tools ask of the access domain: tenants, users,
// memberships, API keys, secrets and the audit log.
type AccessPlatform interface {
	RecordToolCall(ctx context.Context, tool string, detail string) error
}

// AppsPlatform is what the tools ask of the apps domain: the app catalogue
// and app instances.
type AppsPlatform interface {
	Apps(ctx context.Context) ([]*model.App, error)
	AppInstance(ctx context.Context, id string) (*model.AppInstance, error)
	LaunchApp(ctx context.Context, in platform.LaunchInput) (*model.AppInstance, error)
	StopApp(ctx context.Context, id string) (*model.AppInstance, error)
}

// StudiesPlatform is what the tools ask of the studies domain:
// hyperparameter studies and their trials.
type StudiesPlatform interface {
	StartStudy(ctx context.Context, in studies.StartInput) (*model.Study, error)
	StudyView(ctx context.Context, id string) (*studies.View, error)
}

// SchedulesPlatform is what the tools ask of the schedules domain: schedules
// and their runs.
type SchedulesPlatform interface {
	CreateSchedule(ctx context.Context, in platform.ScheduleInput) (*model.Schedule, error)
	Schedules(ctx context.Context) ([]*model.Schedule, error)
	ScheduleWhen(sc *model.Schedule) string
}

// Platforms is the platform, one interface per domain.
type Platforms struct {
	Allocation AllocationPlatform
	Tasks      TasksPlatform
	Fleet      FleetPlatform
	LLM        LLMPlatform
	Access     AccessPlatform
	Apps       AppsPlatform
	Pipelines  PipelinesPlatform
	Studies    StudiesPlatform
	Schedules  SchedulesPlatform
}

// ServicePlatforms is svc seen through each domain's interface.
func ServicePlatforms(svc *platform.Service) Platforms {
	return Platforms{Allocation: svc, Tasks: svc, Fleet: svc, LLM: svc, Access: svc, Apps: svc, Pipelines: svc, Studies: svc, Schedules: svc}
}

// The service satisfies every domain's interface.
var (
	_ AllocationPlatform = (*platform.Service)(nil)
	_ TasksPlatform      = (*platform.Service)(nil)
	_ FleetPlatform      = (*platform.Service)(nil)
	_ LLMPlatform        = (*platform.Service)(nil)
	_ AccessPlatform     = (*platform.Service)(nil)
	_ AppsPlatform       = (*platform.Service)(nil)
	_ PipelinesPlatform  = (*platform.Service)(nil)
	_ StudiesPlatform    = (*platform.Service)(nil)
	_ SchedulesPlatform  = (*platform.Service)(nil)
)
