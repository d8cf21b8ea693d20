// Package platform is the one governed path. Every operation of every
// channel (GraphQL, the CLI, MCP tools, the worker API, the gateway) calls
// this service, which checks identity and role with tenant isolation first,
// validates input, writes the change and its audit entry in one transaction,
// and publishes events once the change has committed. Resolvers and handlers
// stay thin: a rule written here holds everywhere.
//
// The service is a facade: the kernel (platform/kernel) holds what every
// domain shares, and each domain (allocation, tasks, fleet, llm, access,
// live, apps) owns its operations and its state. Service embeds the domains, so
// their operations are its methods; the domains never import one another,
// and what one needs of another is wired here.
//
// The caller's identity comes from the context (identity.PrincipalFrom), put
// there by the HTTP layer; nothing here reads headers.
package platform

import (
	"context"
	"log/slog"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/access"
	"github.com/klique-ai/klique/internal/platform/allocation"
	"github.com/klique-ai/klique/internal/platform/apps"
	"github.com/klique-ai/klique/internal/platform/artifacts"
	"github.com/klique-ai/klique/internal/platform/fleet"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/live"
	"github.com/klique-ai/klique/internal/platform/llm"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/platform/schedules"
	"github.com/klique-ai/klique/internal/platform/studies"
	"github.com/klique-ai/klique/internal/platform/tasks"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/vault"
)

// Options configure a Service.
type Options struct {
	Store  store.Store
	Auth   *identity.Authenticator
	Events events.Broker
	Logger *slog.Logger
	// Now is the clock; time.Now when nil. Tests inject their own.
	Now func() time.Time
	// Vault seals secrets; without one, secrets cannot be set.
	Vault *vault.Vault
	// Agent tunes the worker protocol.
	Agent AgentOptions
}

// The domains, embedded in Service under unexported names: their
// operations are the service's methods (the tasks domain's Tasks among
// them), and the domains themselves are not reachable from a channel.
type (
	allocationDomain = allocation.Allocation
	tasksDomain      = tasks.Tasks
	fleetDomain      = fleet.Fleet
	llmDomain        = llm.LLM
	accessDomain     = access.Access
	liveDomain       = live.Live
	appsDomain       = apps.Apps
	pipelinesDomain  = pipelines.Pipelines
	artifactsDomain  = artifacts.Artifacts
	studiesDomain    = studies.Studies
	schedulesDomain  = schedules.Schedules
)

// Service is the platform service: the domains, composed.
type Service struct {
	k *kernel.Kernel
	*allocationDomain
	*tasksDomain
	*fleetDomain
	*llmDomain
	*accessDomain
	*liveDomain
	*appsDomain
	*pipelinesDomain
	*artifactsDomain
	*studiesDomain
	*schedulesDomain
}

// New returns a service.
func New(o Options) *Service {
	k := kernel.New(kernel.Options{Store: o.Store, Events: o.Events, Logger: o.Logger, Now: o.Now, Vault: o.Vault})
	s := &Service{k: k,
		allocationDomain: allocation.New(k),
		tasksDomain:      tasks.New(k),
		fleetDomain:      fleet.New(k, o.Agent),
		llmDomain:        llm.New(k),
		// Access before Live: its identity-change hook drops the
		// authenticator's cached checks before subscribers re-check.
		accessDomain: access.New(k, o.Auth),
		appsDomain:   apps.New(k),
		// A pipeline's steps are tasks: the pipelines domain enqueues,
		// checks and aborts them through the tasks domain (wirePipelines).
		pipelinesDomain: pipelines.New(k),
		// Artifact storage is set by the server (SetArtifactStorage):
		// until then only pointers can be published.
		artifactsDomain: artifacts.New(k, artifacts.Options{}),
		schedulesDomain: schedules.New(k),
	}
	s.wirePipelines()
	// A worker publishes and fetches artifacts for the tasks the fleet
	// says it holds; an enqueue checks its inputs by the artifacts' rule.
	s.artifactsDomain.SetHeldTask(s.fleetDomain.HeldTask)
	s.tasksDomain.SetInputCheck(artifacts.CheckInputs)
	// A schedule of a task starts a clone of it, as the schedule's owner,
	// through the tasks domain's governed path. Pipelines and studies add
	// their starters (wirePipelines, wireStudySchedules).
	s.schedulesDomain.SetScheduleStarter(model.ScheduleTargetTask, schedules.TaskStarter(s.tasksDomain.CheckClone,
		func(ctx context.Context, id string, overrides map[string]string, key string) (*model.Task, error) {
			return s.tasksDomain.CloneTask(ctx, id, tasks.CloneInput{ParameterOverrides: overrides, IdempotencyKey: key})
		}))
	// An app instance is a task: the apps domain enqueues and stops it
	// through the tasks domain.
	s.appsDomain.SetTasks(func(ctx context.Context, name, project, cr, group, id string, prepare apps.Prepare, request any) (*model.Task, error) {
		return s.tasksDomain.EnqueueApplication(ctx, tasks.EnqueueInput{Name: name, Project: project, ComputeResource: cr, Group: group},
			id, tasks.PrepareFunc(prepare), request)
	}, s.tasksDomain.StopApplication)
	// A static route's endpoints include the app instances serving it.
	s.llmDomain.SetRouteEndpoints(s.appsDomain.Serving().Endpoints)
	s.appsDomain.SetExpire(s.tasksDomain.ExpireApplication)
	agent := s.Agent()
	// A local run's log is bounded as a worker's task's.
	s.tasksDomain.SetLogLimit(o.Agent.LogLimit)
	// Why a placed task waits depends on its pool's workers, which the
	// fleet knows.
	s.tasksDomain.SetPoolWorkers(func(ctx context.Context, tenantID, poolID string) (tasks.PoolWorkers, bool, error) {
		all, err := s.fleetDomain.PoolWorkers(ctx, tenantID)
		if err != nil {
			return tasks.PoolWorkers{}, false, err
		}
		pw := all[poolID]
		if pw == nil {
			return tasks.PoolWorkers{}, false, nil
		}
		return tasks.PoolWorkers{PoolName: pw.PoolName, Online: pw.Online, LastSeen: pw.LastSeen,
			Autoscaled: pw.Autoscaled, ClaimTimeout: pw.ClaimTimeout}, true, nil
	})
	// The live views read logs, workers and policy views through the
	// service itself.
	s.studiesDomain = newStudies(k, s.tasksDomain)
	s.wireStudySchedules()
	// A trigger of a published artifact is matched by the artifacts
	// domain (that of a finished pipeline run, in wirePipelines).
	s.schedulesDomain.SetScheduleTriggerSource(model.TriggerArtifactPublished, artifacts.NewPublishedTrigger(k))
	s.liveDomain = live.New(k, s, live.Options{Auth: o.Auth, Heartbeat: agent.Heartbeat, Lease: agent.Lease})
	return s
}

// Store returns the service's store, for the parts of the server that need
// it directly (readiness checks).
func (s *Service) Store() store.Store { return s.k.Store }

// Now returns the service's current time, in UTC and to the microsecond the
// stores keep.
func (s *Service) Now() time.Time { return s.k.Now() }

// Kernel returns the kernel the domains share, for the engine loop's
// planner and tests.
func (s *Service) Kernel() *kernel.Kernel { return s.k }
