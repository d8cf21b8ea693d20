// Package loop runs the compute policy engine: about once a second, and
// soon after a change that may let work be placed, it reads each tenant's
// world (State), runs the pure pass (package engine) and hands the plan to
// the Planner, the only writer, which applies it in one transaction
// through the platform kernel (audit entries and events included). Passes
// never overlap, and only the replica holding the engine lease runs them.
package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/model"
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
	// DefaultGrace is the grace period when Loop.Grace is 0: the worker
	// lease's default (KLIQUE_WORKER_LEASE).
	DefaultGrace = 60 * time.Second
	// leaseTTL is how long a lease outlives a replica that stops renewing.
	leaseTTL = 10 * time.Second
	// minGap batches wake-ups: a burst of enqueues is one pass, not many.
	minGap = 20 * time.Millisecond
)

// State is what a pass reads, in the engine's types: the store through
// the allocation domain's adapter (platform.EngineState) satisfies it. The
// loop never writes through it, except to hold the engine lease.
type State interface {
	estate.Reader
	EstateVersion(ctx context.Context, tenantID string) (int64, error)
	ListTenants(ctx context.Context) ([]*model.Tenant, error)
	ListSchedulable(ctx context.Context, tenantID string, perQueue int) ([]engine.SchedTask, error)
	ListEnginePauses(ctx context.Context, tenantID string, from, to time.Time) ([]*model.EnginePause, error)
	ListBudgetPlacements(ctx context.Context, tenantID string, from, to time.Time, policyIDs []string) ([]*model.Placement, error)
	ListExpiredLeases(ctx context.Context, tenantID string, now time.Time) ([]*model.Task, error)
	ListWorkers(ctx context.Context, tenantID string) ([]*model.Worker, error)
	ListAutoscalers(ctx context.Context, tenantID string) ([]*model.Autoscaler, error)
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
}

// Planner is the only writer: it applies a pass's plan, and sends back to
// their queues (or fails) the tasks whose worker was lost. The allocation
// domain of the platform is the planner; it writes through the kernel, so
// every decision is audited and published like any other change.
type Planner interface {
	ApplyPass(ctx context.Context, plan *engine.Plan) (engine.Applied, error)
	RequeueLost(ctx context.Context, tenantID string, lost []*model.Task, now time.Time, maxRetries int) error
}

// Loop runs passes.
type Loop struct {
	State   State
	Planner Planner
	Log     *slog.Logger
	// Interval is the time between passes when nothing wakes the loop.
	Interval time.Duration
	PerQueue int
	// Holder names this replica for the lease.
	Holder string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// MaxRetries is how many times a task is requeued after its worker was
	// lost before it fails (DefaultMaxRetries when 0; NoRetries for none).
	MaxRetries int
	// Grace is how long this replica waits after it starts leading (takes
	// the engine lease, at start, after another replica or after passes
	// that failed) before it declares any worker lost: workers could not
	// heartbeat while no control plane was serving, so a lease that ran out
	// then says nothing about the worker. At least one worker lease
	// (DefaultGrace when 0): a live worker heartbeats every quarter lease.
	Grace time.Duration
	// WorkerLease is how long a worker stays online without a heartbeat
	// (KLIQUE_WORKER_LEASE). Passes see which pools have a worker online
	// and apply the pools' claim timeouts only when it is set: 0 leaves
	// workers out of passes, for tests of the allocation rules alone.
	WorkerLease time.Duration

	// leading says this replica held the engine lease at its last pass,
	// and leadingSince since when: the start of the grace period.
	leading      bool
	leadingSince time.Time

	wake    chan struct{}
	once    sync.Once
	metrics *loopMetrics
	// alerted holds the budget alerts already raised (tenant/policy/
	// period/level).
	alerted sync.Map
	// models keeps each tenant's allocation model, laid out for snapshots,
	// with the version it was read at; a pass reads and lays it out again
	// only when the version moved.
	models map[string]versioned
	// reasons keeps each tenant's last why-waiting sentences, so that a
	// pass writes only those whose parts changed (engine.PassReusing).
	// Passes never overlap, so the map needs no lock.
	reasons map[string]*engine.Reasons
}

type versioned struct {
	version int64
	model   *engine.Model
}

// model returns a tenant's allocation model laid out for snapshots, read
// again only when its version in the store has moved. Passes never
// overlap, so the map needs no lock.
func (l *Loop) model(ctx context.Context, tenantID string) (*engine.Model, int64, error) {
	v, err := l.State.EstateVersion(ctx, tenantID)
	if err != nil {
		return nil, 0, err
	}
	if c, ok := l.models[tenantID]; ok && c.version == v {
		return c.model, v, nil
	}
	e, err := estate.Load(ctx, l.State, tenantID)
	if err != nil {
		return nil, 0, err
	}
	if l.models == nil {
		l.models = map[string]versioned{}
	}
	m := engine.NewModel(e)
	l.models[tenantID] = versioned{version: v, model: m}
	return m, v, nil
}

// states turns the store's view of tasks into the snapshot's, leaving out
// tasks of compute resources or pools that are no longer in the model, and
// notes what the planner needs of each.
func states(m *engine.Model, tasks []engine.SchedTask) ([]engine.TaskState, map[string]engine.TaskRef) {
	out := make([]engine.TaskState, 0, len(tasks))
	refs := make(map[string]engine.TaskRef, len(tasks))
	for _, t := range tasks {
		if _, ok := m.QueueIndex[t.ComputeResourceID]; !ok {
			continue
		}
		s := engine.TaskState{ID: t.ID, ComputeResourceID: t.ComputeResourceID, Size: t.Size, Seq: t.QueueKey(),
			Claimed: t.Status == model.TaskRunning}
		if t.Status != model.TaskQueued {
			if _, ok := m.PoolIndex[t.PoolID]; !ok {
				continue
			}
			s.PoolID, s.PlacedAt = t.PoolID, t.PlacedAt
		}
		out = append(out, s)
		refs[t.ID] = engine.TaskRef{Name: t.Name, OwnerID: t.OwnerID, ProjectID: t.ProjectID, Size: t.Size}
	}
	return out, refs
}

// Report says what one pass over one tenant did.
type Report struct {
	TenantID    string
	Disabled    bool
	Placed      int
	Preempted   int
	Failed      int
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
		if l.Grace <= 0 {
			l.Grace = DefaultGrace
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

// WakeOn is a filter for an events bus subscription: the events after
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
		_ = l.State.ReleaseLease(context.Background(), LeaseName, l.Holder)
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
	now := l.Now()
	ok, err := l.State.AcquireLease(ctx, LeaseName, l.Holder, now, leaseTTL)
	if err != nil {
		// The store is unreachable, so are the workers' heartbeats: the
		// next lead starts a new grace period.
		l.leading = false
		return nil, fmt.Errorf("engine lease: %w", err)
	}
	if !ok {
		l.leading = false
		return nil, nil
	}
	l.startLeading(now)
	tenants, err := l.State.ListTenants(ctx)
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
	m, version, err := l.model(ctx, tenantID)
	if err != nil {
		return rep, err
	}
	e := m.Estate
	if err := l.reapLost(ctx, tenantID, now); err != nil {
		return rep, err
	}
	tasks, err := l.State.ListSchedulable(ctx, tenantID, l.PerQueue)
	if err != nil {
		return rep, err
	}
	pauses, err := l.State.ListEnginePauses(ctx, tenantID, engine.PeriodFloor(e.Policies, now), now.Add(time.Microsecond))
	if err != nil {
		return rep, err
	}
	used, err := l.budgetUsed(ctx, tenantID, e, pauses, now)
	if err != nil {
		return rep, err
	}
	ts, refs := states(m, tasks)
	snap, err := m.Snapshot(now, ts, used)
	if err != nil {
		return rep, err
	}
	if err := l.poolWorkers(ctx, tenantID, e, snap, now); err != nil {
		return rep, err
	}
	plan := &engine.Plan{TenantID: tenantID, Now: now, Model: m, Snapshot: snap, Tasks: refs,
		Disabled: len(pauses) > 0 && pauses[len(pauses)-1].EndedAt == nil,
		Lease:    engine.Lease{Name: LeaseName, Holder: l.Holder, TTL: leaseTTL}, EstateVersion: version}
	if plan.Disabled {
		plan.Decisions = engine.Disabled(snap)
	} else {
		if l.reasons == nil {
			l.reasons = map[string]*engine.Reasons{}
		}
		plan.Decisions, l.reasons[tenantID] = engine.PassReusing(snap, l.reasons[tenantID])
	}
	for _, a := range engine.BudgetAlerts(tenantID, m, snap, now) {
		if _, done := l.alerted.Load(a.Key); !done {
			plan.Alerts = append(plan.Alerts, a)
		}
	}
	for _, q := range snap.Queues {
		rep.Waiting += len(q.Waiting)
	}
	applied, err := l.Planner.ApplyPass(ctx, plan)
	if err != nil {
		return rep, err
	}
	if applied.LeaseLost {
		l.leading = false
	} else {
		// Each alert is raised once per period (per replica: a new leader
		// may raise one again).
		for _, a := range plan.Alerts {
			l.alerted.Store(a.Key, true)
		}
		rep.MorePending = engine.MorePending(snap, plan.Decisions, l.PerQueue)
	}
	rep.Disabled, rep.Placed, rep.Preempted, rep.Failed = applied.Disabled, applied.Placed, applied.Preempted, applied.Failed
	rep.Duration = time.Since(start)
	l.metrics.observe(rep)
	return rep, nil
}

func (l *Loop) budgetUsed(ctx context.Context, tenantID string, e *estate.Estate, pauses []*model.EnginePause, now time.Time) (map[string]int64, error) {
	// A department's budget covers its teams' work: their intervals are
	// read too, and charged up the tree.
	parents := e.PolicyParents()
	budgeted := engine.BudgetedInTree(e.Policies, parents)
	if len(budgeted) == 0 {
		return nil, nil
	}
	intervals, err := l.State.ListBudgetPlacements(ctx, tenantID, engine.PeriodFloor(e.Policies, now), now, budgeted)
	if err != nil {
		return nil, err
	}
	return engine.BudgetUsedInTree(e.Policies, parents, intervals, pauses, now), nil
}

// poolWorkers tells the snapshot which pools have a worker online, when one
// was last seen, and each pool's claim timeout: its own, or the default (off
// for a pool with an autoscaler). During the grace period after this
// replica started leading no claim times out: workers could not heartbeat
// while no control plane served them.
func (l *Loop) poolWorkers(ctx context.Context, tenantID string, e *estate.Estate, snap *engine.Snapshot, now time.Time) error {
	if l.WorkerLease <= 0 {
		return nil
	}
	ws, err := l.State.ListWorkers(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("list workers: %w", err)
	}
	as, err := l.State.ListAutoscalers(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("list autoscalers: %w", err)
	}
	scaled := make(map[string]bool, len(as))
	for _, a := range as {
		scaled[a.PoolID] = true
	}
	grace := now.Before(l.leadingSince.Add(l.Grace))
	byID := make(map[string]engine.PoolWorkers, len(e.Pools))
	for _, p := range e.Pools {
		pw := engine.PoolWorkers{ClaimTimeout: p.EffectiveClaimTimeout(scaled[p.ID])}
		if grace {
			pw.ClaimTimeout = 0
		}
		byID[p.ID] = pw
	}
	for _, w := range ws {
		pw, ok := byID[w.PoolID]
		if !ok {
			continue
		}
		if w.LastHeartbeatAt.After(pw.LastSeen) {
			pw.LastSeen = w.LastHeartbeatAt
		}
		pw.Online = pw.Online || now.Sub(w.LastHeartbeatAt) <= l.WorkerLease
		byID[w.PoolID] = pw
	}
	snap.SetPoolWorkers(byID)
	return nil
}

// startLeading notes that this replica leads from now on, unless it
// already did: a new grace period starts.
func (l *Loop) startLeading(now time.Time) {
	if l.leading {
		return
	}
	l.leading, l.leadingSince = true, now
	l.Log.Info("engine lease taken: no worker is declared lost during the grace period",
		"holder", l.Holder, "grace", l.Grace, "until", now.Add(l.Grace))
}

// reapLost hands the tasks whose worker stopped heartbeating to the
// planner: each goes back to the front of its compute resource, or fails
// once it has used its retries. Nothing is reaped during the grace period
// after this replica started leading: a worker that was cut off from every
// control plane (a restart, an outage longer than a lease, a new lease
// holder) gets one lease to report in, and a heartbeat that lists its
// current attempt extends the lease again. A worker that stays away is
// declared lost once the grace period ends.
func (l *Loop) reapLost(ctx context.Context, tenantID string, now time.Time) error {
	l.startLeading(now) // PassTenant called on its own
	if now.Before(l.leadingSince.Add(l.Grace)) {
		return nil
	}
	lost, err := l.State.ListExpiredLeases(ctx, tenantID, now)
	if err != nil || len(lost) == 0 {
		return err
	}
	return l.Planner.RequeueLost(ctx, tenantID, lost, now, l.MaxRetries)
}
