package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// maxQueueListed bounds the waiting and running tasks a queue update lists.
const maxQueueListed = 200

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
	cr, err := s.k.ComputeResource(ctx, computeResourceRef)
	if err != nil {
		return nil, err
	}
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	crID := cr.ID
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
		return nil, s.failSubscription(ctx, err, r.Close, release)
	}
	return pump(ctx, s, r, release, []*QueueUpdate{first}, s.checkQueue(ctx)), nil
}

// checkQueue lets through what p may see of a queue update: a member
// (or admin) the whole update, the head of a department above the queue's
// group its places only (kernel.QueuePlace), no task contents.
func (s *Live) checkQueue(ctx context.Context) func(p *identity.Principal, u *QueueUpdate) (*QueueUpdate, bool) {
	return func(p *identity.Principal, u *QueueUpdate) (*QueueUpdate, bool) {
		if p.TenantID != u.TenantID {
			return nil, false
		}
		if kernel.SeesGroup(p, u.GroupID) {
			return checkQueue(p, u)
		}
		if !s.headAbove(ctx, p, u.GroupID) {
			return nil, false
		}
		c := *u
		c.Task = kernel.QueuePlace(u.Task)
		c.Waiting, c.Running = make([]QueuedTask, len(u.Waiting)), make([]*model.Task, len(u.Running))
		for i, w := range u.Waiting {
			c.Waiting[i] = QueuedTask{Position: w.Position, Reason: w.Reason, Task: kernel.QueuePlace(w.Task)}
		}
		for i, t := range u.Running {
			c.Running[i] = kernel.QueuePlace(t)
		}
		return &c, true
	}
}

// headAbove reports whether p heads a department above the group with
// id, in its tenant's current estate.
func (s *Live) headAbove(ctx context.Context, p *identity.Principal, groupID string) bool {
	e, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	return err == nil && kernel.HeadAbove(p, e, groupID) != nil
}

// checkQueue lets through what a member of the queue's group (or an
// admin) p may see of a queue update.
func checkQueue(p *identity.Principal, u *QueueUpdate) (*QueueUpdate, bool) {
	if !kernel.SeesGroup(p, u.GroupID) {
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
	waiting, err := s.k.Store.ListQueued(ctx, tenantID, crID, maxQueueListed)
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
