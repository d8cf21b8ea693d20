// Package store defines the one driver interface the control plane keeps its
// state through, and the errors every driver returns.
//
// Two drivers implement it: SQLite (package sqlite, the embedded default) and
// PostgreSQL (package postgres). Both pass the same conformance suite
// (package storetest). The store knows nothing of roles or rules: it checks
// only what the schema enforces (uniqueness, references) and returns the
// errors below, which the platform service turns into messages for people.
//
// Every method that reads or writes tenant data takes the tenant id, so a
// query can never reach across tenants by accident.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

var (
	// ErrNotFound is returned when the object asked for does not exist (in
	// the tenant asked for).
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned when a write would break a uniqueness rule,
	// such as a second pool with the same name in one tenant.
	ErrConflict = errors.New("conflict")
)

// Page asks for one page of a list (model.Page).
type Page = model.Page

// TaskFilter narrows a task list. Empty fields do not filter.
type TaskFilter struct {
	Statuses          []model.TaskStatus
	ComputeResourceID string
	ProjectID         string
	OwnerID           string
	PoolID            string
	// GroupIDs keeps tasks of any of these groups; VisibleToUserID, when set
	// together with GroupIDs, also keeps that user's own tasks. This is how a
	// member sees their groups' queues and their own work.
	GroupIDs        []string
	VisibleToUserID string
	// RestrictToGroups applies GroupIDs even when it is empty (then only
	// VisibleToUserID's tasks are kept). Admins list without it.
	RestrictToGroups bool
}

// AuditFilter narrows the audit trail. Empty fields do not filter.
type AuditFilter struct {
	ActorID    string
	ObjectKind string
	ObjectID   string
	Since      time.Time
	Until      time.Time
}

// SchedTask is a task as the engine sees it: where it waits or holds
// capacity, and how much.
type SchedTask struct {
	ID                string
	Name              string
	ComputeResourceID string
	OwnerID           string
	ProjectID         string
	Status            model.TaskStatus
	Size              model.Size
	QueueSeq          int64
	// QueueRank and QueueOrder are the task's place in its queue (see
	// model.Task).
	QueueRank  int
	QueueOrder int64
	// PoolID and PlacedAt are set for placed and running tasks.
	PoolID   string
	PlacedAt time.Time
}

// QueuePlace is a place in a compute resource's queue: tasks wait in
// (Rank, Order, Seq) order (model.Task's QueueRank, QueueOrder, QueueSeq).
type QueuePlace struct {
	Rank  int
	Order int64
	Seq   int64
}

// PlaceOf is t's place in its queue.
func PlaceOf(t *model.Task) QueuePlace {
	return QueuePlace{Rank: t.QueueRank, Order: t.QueueOrder, Seq: t.QueueSeq}
}

// QueueMove moves TaskID in its queue: next to AnchorID (ahead of it when
// Ahead is set, behind it otherwise), or, with no anchor, to the front
// (Ahead) or the back.
type QueueMove struct {
	TaskID   string
	AnchorID string
	Ahead    bool
}

// Preemption sends one task back to its queue.
type Preemption struct {
	TaskID string
	Reason string
	// OnlyPlaced preempts the task only while no worker has claimed it
	// (a claim timeout that a claim beat to it does nothing).
	OnlyPlaced bool
}

// PlacementFilter narrows a ledger listing. Empty fields do not filter.
type PlacementFilter struct {
	From, To  time.Time
	PolicyIDs []string
	TaskID    string
	// OpenOnly keeps intervals still open.
	OpenOnly bool
}

// AppActivityGrain is how coarse an app instance's last-activity time is
// (TouchAppActivity): finer than any idle limit needs, coarse enough that
// traffic costs a write a minute per instance, not one per request.
const AppActivityGrain = time.Minute

// Usage dimensions SumUsage can group by.
const (
	ByUser            = "user"
	ByProject         = "project"
	ByGroup           = "group"
	ByPool            = "pool"
	ByGPUClass        = "gpu_class"
	ByComputeResource = "compute_resource"
	ByProfile         = "profile"
)

// UsageQuery asks for ledger totals over [From, To), with open intervals
// counted up to Now, grouped By the dimensions listed (none: one total row).
// GPU work has no alias or model: grouped by those, it falls under an
// empty key.
type UsageQuery struct {
	From, To, Now time.Time
	By            []string
	// Filters; empty does not filter.
	UserID    string
	ProjectID string
	GroupIDs  []string
}

// UsageRow is one group of ledger totals. Keys holds, for each dimension of
// the query in order, the id and name of the object.
type UsageRow struct {
	Keys []model.UsageKey
	// MicroGPUHours and MicroBudgetHours are GPU-hours and budget hours
	// (hours × time weight, less the time the engine was disabled) in
	// millionths.
	MicroGPUHours    int64
	MicroBudgetHours int64
	// Cost is GPU-hours × the GPU class price per GPU-hour, in Currency
	// (several currencies in one row give "mixed"; intervals without a
	// price have none and count for no currency).
	Cost     float64
	Currency string
}

// ModelUsageQuery sums the model-call ledger over [From, To), grouped by
// By. Calls have no pool, GPU class, compute resource or profile: grouped
// by those, they fall under an empty key.
type ModelUsageQuery struct {
	From, To time.Time
	By       []string
	// Filters; empty does not filter.
	UserID    string
	ProjectID string
	GroupIDs  []string
	// ExceptIDs leaves these calls out: those a budget counter being
	// seeded counts already (see gateway/limits.Outstanding).
	ExceptIDs []string
}

// Dimensions only the model-call ledger has.
const (
	ByAlias = "alias"
	ByModel = "model"
)

// ModelUsageRow is one group of model-call totals.
type ModelUsageRow struct {
	Keys         []model.UsageKey
	Calls        int64
	InputTokens  int64
	OutputTokens int64
	// CostMicros is in millionths of Currency ("mixed" when a group spans
	// currencies; calls without one, such as refused calls, count for
	// none).
	CostMicros int64
	Currency   string
}

// UsageKey names one dimension's object in a usage row (model.UsageKey).
type UsageKey = model.UsageKey

// ClaimFit says what a worker can take: tasks of at most MaxPerNode GPUs per
// node, fractions only when Fractions is set, and never multi-node work
// (a worker runs on one node).
type ClaimFit struct {
	MaxPerNode model.MilliGPU
	Fractions  bool
	// ProjectID, when set, keeps only the tasks of this project: the
	// worker's tasks share one user on its host, and it runs tasks of
	// one project at a time (agentapi.ClaimRequest.Project).
	ProjectID string
}

// Queries are the reads and writes of the store. A Store runs each call on its
// own; the Queries passed to InTx run inside one transaction.
type Queries interface {
	AutoscalerQueries
	PipelineQueries
	ArtifactQueries
	StudyQueries
	ScheduleQueries

	// Tenants.
	CreateTenant(ctx context.Context, t *model.Tenant) error
	GetTenant(ctx context.Context, id string) (*model.Tenant, error)
	GetTenantByName(ctx context.Context, name string) (*model.Tenant, error)
	ListTenants(ctx context.Context) ([]*model.Tenant, error)

	// Users.
	CreateUser(ctx context.Context, u *model.User) error
	UpdateUser(ctx context.Context, u *model.User) error
	GetUser(ctx context.Context, tenantID, id string) (*model.User, error)
	GetUserByName(ctx context.Context, tenantID, name string) (*model.User, error)
	GetUserByExternalID(ctx context.Context, tenantID, externalID string) (*model.User, error)
	// ListUsers orders by name.
	ListUsers(ctx context.Context, tenantID string, page Page) ([]*model.User, error)

	// Groups and memberships.
	CreateGroup(ctx context.Context, g *model.Group) error
	UpdateGroup(ctx context.Context, g *model.Group) error
	DeleteGroup(ctx context.Context, tenantID, id string) error
	GetGroup(ctx context.Context, tenantID, id string) (*model.Group, error)
	GetGroupByName(ctx context.Context, tenantID, name string) (*model.Group, error)
	// ListGroups orders by name.
	ListGroups(ctx context.Context, tenantID string, page Page) ([]*model.Group, error)
	// PutMembership adds a user to a group or changes their role in it.
	PutMembership(ctx context.Context, m *model.Membership) error
	DeleteMembership(ctx context.Context, tenantID, groupID, userID string) error
	// ListMembershipsByUser and ListMembershipsByGroup order by group name and
	// user name respectively.
	ListMembershipsByUser(ctx context.Context, tenantID, userID string) ([]*model.Membership, error)
	ListMembershipsByGroup(ctx context.Context, tenantID, groupID string) ([]*model.Membership, error)

	// API keys. GetAPIKeyByHash looks across tenants: the key names its tenant.
	CreateAPIKey(ctx context.Context, k *model.APIKey) error
	GetAPIKey(ctx context.Context, tenantID, id string) (*model.APIKey, error)
	GetAPIKeyByHash(ctx context.Context, hash []byte) (*model.APIKey, error)
	// ListAPIKeys lists a tenant's keys, or one user's when userID is set,
	// newest first.
	ListAPIKeys(ctx context.Context, tenantID, userID string) ([]*model.APIKey, error)
	RevokeAPIKey(ctx context.Context, tenantID, id string, at time.Time) error
	TouchAPIKey(ctx context.Context, id string, at time.Time) error

	// GPU classes.
	CreateGPUClass(ctx context.Context, c *model.GPUClass) error
	UpdateGPUClass(ctx context.Context, c *model.GPUClass) error
	DeleteGPUClass(ctx context.Context, tenantID, id string) error
	GetGPUClass(ctx context.Context, tenantID, id string) (*model.GPUClass, error)
	ListGPUClasses(ctx context.Context, tenantID string) ([]*model.GPUClass, error)

	// Pools (with their execution priority, ProfileOrder).
	CreatePool(ctx context.Context, p *model.Pool) error
	UpdatePool(ctx context.Context, p *model.Pool) error
	DeletePool(ctx context.Context, tenantID, id string) error
	GetPool(ctx context.Context, tenantID, id string) (*model.Pool, error)
	ListPools(ctx context.Context, tenantID string) ([]*model.Pool, error)

	// Profiles (with their ordered pool links and queuing order).
	CreateProfile(ctx context.Context, p *model.Profile) error
	UpdateProfile(ctx context.Context, p *model.Profile) error
	DeleteProfile(ctx context.Context, tenantID, id string) error
	GetProfile(ctx context.Context, tenantID, id string) (*model.Profile, error)
	ListProfiles(ctx context.Context, tenantID string) ([]*model.Profile, error)

	// Resource policies, at most one per group.
	CreatePolicy(ctx context.Context, p *model.ResourcePolicy) error
	UpdatePolicy(ctx context.Context, p *model.ResourcePolicy) error
	DeletePolicy(ctx context.Context, tenantID, id string) error
	GetPolicy(ctx context.Context, tenantID, id string) (*model.ResourcePolicy, error)
	ListPolicies(ctx context.Context, tenantID string) ([]*model.ResourcePolicy, error)

	// Compute resources, unique per (policy, profile) and per (policy, name).
	CreateComputeResource(ctx context.Context, c *model.ComputeResource) error
	UpdateComputeResource(ctx context.Context, c *model.ComputeResource) error
	DeleteComputeResource(ctx context.Context, tenantID, id string) error
	GetComputeResource(ctx context.Context, tenantID, id string) (*model.ComputeResource, error)
	ListComputeResources(ctx context.Context, tenantID string) ([]*model.ComputeResource, error)

	// Projects.
	CreateProject(ctx context.Context, p *model.Project) error
	UpdateProject(ctx context.Context, p *model.Project) error
	DeleteProject(ctx context.Context, tenantID, id string) error
	GetProject(ctx context.Context, tenantID, id string) (*model.Project, error)
	GetProjectByName(ctx context.Context, tenantID, name string) (*model.Project, error)
	// ListProjects orders by name.
	ListProjects(ctx context.Context, tenantID string, page Page) ([]*model.Project, error)

	// Tasks. CreateTask assigns QueueSeq (strictly increasing across the
	// store) when it is 0.
	CreateTask(ctx context.Context, t *model.Task) error
	// UpdateTask writes every mutable field of t (status, reason, pool, spec,
	// times). It returns ErrNotFound if the task does not exist.
	UpdateTask(ctx context.Context, t *model.Task) error
	// UpdateLocalRun writes a change to a run in status local (a run on
	// its owner's machine): its name, spec, size, status, reason, compute
	// resource and the copies taken from it, UpdatedAt, FinishedAt and
	// exit code. A run that becomes queued takes the next queue sequence
	// number (into t.QueueSeq), so it waits behind work enqueued before
	// it was sent. It returns ErrConflict when no task of the tenant with
	// that id is local (callers read the task first, in the same
	// transaction, to say which).
	UpdateLocalRun(ctx context.Context, t *model.Task) error
	// TouchLocalRun sets a local run's UpdatedAt to at (its last report)
	// when it is still local and at is later; it reports whether it did.
	TouchLocalRun(ctx context.Context, tenantID, id string, at time.Time) (bool, error)
	GetTask(ctx context.Context, tenantID, id string) (*model.Task, error)
	// ListTasks orders by QueueSeq, newest first when newestFirst is set.
	// Page.After is a QueueSeq in decimal.
	ListTasks(ctx context.Context, tenantID string, f TaskFilter, page Page, newestFirst bool) ([]*model.Task, error)
	// CountTasks counts the tasks that match f.
	CountTasks(ctx context.Context, tenantID string, f TaskFilter) (int, error)
	// CountQueuedByGroup counts each group's queued tasks in one statement
	// (a group with none is absent): the organisation tree's view sums them
	// up its levels.
	CountQueuedByGroup(ctx context.Context, tenantID string) (map[string]int, error)
	// CountQueuedAhead counts queued tasks of a compute resource ahead of
	// the place at in queue order.
	CountQueuedAhead(ctx context.Context, tenantID, computeResourceID string, at QueuePlace) (int, error)
	// ListQueued lists a compute resource's queued tasks in queue order,
	// the first limit of them (all when limit is 0).
	ListQueued(ctx context.Context, tenantID, computeResourceID string, limit int) ([]*model.Task, error)

	// The team lead's queue order (issue 32). ProjectPriorities lists a
	// group's project priority, first first. SetProjectPriorities replaces
	// it and ranks the group's queued, placed and running tasks again by
	// their projects' new places (model.QueueRankUnlisted for the rest);
	// the projects must exist in the tenant (ErrNotFound).
	ProjectPriorities(ctx context.Context, tenantID, groupID string) ([]string, error)
	SetProjectPriorities(ctx context.Context, tenantID, groupID string, projectIDs []string) error
	// MoveQueuedTask moves a queued task next to another queued task of
	// its compute resource, or to the queue's front or back, atomically
	// (it changes only queue ranks and orders, never QueueSeq): it returns
	// the task's place (from 1) before and after. A task (or anchor) not
	// queued, an anchor in another compute resource or the task itself is
	// ErrConflict; an unknown one ErrNotFound.
	MoveQueuedTask(ctx context.Context, tenantID string, m QueueMove) (from, to int, err error)

	// Audit trail. InsertAudit assigns Seq. ListAudit is newest first;
	// Page.After is a Seq in decimal.
	InsertAudit(ctx context.Context, e *model.AuditEntry) error
	ListAudit(ctx context.Context, tenantID string, f AuditFilter, page Page) ([]*model.AuditEntry, error)

	// The engine and the usage ledger.

	// ListSchedulable returns what the engine decides from: every task that
	// holds capacity (placed or running) and, for each compute resource, the
	// first perQueue queued tasks in queue order. It reads only what
	// scheduling needs, so a pass over a million waiting tasks stays cheap.
	ListSchedulable(ctx context.Context, tenantID string, perQueue int) ([]SchedTask, error)
	// PlaceTasks moves queued tasks onto pools: each task whose status is
	// still queued becomes placed on the placement's pool, with reason, and
	// the placement's ledger interval opens. Tasks no longer queued (aborted
	// since the snapshot) are skipped. It returns the ids of tasks placed.
	PlaceTasks(ctx context.Context, tenantID string, ps []*model.Placement, reason func(*model.Placement) string) ([]string, error)
	// PreemptTasks sends placed or running tasks back to their queue, in
	// their old order (QueueSeq is kept), with reason, and closes their
	// ledger intervals at at. Tasks no longer placed or running are
	// skipped. It returns the ids of tasks preempted.
	PreemptTasks(ctx context.Context, tenantID string, ps []Preemption, at time.Time) ([]string, error)
	// EndPlacement closes a task's open ledger interval, if it has one.
	EndPlacement(ctx context.Context, tenantID, taskID string, at time.Time, reason string) error
	// ListPlacements lists ledger intervals that overlap [From, To), oldest
	// first.
	ListPlacements(ctx context.Context, tenantID string, f PlacementFilter) ([]*model.Placement, error)
	// SumUsage adds up the ledger over [from, to), cutting intervals at the
	// range's ends and counting open intervals up to now, grouped by the
	// given dimensions.
	SumUsage(ctx context.Context, tenantID string, q UsageQuery) ([]UsageRow, error)

	// The gateway configuration of a tenant, one document. GetGateway
	// returns an empty configuration when none was stored.
	GetGateway(ctx context.Context, tenantID string) (*model.Gateway, error)
	PutGateway(ctx context.Context, tenantID string, g *model.Gateway, at time.Time) error

	// The app catalogue of a tenant (its own entries and launch rules),
	// one document. GetApps returns an empty catalogue when none was
	// stored.
	GetApps(ctx context.Context, tenantID string) (*model.AppCatalogue, error)
	PutApps(ctx context.Context, tenantID string, c *model.AppCatalogue, at time.Time) error

	// The model-call ledger. InsertModelCalls records calls, skipping those
	// already recorded (the id is the gateway's request id).
	InsertModelCalls(ctx context.Context, calls []*model.ModelCall) error
	// SumModelCalls adds up the model-call ledger.
	SumModelCalls(ctx context.Context, tenantID string, q ModelUsageQuery) ([]ModelUsageRow, error)
	// ListModelCalls lists calls in [From, To), newest first; Page.After is
	// the id of the last call of the previous page.
	ListModelCalls(ctx context.Context, tenantID string, q ModelUsageQuery, page Page) ([]*model.ModelCall, error)

	// Queue states: why each compute resource's head waits.
	PutQueueState(ctx context.Context, s *model.QueueState) error
	// GetQueueState returns ErrNotFound when nothing waits in the compute
	// resource (or no pass has run since work arrived).
	GetQueueState(ctx context.Context, tenantID, computeResourceID string) (*model.QueueState, error)
	DeleteQueueState(ctx context.Context, tenantID, computeResourceID string) error
	ListQueueStates(ctx context.Context, tenantID string) ([]*model.QueueState, error)

	// Engine pauses. StartEnginePause returns ErrConflict when the engine is
	// already disabled; EndEnginePause ErrNotFound when it is not.
	StartEnginePause(ctx context.Context, p *model.EnginePause) error
	EndEnginePause(ctx context.Context, tenantID string, at time.Time) error
	// ListEnginePauses lists pauses that overlap [from, to) (open ones
	// included), oldest first.
	ListEnginePauses(ctx context.Context, tenantID string, from, to time.Time) ([]*model.EnginePause, error)

	// AcquireLease takes or renews the lease name for holder until now+ttl.
	// It reports false when another holder's lease has not expired.
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	// ReleaseLease gives the lease up, if holder holds it.
	ReleaseLease(ctx context.Context, name, holder string) error

	// EstateVersion returns the version of a tenant's allocation model: a
	// number that grows with every change (0 before the first).
	// BumpEstateVersion increments it, in the transaction of the change.
	EstateVersion(ctx context.Context, tenantID string) (int64, error)
	BumpEstateVersion(ctx context.Context, tenantID string) (int64, error)

	// InsertAudits inserts several audit entries at once, assigning each a
	// Seq (increasing in slice order) and an ID when they have none.
	InsertAudits(ctx context.Context, es []*model.AuditEntry) error

	// LockTenantShared is LockTenant's shared form: inside InTx it waits for
	// a change to the tenant's allocation model to commit and keeps one from
	// starting until the transaction ends, while other shared holders (task
	// enqueues) go on together.
	LockTenantShared(ctx context.Context, tenantID string) error

	// Worker credentials and workers. GetWorkerCredentialByHash looks across
	// tenants: the credential names its tenant and pool.
	CreateWorkerCredential(ctx context.Context, c *model.WorkerCredential) error
	GetWorkerCredentialByHash(ctx context.Context, hash []byte) (*model.WorkerCredential, error)
	ListWorkerCredentials(ctx context.Context, tenantID string) ([]*model.WorkerCredential, error)
	RevokeWorkerCredential(ctx context.Context, tenantID, id string, at time.Time) error
	// RegisterWorker creates the worker of (tenant, pool, hostname) or
	// updates it, and sets w.ID to its id.
	RegisterWorker(ctx context.Context, w *model.Worker) error
	GetWorker(ctx context.Context, tenantID, id string) (*model.Worker, error)
	ListWorkers(ctx context.Context, tenantID string) ([]*model.Worker, error)
	TouchWorker(ctx context.Context, tenantID, id string, at time.Time) error

	// ClaimTask moves the first task of a pool's hidden queue that fits
	// the claim from placed to running, for worker, in one statement: two
	// workers never claim the same task. The attempt number grows by one
	// and the lease runs until leaseUntil. ErrNotFound when nothing fits.
	// The task's reason becomes reason.
	ClaimTask(ctx context.Context, tenantID, poolID, workerID, reason string, fit ClaimFit, at, leaseUntil time.Time) (*model.Task, error)
	// Claimable reports whether ClaimTask would find a task now: a read,
	// so that a claim that finds nothing takes no write lock.
	Claimable(ctx context.Context, tenantID, poolID string, fit ClaimFit) (bool, error)
	// ExtendLeases extends the leases of a worker's running tasks whose
	// attempt matches, and returns the tasks as they are now (any status)
	// so the caller can tell which were stopped. It takes any number of
	// tasks (read in chunks that fit one statement).
	ExtendLeases(ctx context.Context, tenantID, workerID string, attempts map[string]int, until time.Time) ([]*model.Task, error)
	// SetAppAddress records where an app instance answers on its health
	// path (host:port; empty when it is not ready), for the running task
	// whose worker and attempt match; any other task is left as it is. A
	// claim clears it, so a new attempt starts not ready. The address's
	// rule (Allow) and refusal (Refused) are written with it.
	SetAppAddress(ctx context.Context, tenantID, workerID, taskID string, attempt int, address model.AppAddress) error
	// TouchAppActivity notes that a running app instance was used at at
	// (traffic through a router or the gateway, or GPU or CPU use over the
	// idle thresholds), for the session idle limits. It writes only when
	// the last note is AppActivityGrain or more older (so each replica
	// writes about once a minute per instance however busy it is) and
	// reports whether it wrote. Task ids are unique across tenants: the
	// caller is the control plane's own record of traffic it carried, which
	// knows the instance by id only.
	TouchAppActivity(ctx context.Context, taskID string, at time.Time) (bool, error)
	// SetAppIdleWarned records when a running app instance's attempt was
	// warned that its idle limits will stop it (at set; only when it was
	// not warned), or clears the warning (at nil; only when it was). It
	// reports whether it changed anything, so of several replicas
	// sweeping at once one alone tells of the warning.
	SetAppIdleWarned(ctx context.Context, tenantID, taskID string, attempt int, at *time.Time) (bool, error)
	// ListExpiredLeases lists running tasks whose lease ran out before now.
	ListExpiredLeases(ctx context.Context, tenantID string, now time.Time) ([]*model.Task, error)

	// AppendLogs adds a batch of a task's log lines, numbering them, up to
	// limitBytes for the task: past it the rest is dropped and one line
	// notes the truncation. It reports how many lines were kept and
	// whether the log is truncated. Concurrent batches for one attempt
	// are all kept. A batch with a line numbered more than
	// MaxLogNumberGap ahead of the attempt's highest is refused whole
	// (*LogNumberError).
	AppendLogs(ctx context.Context, tenantID, taskID string, attempt int, lines []model.LogLine, limitBytes int64) (int, bool, error)
	// ListLogs pages through a task's log in order after afterSeq; with
	// tail set it returns the last limit lines instead.
	ListLogs(ctx context.Context, tenantID, taskID string, afterSeq int64, limit int, tail bool) ([]model.LogLine, error)
	AppendMetrics(ctx context.Context, tenantID, taskID string, attempt int, points []model.MetricPoint) error
	// ListMetrics pages through a task's metric points (one name, or all
	// when name is empty) in order after afterSeq.
	ListMetrics(ctx context.Context, tenantID, taskID, name string, afterSeq int64, limit int) ([]model.MetricPoint, error)
	// LastMetrics returns the latest point of every metric of a task.
	LastMetrics(ctx context.Context, tenantID, taskID string) ([]model.MetricPoint, error)

	// Secrets. PutSecret creates or replaces; ListSecrets lists a scope's
	// secrets by name (ciphertexts included: the platform decides what
	// leaves it).
	PutSecret(ctx context.Context, s *model.Secret) error
	GetSecret(ctx context.Context, tenantID, scope, scopeID, name string) (*model.Secret, error)
	ListSecrets(ctx context.Context, tenantID, scope, scopeID string) ([]*model.Secret, error)
	DeleteSecret(ctx context.Context, tenantID, scope, scopeID, name string) error

	// LockTenant serialises changes to one tenant's allocation model. Inside
	// InTx the lock holds until the transaction ends, so two replicas
	// changing the same tenant's estate take turns; outside a transaction it
	// returns at once. (SQLite serialises write transactions anyway.)
	LockTenant(ctx context.Context, tenantID string) error

	// Settings are small server-wide values (the token signing key, whether
	// the engine is enabled). GetSetting returns ErrNotFound when unset.
	GetSetting(ctx context.Context, key string) (string, error)
	PutSetting(ctx context.Context, key, value string) error
	// PutSettingIfAbsent stores value unless key is set, and returns the value
	// the store holds afterwards. Replicas starting together agree on one.
	PutSettingIfAbsent(ctx context.Context, key, value string) (string, error)

	// Idempotency keys. CreateIdempotencyKey records the first use of a
	// key and returns ErrConflict when the key is already recorded for the
	// same tenant, user and operation (inside InTx on PostgreSQL, a second
	// transaction inserting the same key waits for the first to end).
	// GetIdempotencyKey returns ErrNotFound when the key is not recorded.
	// PruneIdempotencyKeys deletes the keys created before a time, in every
	// tenant, and returns how many.
	CreateIdempotencyKey(ctx context.Context, k *model.IdempotencyKey) error
	GetIdempotencyKey(ctx context.Context, tenantID, userID, operation, key string) (*model.IdempotencyKey, error)
	PruneIdempotencyKeys(ctx context.Context, before time.Time) (int64, error)
}

// Store is a driver: the queries plus transactions and lifecycle.
type Store interface {
	Queries
	// InTx runs fn in one transaction: it commits if fn returns nil and rolls
	// back otherwise (and if fn panics). fn must use only the Queries it is
	// given, never the Store, while it runs.
	InTx(ctx context.Context, fn func(q Queries) error) error
	// Ping checks the database answers.
	Ping(ctx context.Context) error
	// Driver names the driver: "sqlite" or "postgres".
	Driver() string
	Close() error
}
