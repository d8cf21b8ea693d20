package live

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Bounds of a utilization history: a chart wants a few hundred points at
// most, and the ledger is read whole for the range.
const (
	historyDefaultRange = time.Hour
	historyMaxRange     = 31 * 24 * time.Hour
	historyMinStep      = 10 * time.Second
	historyMaxPoints    = 1000
	historyDefaultCount = 120
)

// UtilizationPoint is the GPUs a GPU class held, on average, over the step
// that starts at At.
type UtilizationPoint struct {
	At   time.Time
	Used float64
}

// GPUClassHistory is one GPU class's use over time, against the GPUs its
// pools declare now.
type GPUClassHistory struct {
	GPUClass *model.GPUClass
	Declared int
	Points   []UtilizationPoint
}

// UtilizationHistory is a tenant's GPU use over a range, by GPU class.
type UtilizationHistory struct {
	From, To   time.Time
	Step       time.Duration
	GPUClasses []GPUClassHistory
}

// StepSeconds is Step in whole seconds, as the API shows it.
func (h *UtilizationHistory) StepSeconds() int { return int(h.Step / time.Second) }

// UtilizationHistory reads the tenant's GPU use over [from, to) from the
// usage ledger, whose intervals open and close with every placement and
// release: it is the one record of use over time the control plane keeps,
// so the chart and the bill never disagree. Each point is the average of
// GPUs held over its step. Capacity has no history: each class is measured
// against what its pools declare now. Like the poolUtilization
// subscription it is tenant-wide and open to everyone in the tenant: it
// names no group, user or task. A zero to is now, a zero from an hour
// before to, a zero step about 120 points over the range.
func (s *Live) UtilizationHistory(ctx context.Context, from, to time.Time, step time.Duration) (*UtilizationHistory, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	now := s.k.Now()
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		from = to.Add(-historyDefaultRange)
	}
	if !from.Before(to) {
		return nil, kernel.Invalid("from (%s) must be before to (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if to.Sub(from) > historyMaxRange {
		return nil, kernel.Invalid("a utilization history covers at most 31 days, not %s: narrow from and to", to.Sub(from).Round(time.Hour))
	}
	if step == 0 {
		step = max(historyMinStep, (to.Sub(from) / historyDefaultCount).Round(time.Second))
	}
	if step < historyMinStep {
		return nil, kernel.Invalid("stepSeconds must be at least %d, not %d", int(historyMinStep/time.Second), int(step/time.Second))
	}
	n := int((to.Sub(from) + step - 1) / step)
	if n > historyMaxPoints {
		return nil, kernel.Invalid("%s in steps of %s is %d points, more than %d: take a longer step or a shorter range",
			to.Sub(from), step, n, historyMaxPoints)
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("utilization history: read the estate: %w", err))
	}
	intervals, err := s.k.Store.ListPlacements(ctx, p.TenantID, store.PlacementFilter{From: from, To: to})
	if err != nil {
		return nil, s.k.Internal(ctx, fmt.Errorf("utilization history: read the ledger: %w", err))
	}
	h := &UtilizationHistory{From: from, To: to, Step: step}
	index := map[string]int{}
	class := func(id, name string) *GPUClassHistory {
		if i, ok := index[id]; ok {
			return &h.GPUClasses[i]
		}
		c := e.GPUClass(id)
		if c == nil {
			c = &model.GPUClass{ID: id, Name: name}
		}
		points := make([]UtilizationPoint, n)
		for i := range points {
			points[i].At = from.Add(time.Duration(i) * step)
		}
		index[id] = len(h.GPUClasses)
		h.GPUClasses = append(h.GPUClasses, GPUClassHistory{GPUClass: c, Points: points})
		return &h.GPUClasses[len(h.GPUClasses)-1]
	}
	for _, pool := range e.Pools {
		class(pool.GPUClassID, pool.GPUClassID).Declared += pool.CapacityGPUs
	}
	for _, iv := range intervals {
		c := class(iv.GPUClassID, iv.GPUClassName)
		end := now
		if iv.EndedAt != nil {
			end = *iv.EndedAt
		}
		start := later(iv.StartedAt, from)
		end = earlier(end, to)
		// GPU-seconds held in each step the interval overlaps.
		for i := int(start.Sub(from) / step); i < n && start.Before(end); i++ {
			b0 := from.Add(time.Duration(i) * step)
			lo, hi := later(start, b0), earlier(end, earlier(b0.Add(step), to))
			if hi.After(lo) {
				c.Points[i].Used += iv.Size.Float() * hi.Sub(lo).Seconds()
			}
		}
	}
	for _, c := range h.GPUClasses {
		for i := range c.Points {
			b0 := c.Points[i].At
			// The last step may be shorter; a step in the future holds
			// nothing yet and averages over what has passed.
			span := earlier(earlier(b0.Add(step), to), later(now, b0.Add(time.Second))).Sub(b0).Seconds()
			if span > 0 {
				c.Points[i].Used /= span
			}
		}
	}
	sort.Slice(h.GPUClasses, func(i, j int) bool { return h.GPUClasses[i].GPUClass.Name < h.GPUClasses[j].GPUClass.Name })
	return h, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
