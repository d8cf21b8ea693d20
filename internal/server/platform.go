package server

import (
	"context"
	"io"
	"time"

	"github.com/klique-ai/klique/graph"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/router"
	"github.com/klique-ai/klique/mcp"
)

// The platform, as the HTTP layer and the background passes see it: one
// interface per domain, each holding only what this channel asks of that
// domain, so that a handler's dependency on a domain is visible and small
// (as graph and mcp do). Only the composition root (app.go) holds the
// concrete *platform.Service; it passes it for each interface
// (ServicePlatforms, App.controllers), and the assertions below keep the
// service satisfying every one.

// FleetAPI is what the worker protocol asks of the fleet domain: workers'
// and task credentials, registration, claims, heartbeats, a task's logs,
// metrics, end, secrets and app status, tunnels, and the autoscalers' sync.
type FleetAPI interface {
	AuthenticateWorker(ctx context.Context, secret string) (*identity.Worker, error)
	AuthenticateTaskCredential(ctx context.Context, secret string) (*identity.Worker, *platform.TaskScope, error)
	IssueTaskCredential(ctx context.Context, taskID string, attempt int) (*agentapi.TaskCredentialResponse, error)
	RegisterWorker(ctx context.Context, req agentapi.RegisterRequest) (*agentapi.RegisterResponse, error)
	ClaimTask(ctx context.Context, req agentapi.ClaimRequest) (*agentapi.Assignment, error)
	Heartbeat(ctx context.Context, req agentapi.HeartbeatRequest) (*agentapi.HeartbeatResponse, error)
	AppendLogs(ctx context.Context, taskID string, req agentapi.LogsRequest) (*agentapi.LogsResponse, error)
	AppendMetrics(ctx context.Context, taskID string, req agentapi.MetricsRequest) error
	FinishTask(ctx context.Context, taskID string, req agentapi.FinishRequest) error
	ReportAppStatus(ctx context.Context, taskID string, req agentapi.AppReportRequest) error
	TaskSecrets(ctx context.Context, taskID string, attempt int) (*agentapi.SecretsResponse, error)
	BindTunnel(ctx context.Context, workerID string) (*platform.TunnelBinding, error)
	SyncAutoscaler(ctx context.Context, req agentapi.AutoscalerSyncRequest) (*agentapi.AutoscalerSyncResponse, error)
	AutoscalerCredentials(ctx context.Context) (*agentapi.AutoscalerCredentialsResponse, error)
}

// ArtifactsAPI is what the artifact routes ask of the artifacts domain:
// publishing and reading a task's artifacts, by its owner or by the worker
// that holds it.
type ArtifactsAPI interface {
	PublishArtifact(ctx context.Context, taskID string, up platform.ArtifactUpload) (*model.Artifact, error)
	TaskArtifacts(ctx context.Context, t *model.Task) ([]*model.Artifact, error)
	OpenArtifact(ctx context.Context, taskID, name string) (*model.Artifact, io.ReadCloser, error)
	WorkerPublishArtifact(ctx context.Context, taskID string, attempt int, up platform.ArtifactUpload) (*model.Artifact, error)
	WorkerPublishPointer(ctx context.Context, taskID string, attempt int, ptr platform.ArtifactPointer) (*model.Artifact, error)
	WorkerOpenInput(ctx context.Context, taskID string, attempt int, input string) (*model.Artifact, io.ReadCloser, error)
}

// TasksAPI is what the REST routes ask of the tasks domain: a task, checked
// against the caller, before its artifacts are listed.
type TasksAPI interface {
	Task(ctx context.Context, id string) (*model.Task, error)
}

// AccessAPI is what the token routes ask of the access domain.
type AccessAPI interface {
	IssueToken(ctx context.Context) (string, time.Time, error)
}

// AllocationAPI is what the usage export asks of the allocation domain.
type AllocationAPI interface {
	Usage(ctx context.Context, in platform.UsageQuery) ([]platform.UsageRow, error)
}

// LiveAPI is what the subscription WebSocket asks of the live domain: a
// connection's credential checked and its slot held.
type LiveAPI interface {
	OpenSubscriptions(ctx context.Context, credential string) (context.Context, func(), error)
}

// Pinger is what /readyz asks: that the store answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ServingIndex is what the gateway's app dialer asks of the apps domain's
// serving index: where a ready instance is.
type ServingIndex interface {
	Target(taskID string) (appnet.Target, bool)
}

// Controllers are the periodic system passes the replica that runs the
// engine drives (controllers.go, idle.go, maintenance.go, localruns.go),
// each owned by its domain: schedules, app idle limits, studies,
// pipelines, stale local runs and idempotency keys.
type Controllers interface {
	TickSchedules(ctx context.Context) (platform.ScheduleTickResult, error)
	SweepIdle(ctx context.Context) (platform.AppSweepResult, error)
	NoteAppActivity(ctx context.Context, taskID string, at time.Time) error
	ReconcileStudies(ctx context.Context) error
	AdvancePipelines(ctx context.Context) error
	SweepStaleLocalRuns(ctx context.Context) (int, error)
	PruneIdempotencyKeys(ctx context.Context) (int64, error)
}

// Platforms is the platform, one interface per domain, as the handler
// reaches it; Graph and MCP are what the GraphQL resolvers and the MCP
// tools reach, in their own packages' terms.
type Platforms struct {
	Fleet      FleetAPI
	Artifacts  ArtifactsAPI
	Tasks      TasksAPI
	Access     AccessAPI
	Allocation AllocationAPI
	Live       LiveAPI
	// Apps is what the embedded router reads of the apps domain.
	Apps  router.Apps
	Ready Pinger
	Graph graph.Platforms
	MCP   mcp.Platforms
}

// ServicePlatforms is svc seen through each domain's interface.
func ServicePlatforms(svc *platform.Service) Platforms {
	return Platforms{Fleet: svc, Artifacts: svc, Tasks: svc, Access: svc, Allocation: svc, Live: svc, Apps: svc, Ready: svc.Store(),
		Graph: graph.ServicePlatforms(svc), MCP: mcp.ServicePlatforms(svc)}
}

// The service satisfies every domain's interface.
var (
	_ FleetAPI      = (*platform.Service)(nil)
	_ ArtifactsAPI  = (*platform.Service)(nil)
	_ TasksAPI      = (*platform.Service)(nil)
	_ AccessAPI     = (*platform.Service)(nil)
	_ AllocationAPI = (*platform.Service)(nil)
	_ LiveAPI       = (*platform.Service)(nil)
	_ router.Apps   = (*platform.Service)(nil)
	_ Controllers   = (*platform.Service)(nil)
)
