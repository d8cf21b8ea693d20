package live

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Live subscriptions. Each kind of subscription has one feed per topic (one
// compute resource's queue, one task, one tenant's pools...), shared by all
// who watch it: the feed listens on the event bus, reads the store once per
// event and builds one payload, and the hub hands it to every subscriber's
// bounded buffer (see events.Hub). Each subscriber then checks, for every
// payload, that its caller may still see it (tenant, group, project) with
// its credential checked again, so a member removed from a group or a
// revoked key stops receiving at once rather than at the next connection.

// SubscriptionLimits bound what one client may hold open.
type SubscriptionLimits struct {
	// PerConnection caps the subscriptions one WebSocket connection runs
	// at once.
	PerConnection int
	// ConnectionsPerUser caps one user's open WebSocket connections on
	// this replica.
	ConnectionsPerUser int
	// Buffer is how many payloads wait for a slow subscriber before the
	// oldest are dropped.
	Buffer int
}

// Default subscription limits.
const (
	DefaultSubscriptionsPerConnection = 100
	DefaultConnectionsPerUser         = 20
	DefaultSubscriptionBuffer         = 16
)

// subscriptions is the service's subscription state.
type subscriptions struct {
	mu     sync.Mutex
	limits SubscriptionLimits
	conns  map[string]int
	auth   singleflight.Group
	// identityGen counts changes to users, memberships, keys and tenants
	// (from any replica, through the bus), so that subscribers re-check
	// their credential at once after one; watchIdentity starts the count.
	identityGen   atomic.Uint64
	watchIdentity sync.Once

	queues  events.Hub[*QueueUpdate]
	tasks   events.Hub[*TaskUpdate]
	logs    events.Hub[*logSignal]
	pools   events.Hub[*PoolUtilization]
	workers events.Hub[*WorkerUpdate]
	budgets events.Hub[*BudgetBurnUpdate]
	trees   events.Hub[*PolicyTreeUpdate]
	traffic events.Hub[*GatewayTraffic]
	apps    events.Hub[*AppInstanceUpdate]
	// objects are other domains' objects (FollowObject).
	objects events.Hub[*ObjectUpdate]
	// schedules follows the schedules (schedules.go).
	schedules events.Hub[*ScheduleUpdate]
}

func (s *Live) subscriptionLimits() SubscriptionLimits {
	s.subs.mu.Lock()
	l := s.subs.limits
	s.subs.mu.Unlock()
	if l.PerConnection <= 0 {
		l.PerConnection = DefaultSubscriptionsPerConnection
	}
	if l.ConnectionsPerUser <= 0 {
		l.ConnectionsPerUser = DefaultConnectionsPerUser
	}
	if l.Buffer <= 0 {
		l.Buffer = DefaultSubscriptionBuffer
	}
	return l
}

// SubscriberCount returns how many subscribe to a compute resource's queue
// on this replica (for tests and metrics).
func (s *Live) SubscriberCount(tenantID, computeResourceID string) int {
	return s.subs.queues.Subscribers(queueTopic(tenantID, computeResourceID))
}

// SubscriptionsDropped returns how many payloads this replica dropped for
// subscribers that read too slowly.
func (s *Live) SubscriptionsDropped() uint64 {
	return s.subs.queues.Dropped() + s.subs.tasks.Dropped() + s.subs.logs.Dropped() +
		s.subs.pools.Dropped() + s.subs.workers.Dropped() + s.subs.budgets.Dropped() + s.subs.trees.Dropped() + s.subs.traffic.Dropped()
}

// subscriptionConn is one WebSocket connection's state.
type subscriptionConn struct {
	credential string
	key        string
	open       atomic.Int32
	// checked is the principal as last checked, with the identity
	// generation and time of the check.
	checked atomic.Pointer[checkedPrincipal]
}

type checkedPrincipal struct {
	p   *identity.Principal
	gen uint64
	at  time.Time
}

// principalRecheck bounds how long a subscriber's checked credential is
// used when no identity change is seen (a change through another replica
// without Redis, an expired token).
const principalRecheck = time.Second

// recheckSubscribers makes every subscriber re-check its credential before
// its next payload. It runs as a kernel identity-change hook: a change
// made in this replica runs it before its events are published, so that
// no update published after the change (a task enqueued the moment a
// member leaves) is delivered on the strength of a check made before it;
// the watcher in OpenSubscriptions runs the hooks for changes made through
// other replicas, which arrive on the bus. The access domain's hook, which
// runs first, drops the authenticator's cached checks, so that the
// re-check sees the change.
func (s *Live) recheckSubscribers() { s.subs.identityGen.Add(1) }

type connKey struct{}

// OpenSubscriptions authenticates a WebSocket connection from the
// credential its client sent in connection_init (or, when it sent none, the
// one its upgrade request was authenticated with), and counts it against
// its user's cap. Either way the credential is kept and checked again
// after identity changes, so a revoked key or a member who left a group
// stops receiving updates. It returns the context the connection's
// subscriptions run in and a release to call when the connection ends.
func (s *Live) OpenSubscriptions(ctx context.Context, credential string) (context.Context, func(), error) {
	var p *identity.Principal
	if credential == "" {
		// The upgrade request was authenticated already: its principal
		// stands until the first re-check.
		credential = identity.CredentialFrom(ctx)
		p, _ = identity.PrincipalFrom(ctx)
	}
	if credential == "" {
		return ctx, nil, kernel.Unauthenticated("send your credential in connection_init: {\"Authorization\": \"Bearer <API key or access token>\"}")
	}
	c := &subscriptionConn{credential: credential}
	if p == nil {
		var err error
		if p, err = s.auth.Authenticate(ctx, credential); err != nil {
			if errors.Is(err, identity.ErrUnauthenticated) {
				return ctx, nil, kernel.Unauthenticated("%s", err.Error())
			}
			return ctx, nil, s.k.Internal(ctx, fmt.Errorf("authenticate a subscription connection: %w", err))
		}
	}
	sum := sha256.Sum256([]byte(credential))
	c.key = string(sum[:])
	s.subs.watchIdentity.Do(func() {
		sub := s.k.Events.Subscribe(256, func(e events.Event) bool { return kernel.IdentityKind(e.Kind) })
		go func() {
			for range sub.C {
				s.k.IdentityChanged()
			}
		}()
	})
	c.checked.Store(&checkedPrincipal{p: p, gen: s.subs.identityGen.Load(), at: time.Now()})
	user := p.TenantID + "/" + p.UserID
	limit := s.subscriptionLimits().ConnectionsPerUser
	s.subs.mu.Lock()
	if s.subs.conns == nil {
		s.subs.conns = map[string]int{}
	}
	if s.subs.conns[user] >= limit {
		s.subs.mu.Unlock()
		return ctx, nil, kernel.Forbidden("you have %d subscription connections open, the most allowed (KLIQUE_SUBSCRIPTION_CONNECTIONS_PER_USER); close one, or run several subscriptions over one connection", limit)
	}
	s.subs.conns[user]++
	s.subs.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.subs.mu.Lock()
			if s.subs.conns[user]--; s.subs.conns[user] <= 0 {
				delete(s.subs.conns, user)
			}
			s.subs.mu.Unlock()
		})
	}
	ctx = identity.WithPrincipal(ctx, p)
	return context.WithValue(ctx, connKey{}, c), release, nil
}

// connOf returns the WebSocket connection a subscription runs on (nil
// outside one). Subscriptions look it up once, not per payload: the
// context chain under a GraphQL subscription is long.
func connOf(ctx context.Context) *subscriptionConn {
	c, _ := ctx.Value(connKey{}).(*subscriptionConn)
	return c
}

// startSubscription counts a subscription against its connection's cap.
func (s *Live) startSubscription(ctx context.Context) (func(), error) {
	c := connOf(ctx)
	if c == nil {
		return func() {}, nil
	}
	limit := s.subscriptionLimits().PerConnection
	if n := c.open.Add(1); int(n) > limit {
		c.open.Add(-1)
		return nil, kernel.Forbidden("this connection runs %d subscriptions, the most allowed (KLIQUE_SUBSCRIPTIONS_PER_CONNECTION); stop one first or open another connection", limit)
	}
	var once sync.Once
	return func() { once.Do(func() { c.open.Add(-1) }) }, nil
}

// startTenantSubscription starts a subscription to what the caller's
// tenant holds: the tenant, and the release of the subscription's place
// under its connection's cap.
func (s *Live) startTenantSubscription(ctx context.Context) (tenantID string, release func(), err error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return "", nil, err
	}
	if release, err = s.startSubscription(ctx); err != nil {
		return "", nil, err
	}
	return p.TenantID, release, nil
}

// failSubscription ends a subscription whose first read failed, with undo
// (leaving its topic, freeing its place under the cap), and returns the
// failure as the internal error the caller is told of.
func (s *Live) failSubscription(ctx context.Context, err error, undo ...func()) error {
	for _, f := range undo {
		f()
	}
	return s.k.Internal(ctx, err)
}

// errCredentialGone ends a subscription whose credential no longer holds.
var errCredentialGone = errors.New("credential no longer valid")

// subscriber returns the caller as it is now: its credential is checked
// again after any change to users, memberships, keys or tenants, and at
// least every principalRecheck, so group changes and revocations apply to
// the next payload. Between changes the last check stands: re-checking for
// each of 10,000 subscribers on every event would cost more than the
// delivery.
func (s *Live) subscriber(ctx context.Context, c *subscriptionConn) (*identity.Principal, error) {
	if c == nil || c.credential == "" {
		return kernel.Caller(ctx)
	}
	gen := s.subs.identityGen.Load()
	last := c.checked.Load()
	if last.gen == gen && time.Since(last.at) < principalRecheck {
		return last.p, nil
	}
	// Thousands of subscriptions of one credential would all re-check at
	// the same moment; one check serves them all.
	// The generation is part of the key: a check begun before a change
	// must not answer for one that saw it.
	v, err, _ := s.subs.auth.Do(c.key+strconv.FormatUint(gen, 10), func() (any, error) {
		return s.auth.AuthenticateCached(context.WithoutCancel(ctx), c.credential)
	})
	switch {
	case errors.Is(err, identity.ErrUnauthenticated):
		return nil, errCredentialGone
	case err != nil:
		// The store is unreachable for a moment: go on with what was
		// last known rather than cut every live view.
		s.k.Log.WarnContext(ctx, "recheck a subscriber's credential", "err", err)
		return last.p, nil
	}
	p := v.(*identity.Principal)
	c.checked.Store(&checkedPrincipal{p: p, gen: gen, at: time.Now()})
	return p, nil
}
