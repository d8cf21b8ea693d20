package platform

import (
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/access"
	"github.com/klique-ai/klique/internal/platform/allocation"
	"github.com/klique-ai/klique/internal/platform/apps"
	"github.com/klique-ai/klique/internal/platform/artifacts"
	"github.com/klique-ai/klique/internal/platform/fleet"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/live"
	"github.com/klique-ai/klique/internal/platform/llm"
	"github.com/klique-ai/klique/internal/platform/schedules"
	"github.com/klique-ai/klique/internal/platform/tasks"
	"github.com/klique-ai/klique/internal/platform/view"
	"github.com/klique-ai/klique/internal/store"
)

// The vocabulary of the platform's operations, as the channels use it. Each
// name is defined by the domain that owns it (or the kernel, or the shared
// read models in view); the facade names them once so that a channel
// imports one package.

type (
	ArtifactUpload       = artifacts.Upload
	ArtifactPointer      = artifacts.Pointer
	ArtifactStorage      = artifacts.Options
	ArtifactTooLarge     = artifacts.TooLargeError
	APIKeyInput          = access.APIKeyInput
	ScheduleInput        = schedules.ScheduleInput
	ScheduleTickResult   = schedules.TickResult
	ScheduleLimits       = schedules.Limits
	LaunchInput          = apps.LaunchInput
	AppInstanceFilter    = apps.InstanceFilter
	AppSweepResult       = apps.SweepResult
	AuditFilter          = access.AuditFilter
	GroupGrantInput      = access.GroupGrantInput
	SecretInfo           = access.SecretInfo
	UserInput            = access.UserInput
	ComputeResourceInput = allocation.ComputeResourceInput
	ConnectInput         = allocation.ConnectInput
	EngineStatus         = allocation.EngineStatus
	// EngineState is what the engine's loop reads, over a store: loop.Loop{State: platform.EngineState{Store: st}}.
	EngineState   = allocation.EngineState
	GPUClassInput = allocation.GPUClassInput
	GroupInput    = allocation.GroupInput
	PolicyInput   = allocation.PolicyInput
	// NodeLimits is the policy view of one node of the organisation tree.
	NodeLimits = allocation.NodeLimits
	// TreeNode is the policy view of one node of the organisation tree, with the nodes in it.
	TreeNode        = allocation.TreeNode
	PoolInput       = allocation.PoolInput
	ProfileInput    = allocation.ProfileInput
	ProjectInput    = allocation.ProjectInput
	TimeBudgetInput = allocation.TimeBudgetInput
	Upstream        = llm.Upstream
	UsageQuery      = allocation.UsageQuery
	UsageRow        = allocation.UsageRow
	AgentOptions    = fleet.AgentOptions
	AutoscalerInput = fleet.AutoscalerInput
	AutoscalerView  = fleet.AutoscalerView
	PoolWorkers     = fleet.PoolWorkers
	TunnelBinding   = fleet.TunnelBinding
	Me              = access.Me
	NewTenant       = access.NewTenant
	// Page asks for one page of a list.
	Page = model.Page
	// UsageKey names one dimension of a usage row: an id and a name.
	UsageKey             = model.UsageKey
	TaskScope            = fleet.TaskScope
	Code                 = kernel.Code
	Error                = kernel.Error
	EstateResult         = kernel.EstateResult
	BudgetBurnUpdate     = live.BudgetBurnUpdate
	PolicyTreeUpdate     = live.PolicyTreeUpdate
	GPUClassUse          = live.GPUClassUse
	LogUpdate            = live.LogUpdate
	PoolUse              = live.PoolUse
	PoolUtilization      = live.PoolUtilization
	QueueUpdate          = live.QueueUpdate
	QueuedTask           = live.QueuedTask
	SubscriptionLimits   = live.SubscriptionLimits
	TaskUpdate           = live.TaskUpdate
	AppInstanceUpdate    = live.AppInstanceUpdate
	WorkerUpdate         = live.WorkerUpdate
	UtilizationHistory   = live.UtilizationHistory
	GPUClassHistory      = live.GPUClassHistory
	UtilizationPoint     = live.UtilizationPoint
	EntitlementInput     = llm.EntitlementInput
	GuardrailsInput      = llm.GuardrailsInput
	LLMAliasInput        = llm.LLMAliasInput
	LLMAliasRuleInput    = llm.LLMAliasRuleInput
	LLMModelInput        = llm.LLMModelInput
	LLMProviderInput     = llm.LLMProviderInput
	LLMRouteInput        = llm.LLMRouteInput
	LLMTargetInput       = llm.LLMTargetInput
	LimitWindow          = llm.LimitWindow
	HeldBudget           = llm.HeldBudget
	BudgetReader         = llm.BudgetReader
	TokenBudgetView      = llm.TokenBudgetView
	ModelGrant           = llm.ModelGrant
	RateLimitInput       = llm.RateLimitInput
	SpendQuery           = llm.SpendQuery
	TokenBudgetInput     = llm.TokenBudgetInput
	WindowUnit           = llm.WindowUnit
	CloneInput           = tasks.CloneInput
	EnqueueInput         = tasks.EnqueueInput
	QueueMove            = tasks.QueueMove
	MovedTask            = tasks.MovedTask
	ProjectPriority      = tasks.ProjectPriority
	TaskListFilter       = tasks.TaskListFilter
	LocalRunInput        = tasks.LocalRunInput
	LocalRunReport       = tasks.LocalRunReport
	LocalRunEnd          = tasks.LocalRunEnd
	ExecuteRemotelyInput = tasks.ExecuteRemotelyInput
	Comparison           = tasks.Comparison
	ComparedMetric       = tasks.ComparedMetric
	MetricValue          = tasks.MetricValue
	BudgetView           = view.BudgetView
	LogPage              = view.LogPage
	PolicyView           = view.PolicyView
	WorkerView           = view.WorkerView
)

// The dimensions usage can be grouped by.
const (
	ByUser            = store.ByUser
	ByProject         = store.ByProject
	ByGroup           = store.ByGroup
	ByPool            = store.ByPool
	ByGPUClass        = store.ByGPUClass
	ByComputeResource = store.ByComputeResource
	ByProfile         = store.ByProfile
	ByAlias           = store.ByAlias
	ByModel           = store.ByModel
)

const (
	MaxSecretBytes      = access.MaxSecretBytes
	ToolCallAction      = access.ToolCallAction
	ToolCallKind        = access.ToolCallKind
	DefaultLease        = fleet.DefaultLease
	CodeConflict        = kernel.CodeConflict
	CodeForbidden       = kernel.CodeForbidden
	CodeInternal        = kernel.CodeInternal
	CodeInvalid         = kernel.CodeInvalid
	CodeNotFound        = kernel.CodeNotFound
	CodeUnauthenticated = kernel.CodeUnauthenticated
	CodeUnavailable     = kernel.CodeUnavailable
	UnitMicros          = llm.UnitMicros
	UnitRequests        = llm.UnitRequests
	UnitTokens          = llm.UnitTokens
	MaxTaskNameLength   = tasks.MaxTaskNameLength
	// LocalRunStaleAfter is how long a local run may go without a report
	// before the sweep ends it as failed.
	LocalRunStaleAfter = tasks.LocalRunStaleAfter
)

var (
	WithTaskScope = fleet.WithTaskScope
	// WithIdempotencyKey carries a request's Idempotency-Key header to
	// the creating operations it runs.
	WithIdempotencyKey = kernel.WithIdempotencyKey
	ErrorCode          = kernel.ErrorCode
	PublicMessage      = kernel.PublicMessage
	WithRequestCache   = kernel.WithRequestCache
	Cost               = llm.Cost
	MatchingRule       = llm.MatchingRule
	RuleMatches        = llm.RuleMatches
	TaskSize           = tasks.TaskSize
	UsageDimensions    = allocation.UsageDimensions
	ValidateTaskSpec   = tasks.ValidateTaskSpec
)
