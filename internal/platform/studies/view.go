package studies

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// View is a study as people read it: its trials ranked, the best so far
// and the objective over time.
type View struct {
	Study *model.Study
	// Trials are ranked: completed trials by objective (best first), then
	// trials stopped early (the later the rung, the higher), then those
	// still running, then failed and aborted ones; each group by number.
	Trials []*model.StudyTrial
	// Best is the best completed trial so far (nil before one).
	Best *model.StudyTrial
	// Progress is the objective over time: at each end of a completed
	// trial, the best so far.
	Progress []ProgressPoint
	// GPUHours is what the trials used, from the ledger.
	GPUHours float64
	// OwnerName, ProjectName and ComputeResourceName name the study's
	// owner, project and compute resource ("" when gone).
	OwnerName, ProjectName, ComputeResourceName string
}

// ProgressPoint is the best objective when a trial ended: Best, reached
// by trial number Trial.
type ProgressPoint struct {
	At    time.Time
	Best  float64
	Trial int
}

// StudyView returns a study the caller may see, read for people.
func (s *Studies) StudyView(ctx context.Context, id string) (*View, error) {
	st, err := s.Study(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st)
}

// TenantStudyView reads a study of a tenant on the platform's own behalf,
// for the live view that re-reads it after each change (and checks each
// subscriber with Sees).
func (s *Studies) TenantStudyView(ctx context.Context, tenantID, id string) (*View, error) {
	st, err := s.k.Store.GetStudy(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st)
}

// Sees reports whether p may see a study: as a task of its owner, group
// and project would be seen.
func Sees(p *identity.Principal, st *model.Study) bool { return sees(p, st) }

func (s *Studies) view(ctx context.Context, st *model.Study) (*View, error) {
	trials, err := s.k.Store.ListStudyTrials(ctx, st.TenantID, st.ID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	v := &View{Study: st, Trials: rank(st.Spec.Direction, trials), Progress: progress(st.Spec.Direction, trials)}
	for _, tr := range trials {
		if tr.TaskID != "" && tr.TaskID == st.BestTaskID {
			v.Best = tr
		}
		if tr.TaskID == "" {
			continue
		}
		ps, err := s.k.Store.ListPlacements(ctx, st.TenantID, store.PlacementFilter{TaskID: tr.TaskID})
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		for _, pl := range ps {
			end := s.k.Now()
			if pl.EndedAt != nil {
				end = *pl.EndedAt
			}
			v.GPUHours += pl.Size.Float() * end.Sub(pl.StartedAt).Hours()
		}
	}
	if u, err := s.k.Store.GetUser(ctx, st.TenantID, st.OwnerID); err == nil {
		v.OwnerName = u.Name
	}
	if pr, err := s.k.Store.GetProject(ctx, st.TenantID, st.ProjectID); err == nil {
		v.ProjectName = pr.Name
	}
	if cr, err := s.k.Store.GetComputeResource(ctx, st.TenantID, st.ComputeResourceID); err == nil {
		v.ComputeResourceName = cr.Name
	}
	return v, nil
}

// rankGroup orders the kinds of trial in a ranking.
func rankGroup(tr *model.StudyTrial) int {
	switch {
	case tr.State == model.TrialCompleted && tr.Objective != nil:
		return 0
	case tr.State == model.TrialStoppedEarly:
		return 1
	case !tr.State.Final():
		return 2
	}
	return 3
}

// rank orders trials best first (View.Trials).
func rank(direction string, trials []*model.StudyTrial) []*model.StudyTrial {
	out := slices.Clone(trials)
	slices.SortStableFunc(out, func(a, b *model.StudyTrial) int {
		ga, gb := rankGroup(a), rankGroup(b)
		if ga != gb {
			return ga - gb
		}
		if ga == 1 && a.Rung != b.Rung {
			return b.Rung - a.Rung
		}
		if ga <= 1 && a.Objective != nil && b.Objective != nil && *a.Objective != *b.Objective {
			if isBetter(direction, *a.Objective, *b.Objective) {
				return -1
			}
			return 1
		}
		return a.Number - b.Number
	})
	return out
}

// progress is the best objective over time (View.Progress).
func progress(direction string, trials []*model.StudyTrial) []ProgressPoint {
	var done []*model.StudyTrial
	for _, tr := range trials {
		if tr.State == model.TrialCompleted && tr.Objective != nil && tr.EndedAt != nil {
			done = append(done, tr)
		}
	}
	slices.SortStableFunc(done, func(a, b *model.StudyTrial) int { return a.EndedAt.Compare(*b.EndedAt) })
	out := []ProgressPoint{}
	for _, tr := range done {
		if len(out) == 0 || isBetter(direction, *tr.Objective, out[len(out)-1].Best) {
			out = append(out, ProgressPoint{At: *tr.EndedAt, Best: *tr.Objective, Trial: tr.Number})
		} else {
			prev := out[len(out)-1]
			out = append(out, ProgressPoint{At: *tr.EndedAt, Best: prev.Best, Trial: prev.Trial})
		}
	}
	return out
}

// TaskTrial returns the study trial that made a task the caller sees,
// and its study; nil when no study made it.
func (s *Studies) TaskTrial(ctx context.Context, t *model.Task) (*model.Study, *model.StudyTrial, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	if t.TenantID != p.TenantID || !kernel.SeesTask(p, t) {
		return nil, nil, kernel.NotFound("no task %s", kernel.Quote(t.ID))
	}
	tr, err := s.k.Store.GetStudyTrialByTask(ctx, t.TenantID, t.ID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil
		}
		return nil, nil, s.k.Internal(ctx, err)
	}
	st, err := s.Study(ctx, tr.StudyID)
	if err != nil {
		return nil, nil, nil // a study the caller may not see is not shown
	}
	return st, tr, nil
}
