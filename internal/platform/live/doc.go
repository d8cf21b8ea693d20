// Package live is the live domain of the platform service: GraphQL
// subscriptions and the read models they push (a compute resource's
// queue, one task, its log, the pools in use, the workers, a group's
// budget burn). Each subscriber's right to see each payload is checked
// again as identities change.
package live

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
	"github.com/klique-ai/klique/internal/store"
)

// Reads are what the live views read that other domains own. The
// platform facade wires them.
type Reads interface {
	// TaskLogs reads a task's log the caller may see.
	TaskLogs(ctx context.Context, t *model.Task, after int64, first, tail int) (*view.LogPage, error)
	// TenantWorkers lists a tenant's workers.
	TenantWorkers(ctx context.Context, tenantID string) ([]*view.WorkerView, error)
	// TenantPolicyView is one policy's view with its budget, as everyone
	// who may see its group sees it.
	TenantPolicyView(ctx context.Context, tenantID, policyID string, now time.Time) (*view.PolicyView, error)
	// TenantPolicyTree is the policy view of a tenant's whole
	// organisation tree; VisibleTree cuts it to what a subscriber may see
	// (from the node with rootID, when set): the allocation domain's rule.
	TenantPolicyTree(ctx context.Context, tenantID string, now time.Time) ([]*view.TreeNode, error)
	VisibleTree(p *identity.Principal, nodes []*view.TreeNode, rootID string) []*view.TreeNode
	// TenantModelTraffic sums a tenant's model calls over a range by
	// alias, group, project and user.
	TenantModelTraffic(ctx context.Context, tenantID string, from, to time.Time) ([]store.ModelUsageRow, error)
	// SeesModelCall is the llm domain's rule of which calls on the ledger
	// a caller may see.
	SeesModelCall(p *identity.Principal, groupID, projectID, userID string) bool
	// AppInstance reads an app instance the caller may see;
	// TenantAppInstance reads one on the platform's own behalf (nil, nil
	// for a task that is not an app instance), with its runtime and idle
	// state; SeesAppInstance is the apps domain's rule of who may see one.
	AppInstance(ctx context.Context, id string) (*model.AppInstance, error)
	TenantAppInstance(ctx context.Context, tenantID, id string) (*model.AppInstance, error)
	SeesAppInstance(p *identity.Principal, t *model.Task) bool
	// TenantSchedule reads a schedule on the platform's own behalf (nil,
	// nil when it is gone); SeesSchedule is the schedules domain's rule
	// of who may see one.
	TenantSchedule(ctx context.Context, tenantID, id string) (*model.Schedule, error)
	SeesSchedule(p *identity.Principal, sc *model.Schedule) bool
}

// Options configure the live domain.
type Options struct {
	// Auth checks subscribers' credentials.
	Auth *identity.Authenticator
	// Heartbeat is how often workers send one, and so how often the pool
	// and worker views look for workers gone quiet; Lease is how long a
	// worker stays online without one.
	Heartbeat, Lease time.Duration
	// Limits cap the subscriptions one client may hold; zero fields take
	// their defaults.
	Limits SubscriptionLimits
}

// Live is the live domain.
type Live struct {
	k     *kernel.Kernel
	auth  *identity.Authenticator
	reads Reads
	agent Options
	subs  subscriptions
}

// New returns the live domain over a kernel. Subscribers re-check their
// credential after every identity change the kernel sees.
func New(k *kernel.Kernel, reads Reads, o Options) *Live {
	s := &Live{k: k, auth: o.Auth, reads: reads, agent: o}
	s.subs.limits = o.Limits
	k.OnIdentityChange(s.recheckSubscribers)
	return s
}

// IdentityGeneration is how many identity changes subscribers have been
// told of, for tests of when they are told.
func (s *Live) IdentityGeneration() uint64 { return s.subs.identityGen.Load() }
