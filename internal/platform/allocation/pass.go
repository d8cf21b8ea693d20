package allocation

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// The apply step of the engine's pass. The allocation domain is the
// engine loop's planner (engine/loop.Planner): the only writer of what a
// pass decides. It writes through the kernel like every other change, as
// the actor "engine" on the engine channel, so every placement,
// preemption and alert is in the audit trail and published after commit.

// engineActor is who the audit trail shows for the engine's decisions.
const engineActor = "engine"

func engineWrite(ctx context.Context, k *kernel.Kernel, tenantID string, now time.Time, fn func(t *kernel.Txn) error) error {
	ctx = identity.WithChannel(ctx, identity.ChannelEngine)
	return k.Write(ctx, kernel.System(tenantID, engineActor), func(t *kernel.Txn) error {
		// The pass's clock, not the kernel's: the decisions, their ledger
		// intervals and their audit entries share one time.
		t.Now = now
		return fn(t)
	})
}

// ApplyPass writes a pass's plan in one transaction: preemptions (with
// their ledger intervals closed), placements (with intervals opened), an
// audit entry for each, the budget alerts, and the queue states that
// changed. It renews the engine lease first and writes nothing when the
// lease was lost; when the engine was disabled after the plan was made, it
// applies engine.Disabled instead of the plan's decisions (and puts those
// in the plan).
func (s *Allocation) ApplyPass(ctx context.Context, plan *engine.Plan) (engine.Applied, error) {
	var out engine.Applied
	tenantID, now, m := plan.TenantID, plan.Now, plan.Model
	e := m.Estate
	err := engineWrite(ctx, s.k, tenantID, now, func(t *kernel.Txn) error {
		q := t.Q
		out = engine.Applied{Disabled: plan.Disabled}
		// The lease is renewed inside the transaction: a replica that lost
		// it while the pass ran writes nothing.
		ok, err := q.AcquireLease(ctx, plan.Lease.Name, plan.Lease.Holder, now, plan.Lease.TTL)
		if err != nil {
			return err
		}
		if !ok {
			out.LeaseLost = true
			return kernel.ErrRollback
		}
		// An admin may have disabled the engine after the snapshot was
		// read (the pause can start after the pass's now). The shared lock
		// orders this check against SetEngineEnabled's exclusive one, so
		// once a disable has returned no pass places or preempts anything.
		if !plan.Disabled {
			if err := q.LockTenantShared(ctx, tenantID); err != nil {
				return err
			}
			open, err := pausedNow(ctx, q, tenantID, now)
			if err != nil {
				return err
			}
			if open {
				out.Disabled = true
				plan.Disabled, plan.Decisions = true, engine.Disabled(plan.Snapshot)
			}
		}
		dec := plan.Decisions
		if len(dec.Preemptions) > 0 {
			ps := make([]store.Preemption, len(dec.Preemptions))
			for i, p := range dec.Preemptions {
				ps[i] = store.Preemption{TaskID: p.TaskID, Reason: engine.PreemptedPrefix + p.Reason, OnlyPlaced: p.Cause == engine.CauseUnclaimed}
			}
			done, err := q.PreemptTasks(ctx, tenantID, ps, now)
			if err != nil {
				return err
			}
			out.Preempted = len(done)
			preempted := make(map[string]bool, len(done))
			for _, id := range done {
				preempted[id] = true
			}
			for _, p := range dec.Preemptions {
				if !preempted[p.TaskID] {
					continue // ended or aborted since the snapshot
				}
				t.Record("task.preempted", "task", p.TaskID, plan.Tasks[p.TaskID].Name, groupOf(e, m.Queues[p.Queue]),
					fmt.Sprintf("preempted from pool %s: %s", m.Pools[p.Pool].Name, p.Reason))
			}
		}
		if len(dec.Placements) > 0 {
			ps := make([]*model.Placement, 0, len(dec.Placements))
			for _, p := range dec.Placements {
				pl, err := s.ledgerRow(ctx, q, tenantID, m, p, plan.Tasks[p.TaskID], now)
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
			out.Placed = len(placed)
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
				t.Record("task.placed", "task", p.TaskID, plan.Tasks[p.TaskID].Name, groupOf(e, m.Queues[p.Queue]),
					fmt.Sprintf("placed on pool %s, size %s, %s (%s phase)", ps[i].PoolName, ps[i].Size, how, p.Phase),
					kernel.OnPool(m.Pools[p.Pool].ID))
			}
		}
		if len(dec.Failures) > 0 {
			n, err := failUnplaceable(ctx, t, plan)
			if err != nil {
				return err
			}
			out.Failed = n
		}
		for _, a := range plan.Alerts {
			t.Record("budget.alert", "resource_policy", a.PolicyID, a.Group, a.GroupID, a.Detail)
		}
		changed, err := writeQueueStates(ctx, q, tenantID, now, m, dec)
		if err != nil {
			return err
		}
		for _, cr := range changed {
			t.Publish(events.Event{TenantID: tenantID, Kind: "queue.changed", ObjectKind: "compute_resource",
				ObjectID: cr.ID, ObjectName: cr.Name, GroupID: groupOf(e, cr), At: now})
		}
		return nil
	})
	if errors.Is(err, kernel.ErrRollback) {
		return out, nil
	}
	if err != nil {
		return engine.Applied{}, err
	}
	return out, nil
}

// failUnplaceable ends the waiting tasks the pass found can never be
// placed, each with the pass's reason, if the allocation model is still the
// one the pass read: a failure cannot be undone, so one decided before an
// admin's change (a pool given back its capacity) is left to the next
// pass, which decides on the new model. The caller holds the tenant's
// shared lock, so the model cannot change until the transaction ends. A
// task that left its queue since the snapshot (placed, aborted) is skipped.
func failUnplaceable(ctx context.Context, t *kernel.Txn, plan *engine.Plan) (int, error) {
	q, tenantID, now := t.Q, plan.TenantID, t.Now
	v, err := q.EstateVersion(ctx, tenantID)
	if err != nil {
		return 0, fmt.Errorf("estate version: %w", err)
	}
	if v != plan.EstateVersion {
		return 0, nil
	}
	n := 0
	for _, f := range plan.Decisions.Failures {
		task, err := q.GetTask(ctx, tenantID, f.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("fail task %s: %w", f.TaskID, err)
		}
		if task.Status != model.TaskQueued {
			continue
		}
		task.Status, task.Reason, task.UpdatedAt, task.FinishedAt = model.TaskFailed, "failed: "+f.Reason, now, &now
		if err := q.UpdateTask(ctx, task); err != nil {
			return n, fmt.Errorf("fail task %s: %w", f.TaskID, err)
		}
		t.Record("task.failed", "task", task.ID, task.Name, task.GroupID, "failed while waiting: "+f.Reason)
		n++
	}
	return n, nil
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

// ledgerRow builds the ledger interval a placement opens, with the names of
// everything it is attributed to.
func (s *Allocation) ledgerRow(ctx context.Context, q store.Queries, tenantID string, m *engine.Model,
	p engine.Place, t engine.TaskRef, now time.Time) (*model.Placement, error) {
	e := m.Estate
	cr := m.Queues[p.Queue]
	pool := m.Pools[p.Pool]
	pr := e.Profile(cr.ProfileID)
	pol := e.Policy(cr.PolicyID)
	row := &model.Placement{TenantID: tenantID, TaskID: p.TaskID, UserID: t.OwnerID, ProjectID: t.ProjectID,
		GroupID: pol.GroupID, GroupName: e.GroupName(pol.GroupID), PolicyID: pol.ID, ProfileID: pr.ID, ProfileName: pr.Name,
		ComputeResourceID: cr.ID, ComputeResourceName: cr.Name, PoolID: pool.ID, PoolName: pool.Name,
		Size: t.Size.Total(), WeightMilli: pr.TimeWeightMilli, StartedAt: now, Currency: basis.DefaultCurrency}
	if proj := e.Project(t.ProjectID); proj != nil {
		row.ProjectName = proj.Name
	}
	if c := e.GPUClass(pool.GPUClassID); c != nil {
		row.GPUClassID, row.GPUClassName, row.PriceMicros, row.Currency = c.ID, c.Name, c.PriceMicros, c.Currency
	}
	name, err := s.userName(ctx, q, tenantID, t.OwnerID)
	if err != nil {
		return nil, err
	}
	row.UserName = name
	return row, nil
}

// userName is a user's name for ledger rows, read once per user: a
// ledger row keeps the name the user had when the work was placed.
func (s *Allocation) userName(ctx context.Context, q store.Queries, tenantID, userID string) (string, error) {
	if v, ok := s.names.Load(userID); ok {
		return v.(string), nil
	}
	u, err := q.GetUser(ctx, tenantID, userID)
	if errors.Is(err, store.ErrNotFound) {
		return userID, nil
	}
	if err != nil {
		return "", err
	}
	s.names.Store(userID, u.Name)
	return u.Name, nil
}

// writeQueueStates records why each queue's head waits, writing only the
// states that changed, and returns the compute resources whose state
// changed.
func writeQueueStates(ctx context.Context, q store.Queries, tenantID string, now time.Time, m *engine.Model, dec *engine.Decisions) ([]*model.ComputeResource, error) {
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

func groupOf(e *estate.Estate, cr *model.ComputeResource) string {
	if p := e.Policy(cr.PolicyID); p != nil {
		return p.GroupID
	}
	return ""
}

// RequeueLost handles tasks whose worker stopped heartbeating: each goes
// back to the front of its compute resource in its old order with the
// reason "worker lost" and counts a retry, or fails once it has used its
// retries. Its ledger interval closes in the same transaction.
func (s *Allocation) RequeueLost(ctx context.Context, tenantID string, lost []*model.Task, now time.Time, maxRetries int) error {
	return engineWrite(ctx, s.k, tenantID, now, func(t *kernel.Txn) error {
		q := t.Q
		for _, lt := range lost {
			cur, err := q.GetTask(ctx, tenantID, lt.ID)
			if err != nil {
				return err
			}
			if cur.Status != model.TaskRunning || cur.Run.Attempt != lt.Run.Attempt {
				continue // reported or stopped since the listing
			}
			cur.Run.LeaseExpiresAt = nil
			cur.Run.Retries++
			cur.UpdatedAt = now
			kind := "task.requeued"
			if cur.Run.Retries > maxRetries {
				cur.Status, cur.FinishedAt = model.TaskFailed, &now
				cur.Reason = fmt.Sprintf("failed: worker lost (%s; the limit is %d retries)", times(cur.Run.Retries), maxRetries)
				kind = "task.failed"
			} else {
				cur.Status, cur.PoolID, cur.PlacedAt = model.TaskQueued, "", nil
				cur.Reason = engine.PreemptedPrefix + "worker lost"
			}
			if err := q.UpdateTask(ctx, cur); err != nil {
				return err
			}
			if err := q.EndPlacement(ctx, tenantID, cur.ID, now, "worker lost"); err != nil {
				return err
			}
			t.Record(kind, "task", cur.ID, cur.Name, cur.GroupID,
				fmt.Sprintf("worker lost: no heartbeat from attempt %d's worker before its lease ran out; %s", cur.Run.Attempt, cur.Reason))
		}
		return nil
	})
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
