// Package platform is the one governed path. Every operation of every
// channel (GraphQL, the CLI, MCP tools, the worker API, the gateway) calls
// this service, which checks identity and role with tenant isolation first,
// validates input, writes the change and its audit entry in one transaction,
// and publishes events once the change has committed. Resolvers and handlers
// stay thin: a rule written here holds everywhere.
//
// The service is composed, not a god object: the kernel (platform/kernel)
// holds what every domain shares, and each domain (allocation, tasks,
// fleet, llm, access, live, apps, pipelines, artifacts, studies,
// schedules) owns its operations and its state. The domains never import
// one another: each takes what it needs of the others in its New (a Deps
// or Options struct of functions and narrow interfaces), and New here is
// the one place that builds them, in dependency order, so none is
// half-built once it returns. The one seam wired later is ConnectGateway
// (the gateway is built over the service). Service embeds the domains, so
// their operations are its methods; a channel sees it through one narrow
// interface per domain of its own (graph.TasksPlatform, mcp.AppsPlatform…).
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

// Options configure a Service. Everything here is given before New: no
// domain is configured after it returns (ConnectGateway aside).
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
	// Artifacts is where stored artifacts' bytes are kept, and the largest
	// stored; without Blobs, only pointers can be published. (Its HeldTask
	// is the fleet's, whatever is given.)
	Artifacts ArtifactStorage
	// Subscriptions cap what one client may hold open; Schedules bound
	// what schedules can start. Zero fields take the defaults.
	Subscriptions SubscriptionLimits
	Schedules     ScheduleLimits
	// AppHosts says where the router serves app instances: on hosts of
	// their own, or by path (the zero value).
	AppHosts model.AppHosts
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

// New returns a service, its domains built in dependency order, each
// given what it needs of the others at construction (the functions below
// close over the domains already built): fleet before the tasks and
// artifacts it answers for, tasks before the apps, pipelines and studies
// that enqueue through it, apps before llm (a route's serving instances),
// schedules after everything a schedule starts, and live last, since it
// reads through the service itself. Access comes before live: its
// identity-change hook drops the authenticator's cached checks before
// subscribers re-check.
func New(o Options) *Service {
	k := kernel.New(kernel.Options{Store: o.Store, Events: o.Events, Logger: o.Logger, Now: o.Now, Vault: o.Vault})
	s := &Service{k: k, allocationDomain: allocation.New(k)}
	s.fleetDomain = fleet.New(k, o.Agent)
	s.tasksDomain = tasks.New(k, tasks.Deps{
		// An enqueue checks its inputs by the artifacts' rule.
		InputCheck: artifacts.CheckInputs,
		// Why a placed task waits depends on its pool's workers, which
		// the fleet knows.
		PoolWorkers: poolWorkers(s.fleetDomain),
		// A local run's log is bounded as a worker's task's.
		LogLimit: o.Agent.LogLimit,
	})
	// A worker publishes and fetches artifacts for the tasks the fleet
	// says it holds.
	o.Artifacts.HeldTask = s.fleetDomain.HeldTask
	s.artifactsDomain = artifacts.New(k, o.Artifacts)
	s.accessDomain = access.New(k, o.Auth)
	s.appsDomain = newApps(k, s.tasksDomain, o.AppHosts)
	// A static route's endpoints include the app instances serving it.
	s.llmDomain = llm.New(k, llm.Deps{RouteEndpoints: s.appsDomain.Serving().Endpoints})
	s.pipelinesDomain = newPipelines(k, s.tasksDomain)
	s.studiesDomain = newStudies(k, s.tasksDomain)
	s.schedulesDomain = newSchedules(k, s.tasksDomain, s.pipelinesDomain, s.studiesDomain, o.Schedules)
	// The live views read logs, workers and policy views through the
	// service itself, now whole.
	agent := s.Agent()
	s.liveDomain = live.New(k, s, live.Options{Auth: o.Auth, Heartbeat: agent.Heartbeat, Lease: agent.Lease, Limits: o.Subscriptions})
	return s
}

// poolWorkers tells the tasks domain what the fleet knows of a pool's
// workers.
func poolWorkers(f *fleet.Fleet) tasks.PoolWorkersFunc {
	return func(ctx context.Context, tenantID, poolID string) (tasks.PoolWorkers, bool, error) {
		all, err := f.PoolWorkers(ctx, tenantID)
		if err != nil {
			return tasks.PoolWorkers{}, false, err
		}
		pw := all[poolID]
		if pw == nil {
			return tasks.PoolWorkers{}, false, nil
		}
		return tasks.PoolWorkers{PoolName: pw.PoolName, Online: pw.Online, LastSeen: pw.LastSeen,
			Autoscaled: pw.Autoscaled, ClaimTimeout: pw.ClaimTimeout}, true, nil
	}
}

// newApps wires the apps domain to the tasks domain: an app instance is a
// task, enqueued, stopped and expired through the tasks domain's paths.
func newApps(k *kernel.Kernel, t *tasks.Tasks, hosts model.AppHosts) *apps.Apps {
	return apps.New(k, apps.Deps{
		Enqueue: func(ctx context.Context, name, project, cr, group, id string, prepare apps.Prepare, request any) (*model.Task, error) {
			return t.EnqueueApplication(ctx, tasks.EnqueueInput{Name: name, Project: project, ComputeResource: cr, Group: group},
				id, tasks.PrepareFunc(prepare), request)
		},
		Stop:   t.StopApplication,
		Expire: t.ExpireApplication,
		Hosts:  hosts,
	})
}

// newSchedules wires the schedules domain to what a schedule starts and
// what triggers one. A schedule of a task starts a clone of it, as the
// schedule's owner, through the tasks domain's governed path; one of a
// pipeline or a study reruns it (pipelineStarter, studyStarter). A
// published artifact's trigger is matched by the artifacts domain, a
// finished pipeline run's by the pipelines domain.
func newSchedules(k *kernel.Kernel, t *tasks.Tasks, p *pipelines.Pipelines, st *studies.Studies, limits schedules.Limits) *schedules.Schedules {
	return schedules.New(k, schedules.Deps{
		Starters: map[string]schedules.Starter{
			model.ScheduleTargetTask: schedules.TaskStarter(t.CheckClone,
				func(ctx context.Context, id string, overrides map[string]string, key string) (*model.Task, error) {
					return t.CloneTask(ctx, id, tasks.CloneInput{ParameterOverrides: overrides, IdempotencyKey: key})
				}),
			model.ScheduleTargetPipeline: pipelineStarter(p),
			model.ScheduleTargetStudy:    studyStarter(st),
		},
		Sources: map[string]schedules.TriggerSource{
			model.TriggerArtifactPublished: artifacts.NewPublishedTrigger(k),
			model.TriggerPipelineFinished:  pipelines.NewFinishedTrigger(k),
		},
		Limits: limits,
	})
}

// GatewayReads is what the llm domain reads of the gateway: the budgets'
// held spend in its limiter, and the route endpoints it set aside.
type GatewayReads struct {
	Budgets  llm.BudgetReader
	SetAside llm.SetAsideReader
}

// ConnectGateway is the one seam wired after New, and why: the gateway is
// built over the service (it calls the service's operations, and its
// limiter's metrics live in the server's registry), so what the llm domain
// reads of it can only be given once it exists. The server calls it
// before it serves; until then (and in a service without a gateway)
// budgets read the ledger alone and every endpoint reads healthy.
func (s *Service) ConnectGateway(g GatewayReads) {
	if g.Budgets != nil {
		s.llmDomain.SetBudgetReader(g.Budgets)
	}
	if g.SetAside != nil {
		s.llmDomain.SetEndpointHealth(g.SetAside)
	}
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
