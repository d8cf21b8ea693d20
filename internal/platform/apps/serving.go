package apps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Serving is the in-memory index of the serving instances that are ready,
// per tenant: the endpoints the gateway adds to a static route on every
// call, which must cost no store read. It follows the events (an instance
// reported ready or not, a task that ended or was requeued), which cross
// replicas through the bus, and is rebuilt from the store on start and
// every RebuildEvery so that an event this replica missed (a full
// subscription, a bridge that was down) heals.
//
// An instance serves route R when it was launched with route R, or when
// R names its app (routes: [{name: R, app: vllm}]): both rules apply.
type Serving struct {
	mu sync.RWMutex
	// tenants holds each tenant's ready serving instances by task id;
	// byTask the same instances across tenants, for the gateway's dialer.
	tenants map[string]map[string]*servingInstance
	byTask  map[string]*servingInstance
}

type servingInstance struct {
	target appnet.Target
	app    string
	route  string
	url    string
}

// NewServing returns an empty index.
func NewServing() *Serving {
	return &Serving{tenants: map[string]map[string]*servingInstance{}, byTask: map[string]*servingInstance{}}
}

// serves reports whether a task is a serving instance that answers now:
// running, with the address its worker found answering on its health path.
func serves(t *model.Task) bool {
	return t.Spec.Kind == model.TaskKindApplication && t.Spec.App != nil && t.Spec.App.Kind == model.AppServing &&
		t.Status == model.TaskRunning && t.Run.AppAddress != ""
}

func servingOf(t *model.Task) *servingInstance {
	return &servingInstance{app: t.Spec.App.App, route: t.Spec.App.Route, url: appnet.InstanceBaseURL(t.ID),
		target: appnet.TargetOf(t.TenantID, t.ID, t.Run.WorkerID, t.Run.Attempt, t.Run.AppAddress, t.Run.AppAllow, t.Run.AppRefused)}
}

// Note puts a task in the index when it is a ready serving instance, and
// takes it out otherwise (stopped, failed, requeued after a lost worker,
// preempted, or no longer answering its health path).
func (s *Serving) Note(t *model.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !serves(t) {
		s.dropLocked(t.TenantID, t.ID)
		return
	}
	in := servingOf(t)
	m := s.tenants[t.TenantID]
	if m == nil {
		m = map[string]*servingInstance{}
		s.tenants[t.TenantID] = m
	}
	m[t.ID], s.byTask[t.ID] = in, in
}

// Drop takes a task out of the index.
func (s *Serving) Drop(tenantID, taskID string) {
	s.mu.Lock()
	s.dropLocked(tenantID, taskID)
	s.mu.Unlock()
}

func (s *Serving) dropLocked(tenantID, taskID string) {
	if in := s.byTask[taskID]; in != nil && in.target.TenantID == tenantID {
		delete(s.byTask, taskID)
	}
	delete(s.tenants[tenantID], taskID)
}

// Endpoints returns a route's endpoints: its static URLs, then the base
// URLs of its ready instances in launch order (task ids are time-ordered).
// It returns r.Endpoints itself when no instance serves the route, so
// that a route without instances costs nothing.
func (s *Serving) Endpoints(tenantID string, r *model.Route) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.tenants[tenantID]
	if len(m) == 0 {
		return r.Endpoints
	}
	var ids []string
	for id, in := range m {
		if in.route == r.Name || (r.App != "" && in.app == r.App) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return r.Endpoints
	}
	slices.Sort(ids)
	out := make([]string, 0, len(r.Endpoints)+len(ids))
	out = append(out, r.Endpoints...)
	for _, id := range ids {
		out = append(out, m[id].url)
	}
	return out
}

// Target returns how to reach a ready serving instance by its task id
// (the gateway's dialer, given an endpoint this index handed out).
func (s *Serving) Target(taskID string) (appnet.Target, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	in := s.byTask[taskID]
	if in == nil {
		return appnet.Target{}, false
	}
	return in.target, true
}

// Rebuild replaces the index with the ready serving instances in the store.
func (s *Serving) Rebuild(ctx context.Context, st store.Store) error {
	tenants, err := st.ListTenants(ctx)
	if err != nil {
		return fmt.Errorf("rebuild the serving index: %w", err)
	}
	next := map[string]map[string]*servingInstance{}
	byTask := map[string]*servingInstance{}
	for _, tn := range tenants {
		page := store.Page{Limit: 1000}
		for {
			tasks, err := st.ListTasks(ctx, tn.ID, store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning}}, page, false)
			if err != nil {
				return fmt.Errorf("rebuild the serving index of tenant %s: %w", tn.Name, err)
			}
			for _, t := range tasks {
				if !serves(t) {
					continue
				}
				if next[tn.ID] == nil {
					next[tn.ID] = map[string]*servingInstance{}
				}
				in := servingOf(t)
				next[tn.ID][t.ID], byTask[t.ID] = in, in
			}
			if len(tasks) < page.Limit {
				break
			}
			page.After = strconv.FormatInt(tasks[len(tasks)-1].QueueSeq, 10)
		}
	}
	s.mu.Lock()
	s.tenants, s.byTask = next, byTask
	s.mu.Unlock()
	return nil
}

// servingEvent reports whether an event may change whether a task is a
// ready serving instance: its readiness, or any change of a task's status.
func servingEvent(e events.Event) bool {
	if e.ObjectKind != "task" {
		return false
	}
	switch e.Kind {
	case "app.readiness", "task.started", "task.aborted", "task.failed", "task.completed", "task.finished",
		"task.preempted", "task.requeued", "task.queued", "task.placed":
		return true
	}
	return false
}

// Follow keeps the index current until ctx ends: it rebuilds it from the
// store now and every rebuildEvery, and notes each task an event names
// (read again from the store: the event says only that it changed). It
// returns once the first rebuild is done, so that a caller starting the
// gateway after it finds the instances already serving.
func (s *Serving) Follow(ctx context.Context, st store.Store, bus events.Broker, rebuildEvery time.Duration, log func(error)) {
	sub := bus.Subscribe(1024, servingEvent)
	if err := s.Rebuild(ctx, st); err != nil {
		log(err)
	}
	go func() {
		defer sub.Close()
		tick := time.NewTicker(rebuildEvery)
		defer tick.Stop()
		var dropped uint64
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := s.Rebuild(ctx, st); err != nil && ctx.Err() == nil {
					log(err)
				}
			case e, ok := <-sub.C:
				if !ok {
					return
				}
				t, err := st.GetTask(ctx, e.TenantID, e.ObjectID)
				switch {
				case err == nil:
					s.Note(t)
				case ctx.Err() != nil:
					return
				default:
					// Gone or unreadable: it serves nothing; the next rebuild
					// puts it back if the store still says it is ready.
					s.Drop(e.TenantID, e.ObjectID)
					if !errors.Is(err, store.ErrNotFound) {
						log(fmt.Errorf("serving index: read task %s: %w", e.ObjectID, err))
					}
				}
				// Events the subscription had no room for are lost: read
				// the whole index again rather than wait for the tick.
				if d := sub.Dropped(); d != dropped {
					dropped = d
					if err := s.Rebuild(ctx, st); err != nil && ctx.Err() == nil {
						log(err)
					}
				}
			}
		}
	}()
}
