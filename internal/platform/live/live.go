package live

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
	"github.com/klique-ai/klique/internal/store"
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

// maxQueueListed bounds the waiting and running tasks a queue update lists.
const maxQueueListed = 200

// budgetTick is how often a budgetBurn subscription gets a fresh view while
// nothing happens: running work burns budget by the minute.
const budgetTick = time.Minute

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
}

// SetSubscriptionLimits sets the caps on subscriptions; zero fields keep
// their defaults.
func (s *Live) SetSubscriptionLimits(l SubscriptionLimits) {
	s.subs.mu.Lock()
	s.subs.limits = l
	s.subs.mu.Unlock()
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
		s.subs.pools.Dropped() + s.subs.workers.Dropped() + s.subs.budgets.Dropped()
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

// pump starts r's delivery to one subscriber: what check lets the caller
// see of first (its snapshot) and of each payload after it, told how many
// payloads were missed, until ctx ends or the credential stops holding.
// The hub hands each payload straight to the subscriber's channel (no
// goroutine per subscriber); the channel is closed at the end, and release
// called.
func pump[T any](ctx context.Context, s *Live, r *events.Receiver[T], release func(), first []T,
	check func(p *identity.Principal, v T) (T, bool), missed func(v T, n int) T) <-chan T {
	conn := connOf(ctx)
	// The snapshot goes through the same check as every later payload
	// (a project-scoped credential sees its project's tasks only).
	var shown []T
	if p, err := s.subscriber(ctx, conn); err == nil && p != nil {
		for _, v := range first {
			if v, ok := check(p, v); ok {
				shown = append(shown, v)
			}
		}
	}
	r.Start(shown, func(v T, n int) (T, bool, bool) {
		var zero T
		p, err := s.subscriber(ctx, conn)
		if err != nil || p == nil {
			return zero, false, true
		}
		v, ok := check(p, v)
		if !ok {
			return zero, false, false
		}
		if n > 0 {
			v = missed(v, n)
		}
		return v, true, false
	}, release)
	context.AfterFunc(ctx, r.Close)
	return r.C()
}

// feed builds a topic's feed from the event bus: events that filter
// accepts are taken in batches (what arrived while the previous batch was
// being built) and build turns each batch into payloads. When tick is set,
// onTick adds payloads on a timer.
func feed[T any](s *Live, filter func(events.Event) bool, build func(ctx context.Context, batch []events.Event) []T,
	tick time.Duration, onTick func(ctx context.Context) []T) events.Feed[T] {
	return func(publish func(T)) func() {
		sub := s.k.Events.Subscribe(1024, filter)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			var tc <-chan time.Time
			if tick > 0 && onTick != nil {
				t := time.NewTicker(tick)
				defer t.Stop()
				tc = t.C
			}
			for {
				var batch []events.Event
				select {
				case <-ctx.Done():
					return
				case <-tc:
					for _, v := range onTick(ctx) {
						publish(v)
					}
					continue
				case e, ok := <-sub.C:
					if !ok {
						return
					}
					batch = append(batch, e)
				}
			more:
				for len(batch) < 256 {
					select {
					case e, ok := <-sub.C:
						if !ok {
							break more
						}
						batch = append(batch, e)
					default:
						break more
					}
				}
				for _, v := range build(ctx, batch) {
					publish(v)
				}
			}
		}()
		return func() {
			cancel()
			sub.Close()
			<-done
		}
	}
}

// taskKinds are the task events the queue, task and pool views follow.
// task.finished is left out: the same end is also published as
// task.completed, task.failed or task.aborted.
func taskLifecycle(kind string) bool {
	switch kind {
	case "task.enqueued", "task.placed", "task.started", "task.preempted", "task.requeued",
		"task.completed", "task.failed", "task.aborted", "task.queued":
		return true
	}
	return false
}

// eventKind is the kind a subscriber sees: a task its environment sent
// back to its queue is published as task.queued, and is a preemption.
func eventKind(kind string) string {
	if kind == "task.queued" {
		return "task.preempted"
	}
	return kind
}

// --- queueChanged ---

// QueuedTask is a waiting task with its place in line and why it waits.
type QueuedTask struct {
	Position int
	Reason   string
	Task     *model.Task
}

// QueueUpdate is a compute resource's queue after something changed in it.
type QueueUpdate struct {
	TenantID        string
	GroupID         string
	Kind            string
	At              time.Time
	ComputeResource *model.ComputeResource
	Task            *model.Task
	Waiting         []QueuedTask
	Running         []*model.Task
	QueueState      *model.QueueState
	Missed          int
}

func queueTopic(tenantID, crID string) string { return "queue|" + tenantID + "|" + crID }

// SubscribeQueue follows a compute resource's queue: a snapshot first, then
// an update for each enqueue, placement, preemption, requeue and finish,
// with the waiting tasks' positions.
func (s *Live) SubscribeQueue(ctx context.Context, computeResourceRef string) (<-chan *QueueUpdate, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	cr, err := s.k.ComputeResource(ctx, computeResourceRef)
	if err != nil {
		return nil, err
	}
	release, err := s.startSubscription(ctx)
	if err != nil {
		return nil, err
	}
	tenantID, crID := p.TenantID, cr.ID
	groupID := ""
	if e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID); err == nil {
		if pol := e.Policy(cr.PolicyID); pol != nil {
			groupID = pol.GroupID
		}
	}
	r := s.subs.queues.Join(queueTopic(tenantID, crID), s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			// Task events carry their group: only the compute resource's
			// group's tasks can be in its queue, so others are not read.
			return e.TenantID == tenantID && (e.ObjectKind == "task" && taskLifecycle(e.Kind) && (groupID == "" || e.GroupID == "" || e.GroupID == groupID) ||
				e.ObjectID == crID && (e.Kind == "queue.changed" || e.ObjectKind == "compute_resource"))
		},
		func(ctx context.Context, batch []events.Event) []*QueueUpdate {
			return s.queueUpdates(ctx, tenantID, crID, batch)
		}, 0, nil))
	first, err := s.queueSnapshot(ctx, tenantID, crID, "snapshot", nil, s.k.Now())
	if err != nil {
		r.Close()
		release()
		return nil, s.k.Internal(ctx, err)
	}
	return pump(ctx, s, r, release, []*QueueUpdate{first}, checkQueue, func(u *QueueUpdate, n int) *QueueUpdate {
		c := *u
		c.Missed = n
		return &c
	}), nil
}

// checkQueue lets through what p may see of a queue update.
func checkQueue(p *identity.Principal, u *QueueUpdate) (*QueueUpdate, bool) {
	if p.TenantID != u.TenantID || !kernel.SeesGroup(p, u.GroupID) {
		return nil, false
	}
	if p.ProjectID == "" {
		return u, true
	}
	// A project-scoped credential sees only its project's tasks.
	c := *u
	if c.Task != nil && !kernel.SeesTask(p, c.Task) {
		c.Task = nil
	}
	c.Waiting, c.Running = nil, nil
	for _, w := range u.Waiting {
		if kernel.SeesTask(p, w.Task) {
			c.Waiting = append(c.Waiting, w)
		}
	}
	for _, t := range u.Running {
		if kernel.SeesTask(p, t) {
			c.Running = append(c.Running, t)
		}
	}
	return &c, true
}

// queueUpdates turns a batch of events into updates of one queue: one per
// event about it, all sharing one snapshot read after the batch.
func (s *Live) queueUpdates(ctx context.Context, tenantID, crID string, batch []events.Event) []*QueueUpdate {
	type about struct {
		kind string
		task *model.Task
		at   time.Time
	}
	var abouts []about
	for _, e := range batch {
		if e.ObjectKind != "task" {
			abouts = append(abouts, about{kind: e.Kind, at: e.At})
			continue
		}
		t, err := s.k.Store.GetTask(ctx, tenantID, e.ObjectID)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
				s.k.Log.Warn("queue subscription: read task", "task", e.ObjectID, "err", err)
			}
			continue
		}
		if t.ComputeResourceID == crID {
			abouts = append(abouts, about{kind: eventKind(e.Kind), task: t, at: e.At})
		}
	}
	if len(abouts) == 0 {
		return nil
	}
	snap, err := s.queueSnapshot(ctx, tenantID, crID, "", nil, abouts[len(abouts)-1].at)
	if err != nil {
		if ctx.Err() == nil {
			s.k.Log.Warn("queue subscription: read queue", "compute_resource", crID, "err", err)
		}
		return nil
	}
	out := make([]*QueueUpdate, 0, len(abouts))
	for _, a := range abouts {
		u := *snap
		u.Kind, u.Task, u.At = a.kind, a.task, a.at
		if u.At.IsZero() {
			u.At = s.k.Now()
		}
		out = append(out, &u)
	}
	return out
}

// queueSnapshot reads a queue as it is now.
func (s *Live) queueSnapshot(ctx context.Context, tenantID, crID, kind string, task *model.Task, at time.Time) (*QueueUpdate, error) {
	e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	cr := e.ComputeResource(crID)
	if cr == nil {
		return nil, fmt.Errorf("compute resource %s is gone", crID)
	}
	u := &QueueUpdate{TenantID: tenantID, Kind: kind, At: at, ComputeResource: cr, Task: task}
	if pol := e.Policy(cr.PolicyID); pol != nil {
		u.GroupID = pol.GroupID
	}
	waiting, err := s.k.Store.ListTasks(ctx, tenantID, store.TaskFilter{ComputeResourceID: crID,
		Statuses: []model.TaskStatus{model.TaskQueued}}, model.Page{Limit: maxQueueListed}, false)
	if err != nil {
		return nil, fmt.Errorf("list waiting tasks: %w", err)
	}
	if u.Running, err = s.k.Store.ListTasks(ctx, tenantID, store.TaskFilter{ComputeResourceID: crID,
		Statuses: []model.TaskStatus{model.TaskPlaced, model.TaskRunning}}, model.Page{Limit: maxQueueListed}, false); err != nil {
		return nil, fmt.Errorf("list running tasks: %w", err)
	}
	qs, err := s.k.Store.GetQueueState(ctx, tenantID, crID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		qs = nil
	case err != nil:
		return nil, fmt.Errorf("read queue state: %w", err)
	}
	if len(waiting) > 0 {
		u.QueueState = qs
	}
	u.Waiting = make([]QueuedTask, len(waiting))
	for i, t := range waiting {
		u.Waiting[i] = QueuedTask{Position: i + 1, Reason: engine.WaitingReason(t, i+1, qs), Task: t}
	}
	return u, nil
}

// --- taskEvents ---

// TaskUpdate is a task after it changed.
type TaskUpdate struct {
	Kind   string
	At     time.Time
	Task   *model.Task
	Missed int
}

// SubscribeTask follows one task's changes: a snapshot first, then each
// state change and new metric points.
func (s *Live) SubscribeTask(ctx context.Context, id string) (<-chan *TaskUpdate, error) {
	t, err := s.k.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	release, err := s.startSubscription(ctx)
	if err != nil {
		return nil, err
	}
	tenantID, taskID := t.TenantID, t.ID
	r := s.subs.tasks.Join("task|"+tenantID+"|"+taskID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			return e.TenantID == tenantID && e.ObjectKind == "task" && e.ObjectID == taskID &&
				(taskLifecycle(e.Kind) || e.Kind == "task.metrics")
		},
		func(ctx context.Context, batch []events.Event) []*TaskUpdate {
			cur, err := s.k.Store.GetTask(ctx, tenantID, taskID)
			if err != nil {
				return nil
			}
			var out []*TaskUpdate
			for i, e := range batch {
				if e.Kind == "task.metrics" && i < len(batch)-1 && batch[i+1].Kind == "task.metrics" {
					continue // a burst of metric points is one update
				}
				out = append(out, &TaskUpdate{Kind: eventKind(e.Kind), At: e.At, Task: cur})
			}
			return out
		}, 0, nil))
	return pump(ctx, s, r, release, []*TaskUpdate{{Kind: "snapshot", At: s.k.Now(), Task: t}},
		func(p *identity.Principal, u *TaskUpdate) (*TaskUpdate, bool) {
			return u, p.TenantID == u.Task.TenantID && kernel.SeesTask(p, u.Task)
		}, func(u *TaskUpdate, n int) *TaskUpdate {
			c := *u
			c.Missed = n
			return &c
		}), nil
}

// --- taskLogs ---

// LogUpdate is new lines of a task's log.
type LogUpdate struct {
	Lines     []model.LogLine
	LastSeq   int64
	Truncated bool
	Done      bool
	Missed    int
}

// logSignal says a task's log grew or the task ended. Each subscriber reads
// on from its own place, so a dropped signal loses no lines.
type logSignal struct {
	ended bool
	// dropped is how many signals were dropped before this one.
	dropped int
}

// SubscribeTaskLogs tails a task's log: the lines after after (or the last
// tail lines) first, then new lines as the worker sends them, until the task
// ends.
func (s *Live) SubscribeTaskLogs(ctx context.Context, id string, after *int64, tail int) (<-chan *LogUpdate, error) {
	t, err := s.k.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	if after != nil && *after < 0 {
		return nil, kernel.Invalid("after must be a log line's seq (0 or more), not %d", *after)
	}
	if tail < 0 || tail > 5000 {
		return nil, kernel.Invalid("tail must be between 0 and 5000 lines, not %d", tail)
	}
	release, err := s.startSubscription(ctx)
	if err != nil {
		return nil, err
	}
	tenantID, taskID := t.TenantID, t.ID
	r := s.subs.logs.Join("logs|"+tenantID+"|"+taskID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			return e.TenantID == tenantID && e.ObjectKind == "task" && e.ObjectID == taskID &&
				(e.Kind == "task.logs" || taskLifecycle(e.Kind))
		},
		func(ctx context.Context, batch []events.Event) []*logSignal {
			cur, err := s.k.Store.GetTask(ctx, tenantID, taskID)
			if err != nil {
				return nil
			}
			return []*logSignal{{ended: cur.Status.Final()}}
		}, 0, nil))
	var page *view.LogPage
	if after != nil {
		page, err = s.reads.TaskLogs(ctx, t, *after, 5000, 0)
	} else {
		page, err = s.reads.TaskLogs(ctx, t, 0, 0, max(tail, 1))
		if err == nil && tail == 0 {
			page.Lines = nil
		}
	}
	if err != nil {
		r.Close()
		release()
		return nil, err
	}
	first := &LogUpdate{Lines: page.Lines, LastSeq: page.LastSeq, Truncated: page.Truncated, Done: t.Status.Final()}
	if first.Lines == nil {
		first.Lines = []model.LogLine{}
	}
	// Signals are only told how many were dropped; the lines are read from
	// the store, so a dropped signal loses none.
	r.Start(nil, func(sig *logSignal, n int) (*logSignal, bool, bool) {
		return &logSignal{ended: sig.ended, dropped: n}, true, false
	}, release)
	out := make(chan *LogUpdate)
	go func() {
		defer close(out)
		defer r.Close()
		last := first.LastSeq
		conn := connOf(ctx)
		send := func(u *LogUpdate) bool {
			select {
			case out <- u:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !send(first) || first.Done {
			return
		}
		for {
			var sig *logSignal
			var ok bool
			select {
			case <-ctx.Done():
				return
			case sig, ok = <-r.C():
				if !ok {
					return
				}
			}
			ended, missed := sig.ended, sig.dropped
		drain:
			for {
				select {
				case sig, ok = <-r.C():
					if !ok {
						return
					}
					ended, missed = ended || sig.ended, missed+sig.dropped
				default:
					break drain
				}
			}
			p, err := s.subscriber(ctx, conn)
			if err != nil || p == nil || p.TenantID != tenantID {
				return
			}
			cur, err := s.k.Store.GetTask(ctx, tenantID, taskID)
			if err != nil || !kernel.SeesTask(p, cur) {
				return
			}
			// Read on until the log is drained, in pages.
			for {
				lines, err := s.k.Store.ListLogs(ctx, tenantID, taskID, last, 1000, false)
				if err != nil {
					if ctx.Err() == nil {
						s.k.Log.WarnContext(ctx, "log subscription: read log", "task", taskID, "err", err)
					}
					return
				}
				u := &LogUpdate{Lines: lines, LastSeq: last, Missed: missed}
				if n := len(lines); n > 0 {
					u.LastSeq = lines[n-1].Seq
					u.Truncated = strings.HasPrefix(lines[n-1].Line, "[klique: the log of this task reached its limit")
				}
				last = u.LastSeq
				more := len(lines) == 1000
				u.Done = ended && !more
				if len(lines) > 0 || u.Done {
					if !send(u) {
						return
					}
					missed = 0
				}
				if u.Done {
					return
				}
				if !more {
					break
				}
			}
		}
	}()
	return out, nil
}

// --- poolUtilization ---

// samePoolUse reports whether two views of a tenant's pools hold the same
// figures (what a tick would tell a subscriber nothing new about).
func samePoolUse(a, b *PoolUtilization) bool {
	if len(a.Pools) != len(b.Pools) || len(a.GPUClasses) != len(b.GPUClasses) {
		return false
	}
	for i := range a.Pools {
		x, y := a.Pools[i], b.Pools[i]
		if x.Pool.ID != y.Pool.ID || x.Declared != y.Declared || x.Used != y.Used || x.Free != y.Free ||
			x.OnlineWorkers != y.OnlineWorkers || x.Workers != y.Workers {
			return false
		}
	}
	for i := range a.GPUClasses {
		x, y := a.GPUClasses[i], b.GPUClasses[i]
		if x.GPUClass.ID != y.GPUClass.ID || x.Declared != y.Declared || x.Used != y.Used || x.Free != y.Free {
			return false
		}
	}
	return true
}

// PoolUse is one pool's declared and used GPUs.
type PoolUse struct {
	Pool          *model.Pool
	Declared      int
	Used, Free    model.MilliGPU
	OnlineWorkers int
	Workers       int
}

// UsedGPUs is Used in GPUs, as the API shows it.
func (u *PoolUse) UsedGPUs() float64 { return u.Used.Float() }

// FreeGPUs is Free in GPUs, as the API shows it.
func (u *PoolUse) FreeGPUs() float64 { return u.Free.Float() }

// GPUClassUse is one GPU class's declared and used GPUs over all pools.
type GPUClassUse struct {
	GPUClass   *model.GPUClass
	Declared   int
	Used, Free model.MilliGPU
}

// UsedGPUs is Used in GPUs, as the API shows it.
func (u *GPUClassUse) UsedGPUs() float64 { return u.Used.Float() }

// FreeGPUs is Free in GPUs, as the API shows it.
func (u *GPUClassUse) FreeGPUs() float64 { return u.Free.Float() }

// PoolUtilization is a tenant's estate in use.
type PoolUtilization struct {
	TenantID   string
	Kind       string
	At         time.Time
	Pools      []PoolUse
	GPUClasses []GPUClassUse
	Missed     int
}

// SubscribePoolUtilization follows used and declared GPUs per pool and per
// GPU class: what everyone in a tenant may see of the capacity serving it.
func (s *Live) SubscribePoolUtilization(ctx context.Context) (<-chan *PoolUtilization, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	release, err := s.startSubscription(ctx)
	if err != nil {
		return nil, err
	}
	tenantID := p.TenantID
	// last is what the topic's feed published last, starting from the view
	// now (used only when this call starts the topic's feed); the feed's
	// build and tick run on its one goroutine, so it needs no lock.
	last, err := s.poolUtilization(ctx, tenantID, "snapshot")
	if err != nil {
		release()
		return nil, s.k.Internal(ctx, err)
	}
	r := s.subs.pools.Join("pools|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			return e.TenantID == tenantID && (e.ObjectKind == "task" && taskLifecycle(e.Kind) && e.Kind != "task.enqueued" ||
				e.ObjectKind == "pool" || e.ObjectKind == "gpu_class" || e.Kind == "worker.registered")
		},
		func(ctx context.Context, batch []events.Event) []*PoolUtilization {
			u, err := s.poolUtilization(ctx, tenantID, batch[len(batch)-1].Kind)
			if err != nil {
				if ctx.Err() == nil {
					s.k.Log.Warn("pool subscription: read pools", "err", err)
				}
				return nil
			}
			last = u
			return []*PoolUtilization{u}
		}, s.agent.Heartbeat, func(ctx context.Context) []*PoolUtilization {
			// Worker counts change when heartbeats stop, with no event: a
			// tick looks, and tells only when something did change.
			u, err := s.poolUtilization(ctx, tenantID, "tick")
			if err != nil || (last != nil && samePoolUse(last, u)) {
				return nil
			}
			last = u
			return []*PoolUtilization{u}
		}))
	first, err := s.poolUtilization(ctx, tenantID, "snapshot")
	if err != nil {
		r.Close()
		release()
		return nil, s.k.Internal(ctx, err)
	}
	return pump(ctx, s, r, release, []*PoolUtilization{first},
		func(p *identity.Principal, u *PoolUtilization) (*PoolUtilization, bool) {
			return u, p.TenantID == u.TenantID
		},
		func(u *PoolUtilization, n int) *PoolUtilization {
			c := *u
			c.Missed = n
			return &c
		}), nil
}

func (s *Live) poolUtilization(ctx context.Context, tenantID, kind string) (*PoolUtilization, error) {
	e, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	held, err := s.k.Store.ListSchedulable(ctx, tenantID, 0)
	if err != nil {
		return nil, fmt.Errorf("list tasks holding capacity: %w", err)
	}
	ws, err := s.k.Store.ListWorkers(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	now := s.k.Now()
	used := map[string]model.MilliGPU{}
	for _, t := range held {
		if t.PoolID != "" && t.Status != model.TaskQueued {
			used[t.PoolID] += t.Size.Total()
		}
	}
	online, total := map[string]int{}, map[string]int{}
	for _, w := range ws {
		total[w.PoolID]++
		if now.Sub(w.LastHeartbeatAt) <= s.agent.Lease {
			online[w.PoolID]++
		}
	}
	u := &PoolUtilization{TenantID: tenantID, Kind: kind, At: now}
	classes := map[string]*GPUClassUse{}
	for _, pool := range e.Pools {
		pu := PoolUse{Pool: pool, Declared: pool.CapacityGPUs, Used: used[pool.ID], OnlineWorkers: online[pool.ID], Workers: total[pool.ID]}
		pu.Free = max(0, model.GPUs(pool.CapacityGPUs)-pu.Used)
		u.Pools = append(u.Pools, pu)
		c := classes[pool.GPUClassID]
		if c == nil {
			c = &GPUClassUse{GPUClass: e.GPUClass(pool.GPUClassID)}
			if c.GPUClass == nil {
				c.GPUClass = &model.GPUClass{ID: pool.GPUClassID, Name: pool.GPUClassID}
			}
			classes[pool.GPUClassID] = c
		}
		c.Declared += pu.Declared
		c.Used += pu.Used
		c.Free += pu.Free
	}
	for _, c := range classes {
		u.GPUClasses = append(u.GPUClasses, *c)
	}
	sort.Slice(u.Pools, func(i, j int) bool { return u.Pools[i].Pool.Name < u.Pools[j].Pool.Name })
	sort.Slice(u.GPUClasses, func(i, j int) bool { return u.GPUClasses[i].GPUClass.Name < u.GPUClasses[j].GPUClass.Name })
	return u, nil
}

// --- workers ---

// WorkerUpdate says a worker joined, or its heartbeats stopped or resumed.
type WorkerUpdate struct {
	TenantID string
	Kind     string
	At       time.Time
	Worker   *view.WorkerView
	Workers  []*view.WorkerView
	Missed   int
}

// SubscribeWorkers follows the tenant's workers: joins, and heartbeats lost
// (found by looking at each worker's last heartbeat every heartbeat
// interval, since a silent worker sends nothing to notice it by).
func (s *Live) SubscribeWorkers(ctx context.Context) (<-chan *WorkerUpdate, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	release, err := s.startSubscription(ctx)
	if err != nil {
		return nil, err
	}
	tenantID := p.TenantID
	first, err := s.reads.TenantWorkers(ctx, tenantID)
	if err != nil {
		release()
		return nil, s.k.Internal(ctx, err)
	}
	var mu sync.Mutex
	online := map[string]bool{}
	seen := func(ws []*view.WorkerView) {
		for _, w := range ws {
			online[w.ID] = w.Online
		}
	}
	r := s.subs.workers.Join("workers|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool { return e.TenantID == tenantID && e.Kind == "worker.registered" },
		func(ctx context.Context, batch []events.Event) []*WorkerUpdate {
			ws, err := s.reads.TenantWorkers(ctx, tenantID)
			if err != nil {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			var out []*WorkerUpdate
			for _, e := range batch {
				for _, w := range ws {
					if w.ID == e.ObjectID {
						out = append(out, &WorkerUpdate{TenantID: tenantID, Kind: e.Kind, At: e.At, Worker: w, Workers: ws})
					}
				}
			}
			seen(ws)
			return out
		}, s.agent.Heartbeat, func(ctx context.Context) []*WorkerUpdate {
			ws, err := s.reads.TenantWorkers(ctx, tenantID)
			if err != nil {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			var out []*WorkerUpdate
			now := s.k.Now()
			for _, w := range ws {
				was, known := online[w.ID]
				switch {
				case known && was && !w.Online:
					out = append(out, &WorkerUpdate{TenantID: tenantID, Kind: "worker.heartbeat_lost", At: now, Worker: w, Workers: ws})
				case known && !was && w.Online:
					out = append(out, &WorkerUpdate{TenantID: tenantID, Kind: "worker.back", At: now, Worker: w, Workers: ws})
				}
			}
			seen(ws)
			return out
		}))
	mu.Lock()
	seen(first)
	mu.Unlock()
	return pump(ctx, s, r, release, []*WorkerUpdate{{TenantID: tenantID, Kind: "snapshot", At: s.k.Now(), Workers: first}},
		func(p *identity.Principal, u *WorkerUpdate) (*WorkerUpdate, bool) { return u, p.TenantID == u.TenantID },
		func(u *WorkerUpdate, n int) *WorkerUpdate {
			c := *u
			c.Missed = n
			return &c
		}), nil
}

// --- budgetBurn ---

// BudgetBurnUpdate is a group's time budget as its work burns it.
type BudgetBurnUpdate struct {
	TenantID string
	GroupID  string
	Kind     string
	At       time.Time
	Policy   *view.PolicyView
	Alert    string
	Missed   int
}

// AlertText is the alert, or nil when the update raises none.
func (u *BudgetBurnUpdate) AlertText() *string {
	if u.Alert == "" {
		return nil
	}
	return &u.Alert
}

// SubscribeBudgetBurn follows a resource policy's budget: used, left, burn
// rate and projected run-out, updated when its group's work starts or
// stops, when an alert is raised, and every minute while work burns it.
func (s *Live) SubscribeBudgetBurn(ctx context.Context, policyRef string) (<-chan *BudgetBurnUpdate, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	pol, err := s.k.Policy(ctx, policyRef)
	if err != nil {
		return nil, err
	}
	release, err := s.startSubscription(ctx)
	if err != nil {
		return nil, err
	}
	tenantID, polID, groupID := p.TenantID, pol.ID, pol.GroupID
	build := func(ctx context.Context, kind string) []*BudgetBurnUpdate {
		u, err := s.budgetBurn(ctx, tenantID, polID, kind)
		if err != nil {
			if ctx.Err() == nil {
				s.k.Log.Warn("budget subscription: read policy view", "policy", polID, "err", err)
			}
			return nil
		}
		return []*BudgetBurnUpdate{u}
	}
	r := s.subs.budgets.Join("budget|"+tenantID+"|"+polID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool {
			return e.TenantID == tenantID && (e.ObjectKind == "task" && e.GroupID == groupID && taskLifecycle(e.Kind) ||
				e.ObjectID == polID)
		},
		func(ctx context.Context, batch []events.Event) []*BudgetBurnUpdate {
			var out []*BudgetBurnUpdate
			for _, e := range batch {
				if e.Kind == "budget.alert" {
					out = append(out, build(ctx, e.Kind)...)
				}
			}
			if len(out) == 0 {
				out = build(ctx, batch[len(batch)-1].Kind)
			}
			return out
		}, budgetTick, func(ctx context.Context) []*BudgetBurnUpdate { return build(ctx, "tick") }))
	first, err := s.budgetBurn(ctx, tenantID, polID, "snapshot")
	if err != nil {
		r.Close()
		release()
		return nil, s.k.Internal(ctx, err)
	}
	return pump(ctx, s, r, release, []*BudgetBurnUpdate{first},
		func(p *identity.Principal, u *BudgetBurnUpdate) (*BudgetBurnUpdate, bool) {
			return u, p.TenantID == u.TenantID && kernel.SeesGroup(p, u.GroupID)
		}, func(u *BudgetBurnUpdate, n int) *BudgetBurnUpdate {
			c := *u
			c.Missed = n
			return &c
		}), nil
}

func (s *Live) budgetBurn(ctx context.Context, tenantID, policyID, kind string) (*BudgetBurnUpdate, error) {
	now := s.k.Now()
	v, err := s.reads.TenantPolicyView(ctx, tenantID, policyID, now)
	if err != nil {
		return nil, err
	}
	u := &BudgetBurnUpdate{TenantID: tenantID, GroupID: v.Policy.GroupID, Kind: kind, At: now, Policy: v}
	if kind == "budget.alert" && v.Budget != nil {
		u.Alert = budgetAlertText(v)
	}
	return u, nil
}

// budgetAlertText says what a budget alert is about, as the engine's audit
// entry does.
func budgetAlertText(v *view.PolicyView) string {
	b, group := v.Budget, ""
	if v.Group != nil {
		group = v.Group.Name
	}
	if b.UsedUp {
		return fmt.Sprintf("group %s has used up its time budget of %.2f h; it resets %s", group, float64(b.Total)/1e6, b.ResetsAt.Format(time.RFC3339))
	}
	return fmt.Sprintf("group %s has used %d%% of its time budget of %.2f h; it resets %s", group, b.Used*100/max(b.Total, 1),
		float64(b.Total)/1e6, b.ResetsAt.Format(time.RFC3339))
}
