package tasks

import (
	"context"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
)

// TaskLogs reads a task's log the caller may see: lines after after, or the
// last tail lines.
func (s *Tasks) TaskLogs(ctx context.Context, t *model.Task, after int64, first, tail int) (*view.LogPage, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !kernel.SeesTask(p, t) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(t.ID))
	}
	if first <= 0 || first > 5000 {
		first = 500
	}
	limit, isTail := first, false
	if tail > 0 {
		limit, isTail = min(tail, 5000), true
	}
	lines, err := s.k.Store.ListLogs(ctx, p.TenantID, t.ID, after, limit, isTail)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	page := &view.LogPage{Lines: lines, LastSeq: after}
	if n := len(lines); n > 0 {
		page.LastSeq = lines[n-1].Seq
		page.Truncated = strings.HasPrefix(lines[n-1].Line, "[klique: the log of this task reached its limit")
	}
	return page, nil
}

// TaskMetrics reads a task's metric points the caller may see.
func (s *Tasks) TaskMetrics(ctx context.Context, t *model.Task, name string, after int64, first int, last bool) ([]model.MetricPoint, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if t.TenantID != p.TenantID || !kernel.SeesTask(p, t) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(t.ID))
	}
	var points []model.MetricPoint
	if last {
		points, err = s.k.Store.LastMetrics(ctx, p.TenantID, t.ID)
	} else {
		if first <= 0 || first > 10000 {
			first = 1000
		}
		points, err = s.k.Store.ListMetrics(ctx, p.TenantID, t.ID, name, after, first)
	}
	return points, s.k.Internal(ctx, err)
}
