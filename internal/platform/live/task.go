package live

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
)

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
		}), nil
}

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
	go s.sendLogs(ctx, r, out, first, tenantID, taskID)
	return out, nil
}

// sendLogs sends a log subscription its first update, then, on each batch
// of signals, the lines written since, until the task ends, the caller may
// no longer see it, or the subscription ends. It closes out when done.
func (s *Live) sendLogs(ctx context.Context, r *events.Receiver[*logSignal], out chan<- *LogUpdate, first *LogUpdate, tenantID, taskID string) {
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
		ended, missed, ok := nextLogSignals(ctx, r)
		if !ok {
			return
		}
		p, err := s.subscriber(ctx, conn)
		if err != nil || p == nil || p.TenantID != tenantID {
			return
		}
		cur, err := s.k.Store.GetTask(ctx, tenantID, taskID)
		if err != nil || !kernel.SeesTask(p, cur) {
			return
		}
		if last, ok = s.sendLogPages(ctx, send, tenantID, taskID, last, ended, missed); !ok {
			return
		}
	}
}

// nextLogSignals waits for the next signal and takes every one already
// waiting behind it, so that a burst of writes costs one read: whether
// the task ended, and how many signals were dropped in all. ok is false
// when the subscription ends.
func nextLogSignals(ctx context.Context, r *events.Receiver[*logSignal]) (ended bool, missed int, ok bool) {
	var sig *logSignal
	select {
	case <-ctx.Done():
		return false, 0, false
	case sig, ok = <-r.C():
		if !ok {
			return false, 0, false
		}
	}
	ended, missed = sig.ended, sig.dropped
	for {
		select {
		case sig, ok = <-r.C():
			if !ok {
				return false, 0, false
			}
			ended, missed = ended || sig.ended, missed+sig.dropped
		default:
			return ended, missed, true
		}
	}
}

// sendLogPages reads on from after seq last until the log is drained, in
// pages, and sends each page that has lines (or ends the log). It returns
// the last seq sent, and false when the subscription is done (the log
// ended, the read failed, or the caller is gone).
func (s *Live) sendLogPages(ctx context.Context, send func(*LogUpdate) bool, tenantID, taskID string, last int64, ended bool, missed int) (int64, bool) {
	for {
		lines, err := s.k.Store.ListLogs(ctx, tenantID, taskID, last, 1000, false)
		if err != nil {
			if ctx.Err() == nil {
				s.k.Log.WarnContext(ctx, "log subscription: read log", "task", taskID, "err", err)
			}
			return last, false
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
				return last, false
			}
			missed = 0
		}
		if u.Done {
			return last, false
		}
		if !more {
			return last, true
		}
	}
}
