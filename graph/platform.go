package graph

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/live"
	"github.com/klique-ai/klique/internal/platform/llm"
	"github.com/klique-ai/klique/internal/platform/studies"
)

// The platform, as the resolvers see it: one interface per domain, each
// holding only what this channel asks of that domain, so a resolver's
// dependency on a domain is visible and small. *platform.Service satisfies
// every one (asserted below) and is passed for each (Platforms).

// AllocationPlatform is what the resolvers ask of the allocation domain: the
// estate (groups, projects, policies, pools, GPU classes, profiles, compute
// resources), the engine, queues and usage.
type AllocationPlatform interface {
	ApplyEstate(ctx context.Context, document []byte, dryRun bool) (*platform.EstateResult, error)
	ComputeResource(ctx context.Context, id string) (*model.ComputeResource, error)
	ConnectProfile(ctx context.Context, in platform.ConnectInput) (*platform.EstateResult, error)
	CreateGPUClass(ctx context.Context, in platform.GPUClassInput) (*platform.EstateResult, error)
	CreateGroup(ctx context.Context, in platform.GroupInput) (*platform.EstateResult, error)
	CreatePolicy(ctx context.Context, in platform.PolicyInput) (*platform.EstateResult, error)
	CreatePool(ctx context.Context, in platform.PoolInput) (*platform.EstateResult, error)
	CreateProfile(ctx context.Context, in platform.ProfileInput) (*platform.EstateResult, error)
	CreateProject(ctx context.Context, in platform.ProjectInput) (*platform.EstateResult, error)
	DeleteGPUClass(ctx context.Context, ref string) (*platform.EstateResult, error)
	Department(ctx context.Context, ref string) (*model.Group, error)
	DepartmentChildren(ctx context.Context, id string) (departments, groups []*model.Group, err error)
	Departments(ctx context.Context) ([]*model.Group, error)
	PolicyTree(ctx context.Context, rootRef string) ([]*platform.TreeNode, error)
	DeleteGroup(ctx context.Context, ref string) (*platform.EstateResult, error)
	DeletePolicy(ctx context.Context, ref string) (*platform.EstateResult, error)
	DeletePool(ctx context.Context, ref string) (*platform.EstateResult, error)
	DeleteProfile(ctx context.Context, ref string) (*platform.EstateResult, error)
	DeleteProject(ctx context.Context, ref string) (*platform.EstateResult, error)
	DisconnectProfile(ctx context.Context, id string) (*platform.EstateResult, error)
	EngineStatus(ctx context.Context) (*platform.EngineStatus, error)
	Estate(ctx context.Context) (*estate.Estate, error)
	EstateWarnings(ctx context.Context) ([]estate.Warning, error)
	ExportEstate(ctx context.Context) ([]byte, error)
	GPUClass(ctx context.Context, ref string) (*model.GPUClass, error)
	Group(ctx context.Context, ref string) (*model.Group, error)
	OverBudget(ctx context.Context, cr *model.ComputeResource) (bool, error)
	ParentDepartment(ctx context.Context, g *model.Group) (*model.Group, error)
	Policy(ctx context.Context, ref string) (*model.ResourcePolicy, error)
	PolicyViews(ctx context.Context, groupRef string) ([]*platform.PolicyView, error)
	Pool(ctx context.Context, ref string) (*model.Pool, error)
	Profile(ctx context.Context, ref string) (*model.Profile, error)
	Project(ctx context.Context, ref string) (*model.Project, error)
	QueueState(ctx context.Context, computeResourceID string) (*model.QueueState, error)
	SetEngineEnabled(ctx context.Context, enabled bool) (*platform.EngineStatus, error)
	TreeLimits(ctx context.Context, id string) (*platform.NodeLimits, error)
	UpdateComputeResource(ctx context.Context, id string, in platform.ComputeResourceInput) (*platform.EstateResult, error)
	UpdateGPUClass(ctx context.Context, ref string, in platform.GPUClassInput) (*platform.EstateResult, error)
	UpdateGroup(ctx context.Context, ref string, in platform.GroupInput) (*platform.EstateResult, error)
	UpdatePolicy(ctx context.Context, ref string, in platform.PolicyInput) (*platform.EstateResult, error)
	UpdatePool(ctx context.Context, ref string, in platform.PoolInput) (*platform.EstateResult, error)
	UpdateProfile(ctx context.Context, ref string, in platform.ProfileInput) (*platform.EstateResult, error)
	UpdateProject(ctx context.Context, ref string, in platform.ProjectInput) (*platform.EstateResult, error)
	Usage(ctx context.Context, in platform.UsageQuery) ([]platform.UsageRow, error)
}

// TasksPlatform is what the resolvers ask of the tasks domain: enqueueing,
// cloning and aborting tasks, local runs, and reading tasks, their logs and
// metrics.
type TasksPlatform interface {
	AbortTask(ctx context.Context, id string, reason string) (*model.Task, error)
	CloneTask(ctx context.Context, id string, in platform.CloneInput) (*model.Task, error)
	EnqueueTask(ctx context.Context, in platform.EnqueueInput) (*model.Task, error)
	StartLocalRun(ctx context.Context, in platform.LocalRunInput) (*model.Task, error)
	ReportLocalRun(ctx context.Context, id string, r platform.LocalRunReport) (*model.Task, error)
	EndLocalRun(ctx context.Context, id string, end platform.LocalRunEnd) (*model.Task, error)
	ExecuteRemotely(ctx context.Context, id string, in platform.ExecuteRemotelyInput) (*model.Task, error)
	QueuedTasks(ctx context.Context, computeResourceID string) (int, error)
	Task(ctx context.Context, id string) (*model.Task, error)
	TaskLogs(ctx context.Context, t *model.Task, after int64, first int, tail int) (*platform.LogPage, error)
	TaskMetrics(ctx context.Context, t *model.Task, name string, after int64, first int, last bool) ([]model.MetricPoint, error)
	CompareTasks(ctx context.Context, ids []string) (*platform.Comparison, error)
	TaskOwner(ctx context.Context, t *model.Task) (*model.User, error)
	TaskPosition(ctx context.Context, t *model.Task) (int, error)
	ProjectPriorities(ctx context.Context, groupRef string) (*platform.ProjectPriority, error)
	SetProjectPriorities(ctx context.Context, groupRef string, projectRefs []string) (*platform.ProjectPriority, error)
	MoveQueuedTask(ctx context.Context, in platform.QueueMove) (*platform.MovedTask, error)
	TaskProject(ctx context.Context, t *model.Task) (*model.Project, error)
	TaskReason(ctx context.Context, t *model.Task) (string, error)
	Tasks(ctx context.Context, f platform.TaskListFilter, page platform.Page) ([]*model.Task, error)
}

// FleetPlatform is what the resolvers ask of the fleet domain: workers,
// their credentials and the pools' autoscalers.
type FleetPlatform interface {
	Autoscalers(ctx context.Context) ([]*platform.AutoscalerView, error)
	PoolWorkersOf(ctx context.Context, poolID string) (*platform.PoolWorkers, error)
	CreateAutoscaler(ctx context.Context, in platform.AutoscalerInput) (*platform.AutoscalerView, error)
	CreateWorkerCredential(ctx context.Context, poolRef string, name string) (*model.WorkerCredential, string, error)
	DeleteAutoscaler(ctx context.Context, id string) error
	PoolAutoscaler(ctx context.Context, poolID string) (*platform.AutoscalerView, error)
	RevokeWorkerCredential(ctx context.Context, id string) (*model.WorkerCredential, error)
	UpdateAutoscaler(ctx context.Context, id string, in platform.AutoscalerInput) (*platform.AutoscalerView, error)
	Worker(ctx context.Context, id string) (*platform.WorkerView, error)
	WorkerCredentials(ctx context.Context) ([]*model.WorkerCredential, error)
	WorkerTasks(ctx context.Context, workerID string) ([]*model.Task, error)
	Workers(ctx context.Context) ([]*platform.WorkerView, error)
}

// LLMPlatform is what the resolvers ask of the llm domain: the gateway's
// configuration (providers, models, aliases, routes, limits, budgets,
// guardrails) and what it saw.
type LLMPlatform interface {
	DeleteEntitlement(ctx context.Context, name string) (*platform.EstateResult, error)
	DeleteLLMAlias(ctx context.Context, name string) (*platform.EstateResult, error)
	DeleteLLMModel(ctx context.Context, name string) (*platform.EstateResult, error)
	DeleteLLMProvider(ctx context.Context, name string) (*platform.EstateResult, error)
	DeleteLLMRoute(ctx context.Context, name string) (*platform.EstateResult, error)
	DeleteRateLimit(ctx context.Context, scope model.RateLimitScope, name string) (*platform.EstateResult, error)
	DeleteTokenBudget(ctx context.Context, project string, period model.BudgetPeriod) (*platform.EstateResult, error)
	GatewayConfig(ctx context.Context) (*model.Gateway, error)
	LLMAliases(ctx context.Context) ([]*model.Alias, error)
	TokenBudgetViews(ctx context.Context, projectRef string) ([]*platform.TokenBudgetView, error)
	GroupTokenBudgetViews(ctx context.Context, groupID string) ([]*platform.TokenBudgetView, error)
	PutEntitlement(ctx context.Context, in platform.EntitlementInput) (*platform.EstateResult, error)
	PutLLMAlias(ctx context.Context, in platform.LLMAliasInput) (*platform.EstateResult, error)
	PutLLMModel(ctx context.Context, in platform.LLMModelInput) (*platform.EstateResult, error)
	PutLLMProvider(ctx context.Context, in platform.LLMProviderInput) (*platform.EstateResult, error)
	PutLLMRoute(ctx context.Context, in platform.LLMRouteInput) (*platform.EstateResult, error)
	PutRateLimit(ctx context.Context, in platform.RateLimitInput) (*platform.EstateResult, error)
	PutTokenBudget(ctx context.Context, in platform.TokenBudgetInput) (*platform.EstateResult, error)
	SetGuardrails(ctx context.Context, in platform.GuardrailsInput) (*platform.EstateResult, error)
	ModelRefusals(ctx context.Context, since time.Time, limit int) ([]*model.ModelCall, error)
	EndpointHealths(ctx context.Context) ([]*llm.EndpointHealth, error)
}

// AccessPlatform is what the resolvers ask of the access domain: tenants,
// users, memberships, API keys, secrets and the audit log.
type AccessPlatform interface {
	APIKeys(ctx context.Context, userRef string) ([]*model.APIKey, error)
	AuditLog(ctx context.Context, f platform.AuditFilter, page platform.Page) ([]*model.AuditEntry, error)
	CreateAPIKey(ctx context.Context, in platform.APIKeyInput) (*model.APIKey, string, error)
	CreateTenant(ctx context.Context, name string, displayName string, adminName string) (*platform.NewTenant, error)
	CreateUser(ctx context.Context, in platform.UserInput) (*model.User, error)
	DeleteSecret(ctx context.Context, scope string, ref string, name string) error
	GroupMembers(ctx context.Context, groupRef string) ([]*model.Membership, error)
	Groups(ctx context.Context) ([]*model.Group, error)
	Me(ctx context.Context) (*platform.Me, error)
	SetDefaultProject(ctx context.Context, project string) (*model.Project, error)
	DefaultProject(ctx context.Context) (*model.Project, error)
	// Now is the service's clock, for whether an API key is active.
	Now() time.Time
	RemoveGroupMember(ctx context.Context, groupRef string, userRef string) error
	RevokeAPIKey(ctx context.Context, id string) (*model.APIKey, error)
	Secrets(ctx context.Context, scope string, ref string) ([]*platform.SecretInfo, error)
	SetGroupMember(ctx context.Context, groupRef string, userRef string, role model.GroupRole) (*model.Membership, error)
	SetSecret(ctx context.Context, scope string, ref string, name string, value string) (*platform.SecretInfo, error)
	Tenants(ctx context.Context) ([]*model.Tenant, error)
	UpdateUser(ctx context.Context, ref string, in platform.UserInput) (*model.User, error)
	User(ctx context.Context, ref string) (*model.User, error)
	UserMemberships(ctx context.Context, userID string) ([]*model.Membership, error)
	Users(ctx context.Context, page platform.Page) ([]*model.User, error)
}

// LivePlatform is what the resolvers ask of the live domain: subscriptions
// to what changes, and utilisation history.
type LivePlatform interface {
	SubscribeSchedules(ctx context.Context) (<-chan *live.ScheduleUpdate, error)
	SubscribeBudgetBurn(ctx context.Context, policyRef string) (<-chan *platform.BudgetBurnUpdate, error)
	SubscribePolicyTree(ctx context.Context, departmentRef string) (<-chan *platform.PolicyTreeUpdate, error)
	SubscribeGatewayTraffic(ctx context.Context) (<-chan *live.GatewayTraffic, error)
	SubscribePoolUtilization(ctx context.Context) (<-chan *platform.PoolUtilization, error)
	SubscribeQueue(ctx context.Context, computeResourceRef string) (<-chan *platform.QueueUpdate, error)
	SubscribeTask(ctx context.Context, id string) (<-chan *platform.TaskUpdate, error)
	SubscribeAppInstances(ctx context.Context, app, id string) (<-chan *platform.AppInstanceUpdate, error)
	SubscribeTaskLogs(ctx context.Context, id string, after *int64, tail int) (<-chan *platform.LogUpdate, error)
	SubscribeWorkers(ctx context.Context) (<-chan *platform.WorkerUpdate, error)
	UtilizationHistory(ctx context.Context, from, to time.Time, step time.Duration) (*platform.UtilizationHistory, error)
}

// AppsPlatform is what the resolvers ask of the apps domain: the app
// catalogue and app instances.
type AppsPlatform interface {
	Apps(ctx context.Context) ([]*model.App, error)
	App(ctx context.Context, name string) (*model.App, error)
	AppSettings(ctx context.Context) (*model.AppSettings, error)
	PutApp(ctx context.Context, a model.App) (*platform.EstateResult, error)
	SetAppLocked(ctx context.Context, name string, locked bool) (*platform.EstateResult, error)
	DeleteApp(ctx context.Context, name string) (*platform.EstateResult, error)
	SetAppLaunches(ctx context.Context, enabled bool) (*platform.EstateResult, error)
	SetAppQuota(ctx context.Context, group string, running int) (*platform.EstateResult, error)
	LaunchApp(ctx context.Context, in platform.LaunchInput) (*model.AppInstance, error)
	StopApp(ctx context.Context, id string) (*model.AppInstance, error)
	AppInstances(ctx context.Context, f platform.AppInstanceFilter) ([]*model.AppInstance, error)
	AppInstance(ctx context.Context, id string) (*model.AppInstance, error)
	RouteInstances(ctx context.Context, route string) ([]*model.AppInstance, error)
}

// ArtifactsPlatform is what the resolvers ask of the artifacts domain: what
// runs publish.
type ArtifactsPlatform interface {
	TaskArtifacts(ctx context.Context, t *model.Task) ([]*model.Artifact, error)
	PublishPointer(ctx context.Context, taskID string, p platform.ArtifactPointer) (*model.Artifact, error)
}

// StudiesPlatform is what the resolvers ask of the studies domain:
// hyperparameter studies and their trials.
type StudiesPlatform interface {
	StartStudy(ctx context.Context, in studies.StartInput) (*model.Study, error)
	StopStudy(ctx context.Context, id, reason string) (*model.Study, error)
	Studies(ctx context.Context, project string) ([]*model.Study, error)
	StudyView(ctx context.Context, id string) (*studies.View, error)
	SubscribeStudy(ctx context.Context, id string) (<-chan *studies.View, error)
	TaskTrial(ctx context.Context, t *model.Task) (*model.Study, *model.StudyTrial, error)
}

// SchedulesPlatform is what the resolvers ask of the schedules domain:
// schedules and their runs.
type SchedulesPlatform interface {
	Schedules(ctx context.Context) ([]*model.Schedule, error)
	Schedule(ctx context.Context, id string) (*model.Schedule, error)
	ScheduleRuns(ctx context.Context, id string, limit int) ([]*model.ScheduleRun, error)
	ScheduleOfRun(ctx context.Context, runID string) (*model.ScheduleRun, *model.Schedule, error)
	CreateSchedule(ctx context.Context, in platform.ScheduleInput) (*model.Schedule, error)
	UpdateSchedule(ctx context.Context, id string, in platform.ScheduleInput) (*model.Schedule, error)
	PauseSchedule(ctx context.Context, id string) (*model.Schedule, error)
	ResumeSchedule(ctx context.Context, id string) (*model.Schedule, error)
	DeleteSchedule(ctx context.Context, id string) (*model.Schedule, error)
	ScheduleMinimumInterval(ctx context.Context) (time.Duration, error)
	SetScheduleMinimumInterval(ctx context.Context, interval string) (time.Duration, error)
	ScheduleWhen(sc *model.Schedule) string
}

// Platforms is the platform, one interface per domain.
type Platforms struct {
	Allocation AllocationPlatform
	Tasks      TasksPlatform
	Fleet      FleetPlatform
	LLM        LLMPlatform
	Access     AccessPlatform
	Live       LivePlatform
	Apps       AppsPlatform
	Pipelines  PipelinesPlatform
	Artifacts  ArtifactsPlatform
	Studies    StudiesPlatform
	Schedules  SchedulesPlatform
}

// ServicePlatforms is svc seen through each domain's interface.
func ServicePlatforms(svc *platform.Service) Platforms {
	return Platforms{Allocation: svc, Tasks: svc, Fleet: svc, LLM: svc, Access: svc, Live: svc, Apps: svc, Pipelines: svc, Artifacts: svc, Studies: svc, Schedules: svc}
}

// NewResolver returns the root resolver over the platform service.
func NewResolver(svc *platform.Service) *Resolver { return &Resolver{Svc: ServicePlatforms(svc)} }

// The service satisfies every domain's interface.
var (
	_ AllocationPlatform = (*platform.Service)(nil)
	_ TasksPlatform      = (*platform.Service)(nil)
	_ FleetPlatform      = (*platform.Service)(nil)
	_ LLMPlatform        = (*platform.Service)(nil)
	_ AccessPlatform     = (*platform.Service)(nil)
	_ LivePlatform       = (*platform.Service)(nil)
	_ AppsPlatform       = (*platform.Service)(nil)
	_ PipelinesPlatform  = (*platform.Service)(nil)
	_ ArtifactsPlatform  = (*platform.Service)(nil)
	_ StudiesPlatform    = (*platform.Service)(nil)
	_ SchedulesPlatform  = (*platform.Service)(nil)
)
