package live

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
)

// pump starts r's delivery to one subscriber: what check lets the caller
// see of first (its snapshot) and of each payload after it, told how many
// payloads were missed, until ctx ends or the credential stops holding.
// The hub hands each payload straight to the subscriber's channel (no
// goroutine per subscriber); the channel is closed at the end, and release
// called.
func pump[U any, T missedCounter[U]](ctx context.Context, s *Live, r *events.Receiver[T], release func(), first []T,
	check func(p *identity.Principal, v T) (T, bool)) <-chan T {
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
	r.ToldBy(func(v T) int { return *v.missed() })
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
			// The payload is shared by every subscriber: tell the count
			// on a copy of it.
			c := T(new(U))
			*c = *v
			*c.missed() = n
			v = c
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

// missedCounter is an update that tells how many updates before it its
// subscriber missed (its Missed field, which missed points to), so that
// when an unread one is dropped, what it told is told again by the next,
// exactly.
type missedCounter[U any] interface {
	*U
	missed() *int
}

func (u *AppInstanceUpdate) missed() *int { return &u.Missed }
func (u *BudgetBurnUpdate) missed() *int  { return &u.Missed }
func (u *ObjectUpdate) missed() *int      { return &u.Missed }
func (u *PoolUtilization) missed() *int   { return &u.Missed }
func (u *QueueUpdate) missed() *int       { return &u.Missed }
func (u *ScheduleUpdate) missed() *int    { return &u.Missed }
func (u *TaskUpdate) missed() *int        { return &u.Missed }
func (u *GatewayTraffic) missed() *int    { return &u.Missed }
func (u *WorkerUpdate) missed() *int      { return &u.Missed }
