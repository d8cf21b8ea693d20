package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Defaults of the loop.
const (
	DefaultInterval = time.Second
	// DefaultPerQueue is how many waiting tasks of each compute resource a
	// pass reads. A queue that places all of them triggers another pass at
	// once, so this bounds the work of one pass, not what can be placed.
	DefaultPerQueue = 256
	// LeaseName is the lease that lets one replica at a time run passes.
	LeaseName = "engine"
	// DefaultMaxRetries is how often a task whose worker was lost is
	// requeued before it fails.
	DefaultMaxRetries = 3
	// NoRetries, as Loop.MaxRetries, fails a task the first time its worker
	// is lost.
	NoRetries = -1
	// leaseTTL is how long a lease outlives a replica that stops renewing.
	leaseTTL = 10 * time.Second
	// minGap batches wake-ups: a burst of enqueues is one pass, not many.
	minGap = 20 * time.Millisecond
)

// ConstraintDisabled holds every queue while an admin has the engine
// disabled.
const ConstraintDisabled Constraint = "engine_disabled"

// Loop runs passes: about once a second, and soon after a change that may
// let work be placed (an enqueue, an abort, a finish, a change to the
// estate). It loads each tenant's world from the store, runs the pure pass,
// applies all of its decisions in one transaction and publishes events.
// Passes never overlap, and only the replica holding the engine lease runs
// them.
type Loop struct {
	Store    store.Store
	Events   events.Publisher
	Log      *slog.Logger
	Interval time.Duration
	PerQueue int
	// Holder names this replica for the lease.
	Holder string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// MaxRetries is how many times a task is requeued after its worker was
	// lost before it fails (DefaultMaxRetries when 0; NoRetries for none).
	MaxRetries int

	wake    chan struct{}
	once    sync.Once
	metrics *loopMetrics
	// names caches user names for ledger rows.
	names sync.Map // user id -> name
	// alerted holds the budget alerts already raised (tenant/policy/
	// period/level); pendingAlerts those of the pass being applied.
	alerted       sync.Map
	pendingAlerts []string
	// models keeps each tenant's allocation model, laid out for snapshots,
	// with the version it was read at; a pass reads and lays it out again
	// only when the version moved.
	models map[string]versioned
}

type versioned struct {
	version int64
	model   *Model
}

// model returns a tenant's allocation model laid out for snapshots, read
// again only when its version in the store has moved. Passes never
// overlap, so the map needs no lock.
func (l *Loop) model(ctx context.Context, tenantID string) (*Model, error) {
	v, err := l.Store.EstateVersion(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if c, ok := l.models[tenantID]; ok && c.version == v {
		return c.model, nil
	}
	e, err := estate.Load(ctx, l.Store, tenantID)
	if err != nil {
		return nil, err
	}
	if l.models == nil {
		l.models = map[string]versioned{}
	}
	m := NewModel(e)
	l.models[tenantID] = versioned{version: v, model: m}
	return m, nil
}

// states turns the store's view of tasks into the snapshot's, leaving out
// tasks of compute resources or pools that are no longer in the model.
func states(m *Model, tasks []store.SchedTask) []TaskState {
	out := make([]TaskState, 0, len(tasks))
	for _, t := range tasks {
		if _, ok := m.QueueIndex[t.ComputeResourceID]; !ok {
			continue
		}
		s := TaskState{ID: t.ID, ComputeResourceID: t.ComputeResourceID, Size: t.Size, Seq: t.QueueSeq}
		if t.Status != model.TaskQueued {
			if _, ok := m.PoolIndex[t.PoolID]; !ok {
				continue
			}
			s.PoolID, s.PlacedAt = t.PoolID, t.PlacedAt
		}
		out = append(out, s)
	}
	return out
}

// Report says what one pass over one tenant did.
type Report struct {
	TenantID    string
	Disabled    bool
	Placed      int
	Preempted   int
	Waiting     int
	Duration    time.Duration
	MorePending bool
}

func (l *Loop) init() {
	l.once.Do(func() {
		l.wake = make(chan struct{}, 1)
		if l.Interval <= 0 {
			l.Interval = DefaultInterval
		}
		if l.PerQueue <= 0 {
			l.PerQueue = DefaultPerQueue
		}
		if l.Log == nil {
			l.Log = slog.Default()
		}
		if l.Now == nil {
			l.Now = time.Now
		}
		switch {
		case l.MaxRetries == 0:
			l.MaxRetries = DefaultMaxRetries
		case l.MaxRetries < 0:
			l.MaxRetries = 0
		}
		if l.Holder == "" {
			host, _ := os.Hostname()
			l.Holder = fmt.Sprintf("%s-%d-%d", host, os.Getpid(), time.Now().UnixNano())
		}
		if l.Events == nil {
			l.Events = events.NewBus()
		}
		if l.metrics == nil {
			l.metrics = newLoopMetrics()
		}
	})
}

// Wake asks for a pass soon. It never blocks.
func (l *Loop) Wake() {
	l.init()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// WakeOn returns a filter for an events bus subscription: the events after
// which a pass may place work.
func WakeOn(e events.Event) bool {
	switch {
	case e.Kind == "task.enqueued", e.Kind == "task.aborted", e.Kind == "task.finished",
		e.Kind == "engine.enabled", e.Kind == "engine.disabled":
		return true
	case strings.HasSuffix(e.Kind, ".created"), strings.HasSuffix(e.Kind, ".updated"), strings.HasSuffix(e.Kind, ".deleted"):
		return e.ObjectKind != "task" && e.ObjectKind != "api_key" && e.ObjectKind != "user"
	}
	return false
}

// Run runs passes until ctx ends, then gives up the lease.
func (l *Loop) Run(ctx context.Context) error {
	l.init()
	ticker := time.NewTicker(l.Interval)
	defer ticker.Stop()
	defer func() {
		_ = l.Store.ReleaseLease(context.Background(), LeaseName, l.Holder)
	}()
	for {
		reports, err := l.PassAll(ctx)
		if err != nil && ctx.Err() == nil {
			l.Log.ErrorContext(ctx, "engine pass failed", "err", err)
		}
		more := false
		for _, r := range reports {
			more = more || r.MorePending
		}
		if more {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(minGap):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-l.wake:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(minGap):
			}
		}
	}
}

// PassAll runs one pass for every tenant, if this replica holds (or takes)
// the engine lease. It returns no reports when another replica leads.
func (l *Loop) PassAll(ctx context.Context) ([]Report, error) {
	l.init()
	ok, err := l.Store.AcquireLease(ctx, LeaseName, l.Holder, l.Now(), leaseTTL)
	if err != nil {
		return nil, fmt.Errorf("engine lease: %w", err)
	}
	if !ok {
		return nil, nil
	}
	tenants, err := l.Store.ListTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	var reports []Report
	var errs []error
	for _, t := range tenants {
		r, err := l.PassTenant(ctx, t.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: %w", t.Name, err))
			continue
		}
		reports = append(reports, r)
	}
	return reports, errors.Join(errs...)
}

// PassTenant runs one pass over one tenant and applies its decisions.
func (l *Loop) PassTenant(ctx context.Context, tenantID string) (Report, error) {
	l.init()
	start := time.Now()
	now := l.Now().UTC().Truncate(time.Microsecond)
	rep := Report{TenantID: tenantID}
	m, err := l.model(ctx, tenantID)
	if err != nil {
		return rep, err
	}
	e := m.Estate
	if err := l.reapLost(ctx, tenantID, now); err != nil {
		return rep, err
	}
	tasks, err := l.Store.ListSchedulable(ctx, tenantID, l.PerQueue)
	if err != nil {
		return rep, err
	}
	pauses, err := l.Store.ListEnginePauses(ctx, tenantID, periodFloor(e, now), now.Add(time.Microsecond))
	if err != nil {
		return rep, err
	}
	disabled := len(pauses) > 0 && pauses[len(pauses)-1].EndedAt == nil
	used, err := l.budgetUsed(ctx, tenantID, e, pauses, now)
	if err != nil {
		return rep, err
	}
	snap, err := m.Snapshot(now, states(m, tasks), used)
	if err != nil {
		return rep, err
	}
	var dec *Decisions
	if disabled {
		rep.Disabled = true
		dec = disabledDecisions(snap)
	} else {
		dec = Pass(snap)
	}
	for _, q := range snap.Queues {
		rep.Waiting += len(q.Waiting)
	}
	evs, err := l.apply(ctx, tenantID, now, m, snap, dec, tasks, &rep)
	if err != nil {
		return rep, err
	}
	for _, ev := range evs {
		l.Events.Publish(ev)
	}
	rep.Duration = time.Since(start)
	l.metrics.observe(rep)
	return rep, nil
}

// periodFloor is the earliest start of a budget period any policy is in:
// how far back budget use and engine pauses matter.
func periodFloor(e *estate.Estate, now time.Time) time.Time {
	floor := now
	for _, p := range e.Policies {
		if p.Budget != nil {
			if s := PeriodStart(p.Budget.Period, now); s.Before(floor) {
				floor = s
			}
		}
	}
	return floor
}

func (l *Loop) budgetUsed(ctx context.Context, tenantID string, e *estate.Estate, pauses []*model.EnginePause, now time.Time) (map[string]int64, error) {
	var budgeted []string
	for _, p := range e.Policies {
		if p.Budget != nil {
			budgeted = append(budgeted, p.ID)
		}
	}
	if len(budgeted) == 0 {
		return nil, nil
	}
	intervals, err := l.Store.ListPlacements(ctx, tenantID, store.PlacementFilter{From: periodFloor(e, now), To: now, PolicyIDs: budgeted})
	if err != nil {
		return nil, err
	}
	return BudgetUsed(e.Policies, intervals, pauses, now), nil
}

// disabledDecisions holds every queue with waiting work: nothing is placed
// or preempted while the engine is disabled.
func disabledDecisions(s *Snapshot) *Decisions {
	d := &Decisions{}
	for q := range s.Queues {
		if len(s.Queues[q].Waiting) > 0 {
			d.Blocked = append(d.Blocked, Blocked{Queue: q, TaskID: s.Queues[q].Waiting[0].ID, Constraint: ConstraintDisabled,
				Reason: "the compute policy engine is disabled by an admin; nothing is placed until it is enabled again"})
		}
	}
	return d
}

// pausedNow reports whether the tenant's engine is disabled at this moment:
// its last pause, whenever it started, has not ended.
func pausedNow(ctx context.Context, q store.Queries, tenantID string, now time.Time) (bool, error) {
	pauses, err := q.ListEnginePauses(ctx, tenantID, now, now.Add(100*365*24*time.Hour))
	if err != nil {
		return false, fmt.Errorf("engine pauses: %w", err)
	}
	return len(pauses) > 0 && pauses[len(pauses)-1].EndedAt == nil, nil
}

// apply writes a pass's decisions in one transaction: preemptions (with
// their ledger intervals closed), placements (with intervals opened), an
// audit entry for each, and the queue states that changed. It returns the
// events to publish once the transaction has committed.
func (l *Loop) apply(ctx context.Context, tenantID string, now time.Time, m *Model, snap *Snapshot,
	dec *Decisions, tasks []store.SchedTask, rep *Report) ([]events.Event, error) {
	e := m.Estate
	byID := make(map[string]*store.SchedTask, len(tasks))
	for i := range tasks {
		byID[tasks[i].ID] = &tasks[i]
	}
	var evs []events.Event
	err := l.Store.InTx(ctx, func(q store.Queries) error {
		// The lease is renewed inside the transaction: a replica that lost
		// it while the pass ran writes nothing.
		ok, err := q.AcquireLease(ctx, LeaseName, l.Holder, now, leaseTTL)
		if err != nil {
			return err
		}
		if !ok {
			return errLostLease
		}
		// An admin may have disabled the engine after the snapshot was
		// read (the pause can start after the pass's now). The shared lock
		// orders this check against SetEngineEnabled's exclusive one, so
		// once a disable has returned no pass places or preempts anything.
		if !rep.Disabled {
			if err := q.LockTenantShared(ctx, tenantID); err != nil {
				return err
			}
			open, err := pausedNow(ctx, q, tenantID, now)
			if err != nil {
				return err
			}
			if open {
				rep.Disabled = true
				dec = disabledDecisions(snap)
			}
		}
		evs = evs[:0]
		var trail []*model.AuditEntry
		if len(dec.Preemptions) > 0 {
			ps := make([]store.Preemption, len(dec.Preemptions))
			for i, p := range dec.Preemptions {
				ps[i] = store.Preemption{TaskID: p.TaskID, Reason: PreemptedPrefix + p.Reason}
			}
			done, err := q.PreemptTasks(ctx, tenantID, ps, now)
			if err != nil {
				return err
			}
			rep.Preempted = len(done)
			preempted := make(map[string]bool, len(done))
			for _, id := range done {
				preempted[id] = true
			}
			for _, p := range dec.Preemptions {
				if !preempted[p.TaskID] {
					continue // ended or aborted since the snapshot
				}
				cr := m.Queues[p.Queue]
				trail = append(trail, auditEntry(tenantID, now, "task.preempted", byID[p.TaskID],
					fmt.Sprintf("preempted from pool %s: %s", m.Pools[p.Pool].Name, p.Reason)))
				evs = append(evs, taskEvent(tenantID, "task.preempted", p.TaskID, groupOf(e, cr), now))
			}
		}
		if len(dec.Placements) > 0 {
			ps := make([]*model.Placement, 0, len(dec.Placements))
			for _, p := range dec.Placements {
				t := byID[p.TaskID]
				pl, err := l.ledgerRow(ctx, q, tenantID, m, p, t, now)
				if err != nil {
					return err
				}
				ps = append(ps, pl)
			}
			placed, err := q.PlaceTasks(ctx, tenantID, ps, func(p *model.Placement) string {
				return "placed on pool " + p.PoolName + "; waiting for a worker there to start it"
			})
			if err != nil {
				return err
			}
			rep.Placed = len(placed)
			done := make(map[string]bool, len(placed))
			for _, id := range placed {
				done[id] = true
			}
			for i, p := range dec.Placements {
				if !done[p.TaskID] {
					continue
				}
				how := "within its group's reservation"
				if p.Borrowed {
					how = "on borrowed capacity"
				}
				trail = append(trail, auditEntry(tenantID, now, "task.placed", byID[p.TaskID],
					fmt.Sprintf("placed on pool %s, size %s, %s (%s phase)", ps[i].PoolName, ps[i].Size, how, p.Phase)))
				ev := taskEvent(tenantID, "task.placed", p.TaskID, groupOf(e, m.Queues[p.Queue]), now)
				ev.PoolID = m.Pools[p.Pool].ID
				evs = append(evs, ev)
			}
		}
		alerts := l.budgetAlerts(tenantID, m, snap, now)
		for _, a := range alerts {
			trail = append(trail, a.entry)
			evs = append(evs, a.event)
		}
		if err := q.InsertAudits(ctx, trail); err != nil {
			return err
		}
		changed, err := l.writeQueueStates(ctx, q, tenantID, now, m, dec)
		if err != nil {
			return err
		}
		for _, cr := range changed {
			evs = append(evs, events.Event{TenantID: tenantID, Kind: "queue.changed", ObjectKind: "compute_resource",
				ObjectID: cr.ID, ObjectName: cr.Name, GroupID: groupOf(e, cr), At: now})
		}
		return nil
	})
	if errors.Is(err, errLostLease) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.commitAlerts(tenantID)
	rep.MorePending = morePending(snap, dec, l.PerQueue)
	return evs, nil
}

// alert is a budget alert to record and announce.
type alert struct {
	key   string
	entry *model.AuditEntry
	event events.Event
}

// budgetAlerts raises, once per budget period, an alert when a group's use
// reaches its policy's alert threshold, and another when the budget is used
// up. They are recorded in the audit trail and published as budget.alert
// events, which the policy view and dashboards show.
func (l *Loop) budgetAlerts(tenantID string, m *Model, snap *Snapshot, now time.Time) []alert {
	var out []alert
	l.pendingAlerts = l.pendingAlerts[:0]
	for g, grp := range snap.Groups {
		b := grp.Budget
		if b == nil || b.Total <= 0 {
			continue
		}
		pol := m.Policies[g]
		period := PeriodStart(b.Period, now).Format(time.RFC3339)
		level, what := "", ""
		switch {
		case b.Used >= b.Total:
			level, what = "used_up", "has used up"
		case b.Used*100 >= b.Total*int64(pol.AlertThresholdPercent):
			level, what = "threshold", fmt.Sprintf("has used %d%% of", b.Used*100/b.Total)
		default:
			continue
		}
		key := tenantID + "/" + pol.ID + "/" + period + "/" + level
		if _, done := l.alerted.Load(key); done {
			continue
		}
		detail := fmt.Sprintf("group %s %s its %s time budget of %s h; it resets %s", grp.Name, what,
			map[model.BudgetPeriod]string{model.PeriodDay: "daily", model.PeriodWeek: "weekly", model.PeriodMonth: "monthly"}[b.Period],
			microHours(b.Total), resetText(b))
		out = append(out, alert{key: key,
			entry: &model.AuditEntry{TenantID: tenantID, At: now, ActorName: "engine", Channel: "engine", Action: "budget.alert",
				ObjectKind: "resource_policy", ObjectID: pol.ID, ObjectName: grp.Name, Detail: detail},
			event: events.Event{TenantID: tenantID, Kind: "budget.alert", ObjectKind: "resource_policy", ObjectID: pol.ID,
				ObjectName: grp.Name, GroupID: pol.GroupID, At: now}})
		l.pendingAlerts = append(l.pendingAlerts, key)
	}
	return out
}

// commitAlerts remembers the alerts of a pass that committed, so that each
// is raised once per period (per replica: a new leader may raise one again).
func (l *Loop) commitAlerts(string) {
	for _, k := range l.pendingAlerts {
		l.alerted.Store(k, true)
	}
	l.pendingAlerts = l.pendingAlerts[:0]
}

var errLostLease = errors.New("engine lease lost")

// PreemptedPrefix starts the reason a preempted task carries back to its
// queue, so that what a developer sees says both why it was stopped and why
// it waits now.
const PreemptedPrefix = "preempted: "

func groupOf(e *estate.Estate, cr *model.ComputeResource) string {
	if p := e.Policy(cr.PolicyID); p != nil {
		return p.GroupID
	}
	return ""
}

func taskEvent(tenantID, kind, taskID, groupID string, at time.Time) events.Event {
	return events.Event{TenantID: tenantID, Kind: kind, ObjectKind: "task", ObjectID: taskID, GroupID: groupID, At: at}
}

// auditEntry is the audit trail's record of one decision, with its reason.
func auditEntry(tenantID string, now time.Time, action string, t *store.SchedTask, detail string) *model.AuditEntry {
	return &model.AuditEntry{TenantID: tenantID, At: now, ActorName: "engine", Channel: "engine",
		Action: action, ObjectKind: "task", ObjectID: t.ID, ObjectName: t.Name, Detail: detail}
}

// ledgerRow builds the ledger interval a placement opens, with the names of
// everything it is attributed to.
func (l *Loop) ledgerRow(ctx context.Context, q store.Queries, tenantID string, m *Model,
	p Place, t *store.SchedTask, now time.Time) (*model.Placement, error) {
	e := m.Estate
	cr := m.Queues[p.Queue]
	pool := m.Pools[p.Pool]
	pr := e.Profile(cr.ProfileID)
	pol := e.Policy(cr.PolicyID)
	row := &model.Placement{TenantID: tenantID, TaskID: p.TaskID, UserID: t.OwnerID, ProjectID: t.ProjectID,
		GroupID: pol.GroupID, GroupName: e.GroupName(pol.GroupID), PolicyID: pol.ID, ProfileID: pr.ID, ProfileName: pr.Name,
		ComputeResourceID: cr.ID, ComputeResourceName: cr.Name, PoolID: pool.ID, PoolName: pool.Name,
		Size: t.Size.Total(), WeightMilli: pr.TimeWeightMilli, StartedAt: now, Currency: estate.DefaultCurrency}
	if proj := e.Project(t.ProjectID); proj != nil {
		row.ProjectName = proj.Name
	}
	if c := e.GPUClass(pool.GPUClassID); c != nil {
		row.GPUClassID, row.GPUClassName, row.PriceMicros, row.Currency = c.ID, c.Name, c.PriceMicros, c.Currency
	}
	name, err := l.userName(ctx, q, tenantID, t.OwnerID)
	if err != nil {
		return nil, err
	}
	row.UserName = name
	return row, nil
}

func (l *Loop) userName(ctx context.Context, q store.Queries, tenantID, userID string) (string, error) {
	if v, ok := l.names.Load(userID); ok {
		return v.(string), nil
	}
	u, err := q.GetUser(ctx, tenantID, userID)
	if errors.Is(err, store.ErrNotFound) {
		return userID, nil
	}
	if err != nil {
		return "", err
	}
	l.names.Store(userID, u.Name)
	return u.Name, nil
}

// writeQueueStates records why each queue's head waits, writing only the
// states that changed, and returns the compute resources whose state
// changed.
func (l *Loop) writeQueueStates(ctx context.Context, q store.Queries, tenantID string, now time.Time, m *Model, dec *Decisions) ([]*model.ComputeResource, error) {
	old, err := q.ListQueueStates(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	prev := make(map[string]*model.QueueState, len(old))
	for _, s := range old {
		prev[s.ComputeResourceID] = s
	}
	var changed []*model.ComputeResource
	seen := make(map[string]bool, len(dec.Blocked))
	for _, b := range dec.Blocked {
		cr := m.Queues[b.Queue]
		seen[cr.ID] = true
		s := &model.QueueState{TenantID: tenantID, ComputeResourceID: cr.ID, TaskID: b.TaskID, Constraint: string(b.Constraint),
			Reason: b.Reason, UpdatedAt: now}
		if !b.Until.IsZero() {
			u := b.Until
			s.Until = &u
		}
		if p := prev[cr.ID]; p != nil && p.TaskID == s.TaskID && p.Constraint == s.Constraint && p.Reason == s.Reason {
			continue
		}
		if err := q.PutQueueState(ctx, s); err != nil {
			return nil, err
		}
		changed = append(changed, cr)
	}
	// Queues that no longer wait lose their state; so do queues of compute
	// resources that are gone.
	var gone []string
	for id := range prev {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	for _, id := range gone {
		if err := q.DeleteQueueState(ctx, tenantID, id); err != nil {
			return nil, err
		}
		for _, cr := range m.Queues {
			if cr.ID == id {
				changed = append(changed, cr)
			}
		}
	}
	return changed, nil
}

// morePending reports whether some queue placed every task the pass read of
// it while more may wait behind: another pass should follow at once.
func morePending(s *Snapshot, d *Decisions, perQueue int) bool {
	placed := make(map[int]int)
	for _, p := range d.Placements {
		placed[p.Queue]++
	}
	for q, n := range placed {
		if len(s.Queues[q].Waiting) >= perQueue && n == len(s.Queues[q].Waiting) {
			return true
		}
	}
	return false
}

// loopMetrics are the engine's Prometheus metrics.
type loopMetrics struct {
	passSeconds prometheus.Histogram
	placed      prometheus.Counter
	preempted   prometheus.Counter
	waiting     prometheus.Gauge
}

func newLoopMetrics() *loopMetrics {
	return &loopMetrics{
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "klique_engine_pass_duration_seconds",
			Help: "Duration of one engine pass over one tenant, store reads and writes included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		placed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "klique_engine_placements_total", Help: "Tasks placed on pools."}),
		preempted: prometheus.NewCounter(prometheus.CounterOpts{Name: "klique_engine_preemptions_total", Help: "Tasks preempted and requeued."}),
		waiting:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "klique_engine_waiting_tasks", Help: "Waiting tasks the last pass read (first tasks of each queue)."}),
	}
}

func (m *loopMetrics) observe(r Report) {
	m.passSeconds.Observe(r.Duration.Seconds())
	m.placed.Add(float64(r.Placed))
	m.preempted.Add(float64(r.Preempted))
	m.waiting.Set(float64(r.Waiting))
}

// Register adds the loop's metrics to a registry.
func (l *Loop) Register(reg prometheus.Registerer) error {
	l.init()
	for _, c := range []prometheus.Collector{l.metrics.passSeconds, l.metrics.placed, l.metrics.preempted, l.metrics.waiting} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// reapLost handles tasks whose worker stopped heartbeating: each goes back
// to the front of its compute resource in its old order with the reason
// "worker lost" and counts a retry, or fails once it has used its retries.
// Its ledger interval closes in the same transaction.
func (l *Loop) reapLost(ctx context.Context, tenantID string, now time.Time) error {
	lost, err := l.Store.ListExpiredLeases(ctx, tenantID, now)
	if err != nil || len(lost) == 0 {
		return err
	}
	var evs []events.Event
	err = l.Store.InTx(ctx, func(q store.Queries) error {
		evs = evs[:0]
		var trail []*model.AuditEntry
		for _, t := range lost {
			cur, err := q.GetTask(ctx, tenantID, t.ID)
			if err != nil {
				return err
			}
			if cur.Status != model.TaskRunning || cur.Run.Attempt != t.Run.Attempt {
				continue // reported or stopped since the listing
			}
			cur.Run.LeaseExpiresAt = nil
			cur.Run.Retries++
			cur.UpdatedAt = now
			kind := "task.requeued"
			if cur.Run.Retries > l.MaxRetries {
				cur.Status, cur.FinishedAt = model.TaskFailed, &now
				cur.Reason = fmt.Sprintf("failed: worker lost (%s; the limit is %d retries)", times(cur.Run.Retries), l.MaxRetries)
				kind = "task.failed"
			} else {
				cur.Status, cur.PoolID, cur.PlacedAt = model.TaskQueued, "", nil
				cur.Reason = PreemptedPrefix + "worker lost"
			}
			if err := q.UpdateTask(ctx, cur); err != nil {
				return err
			}
			if err := q.EndPlacement(ctx, tenantID, cur.ID, now, "worker lost"); err != nil {
				return err
			}
			trail = append(trail, &model.AuditEntry{TenantID: tenantID, At: now, ActorName: "engine", Channel: "engine",
				Action: kind, ObjectKind: "task", ObjectID: cur.ID, ObjectName: cur.Name,
				Detail: fmt.Sprintf("worker lost: no heartbeat from attempt %d's worker before its lease ran out; %s", cur.Run.Attempt, cur.Reason)})
			evs = append(evs, taskEvent(tenantID, kind, cur.ID, cur.GroupID, now))
		}
		return q.InsertAudits(ctx, trail)
	})
	if err != nil {
		return err
	}
	for _, e := range evs {
		l.Events.Publish(e)
	}
	return nil
}

// times says how many times something happened.
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
