package pipelines

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// FinishedTrigger matches the schedules' pipeline.finished triggers: the
// runs of a pipeline (a name in a project) that ended, in one final state
// when the trigger names one, that the schedule's owner may see, read
// from the database so a trigger catches up after a restart. It
// implements schedules.TriggerSource structurally, so this domain does
// not import the schedules domain.
type FinishedTrigger struct{ k *kernel.Kernel }

// NewFinishedTrigger returns the pipeline.finished source, for the facade
// to register.
func NewFinishedTrigger(k *kernel.Kernel) FinishedTrigger { return FinishedTrigger{k: k} }

// Validate checks a pipeline.finished trigger as its creator: a pipeline
// name, a project they use (stored as its id), and a final state or none.
func (s FinishedTrigger) Validate(ctx context.Context, trig model.ScheduleTrigger) (model.ScheduleTrigger, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return trig, err
	}
	name, ref := strings.TrimSpace(trig.Pipeline), strings.TrimSpace(trig.ProjectID)
	if name == "" {
		return trig, kernel.Invalid("a pipeline.finished trigger needs a pipeline: the name of the pipeline whose runs fire it")
	}
	if ref == "" {
		return trig, kernel.Invalid("a pipeline.finished trigger needs a project: the schedule fires when a run of pipeline %s in it finishes", kernel.Quote(name))
	}
	state := model.PipelineRunState(strings.ToLower(strings.TrimSpace(trig.State)))
	if state != "" && (!state.Valid() || !state.Final()) {
		return trig, kernel.Invalid("pipeline run state %q: a pipeline.finished trigger waits for completed, failed or aborted (or leave it out for any)", trig.State)
	}
	pr, err := s.k.UsedProject(ctx, p, ref)
	if err != nil {
		return trig, err
	}
	return model.ScheduleTrigger{Event: trig.Event, ProjectID: pr.ID, Pipeline: name, State: string(state)}, nil
}

// Matches lists the runs of the trigger's pipeline that ended in
// (since, until] and that the owner in ctx may see (sees' rule, in the
// query), oldest first, keyed by the run's id.
func (s FinishedTrigger) Matches(ctx context.Context, tenantID string, trig model.ScheduleTrigger, since, until time.Time, limit int) ([]model.TriggerMatch, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.TenantID != tenantID || (p.ProjectID != "" && p.ProjectID != trig.ProjectID) {
		return nil, nil
	}
	f := store.PipelineRunFilter{ProjectID: trig.ProjectID, Name: trig.Pipeline}
	if trig.State != "" {
		f.States = []model.PipelineRunState{model.PipelineRunState(trig.State)}
	}
	if !p.IsAdmin() {
		f.RestrictToGroups, f.GroupIDs, f.VisibleToUserID = true, p.GroupIDs(), p.UserID
	}
	runs, err := s.k.Store.ListFinishedPipelineRuns(ctx, tenantID, f, since, until, limit)
	if err != nil {
		return nil, err
	}
	out := make([]model.TriggerMatch, 0, len(runs))
	for _, r := range runs {
		if r.FinishedAt != nil {
			out = append(out, model.TriggerMatch{Key: "pipeline_run:" + r.ID, At: *r.FinishedAt})
		}
	}
	return out, nil
}
