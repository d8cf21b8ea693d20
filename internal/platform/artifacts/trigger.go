package artifacts

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// PublishedTrigger matches the schedules' artifact.published triggers:
// the artifacts of a name published in a tenant (of one project when the
// trigger names one) that the schedule's owner may see, read from the
// database so a trigger catches up after a restart. It implements
// schedules.TriggerSource structurally, so this domain does not import
// the schedules domain.
type PublishedTrigger struct{ k *kernel.Kernel }

// NewPublishedTrigger returns the artifact.published source, for the
// facade to register.
func NewPublishedTrigger(k *kernel.Kernel) PublishedTrigger { return PublishedTrigger{k: k} }

// Validate checks an artifact.published trigger as its creator: a valid
// artifact name and, when given, a project they use (stored as its id).
func (s PublishedTrigger) Validate(ctx context.Context, trig model.ScheduleTrigger) (model.ScheduleTrigger, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return trig, err
	}
	name := strings.TrimSpace(trig.Artifact)
	if name == "" {
		return trig, kernel.Invalid("an artifact.published trigger needs an artifact name: the schedule fires when an artifact of that name is published")
	}
	if msg := model.ArtifactNameProblem(name); msg != "" {
		return trig, kernel.Invalid("the artifact.published trigger's artifact: %s", msg)
	}
	out := model.ScheduleTrigger{Event: trig.Event, Artifact: name}
	if ref := strings.TrimSpace(trig.ProjectID); ref != "" {
		pr, err := s.k.UsedProject(ctx, p, ref)
		if err != nil {
			return trig, err
		}
		out.ProjectID = pr.ID
	}
	return out, nil
}

// Matches lists the artifacts of the trigger's name published in
// (since, until] on runs the owner in ctx may see (kernel.SeesTask's
// rule, in the query), oldest first. The key is the artifact's id: a
// later publication of the name, even on the same run, is a new artifact
// and fires again.
func (s PublishedTrigger) Matches(ctx context.Context, tenantID string, trig model.ScheduleTrigger, since, until time.Time, limit int) ([]model.TriggerMatch, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.TenantID != tenantID {
		return nil, nil
	}
	f := store.PublishedArtifactFilter{Name: trig.Artifact, ProjectID: trig.ProjectID}
	if p.ProjectID != "" {
		if f.ProjectID != "" && f.ProjectID != p.ProjectID {
			return nil, nil
		}
		f.ProjectID = p.ProjectID
	}
	if !p.IsAdmin() {
		f.RestrictToGroups, f.GroupIDs, f.VisibleToUserID = true, p.GroupIDs(), p.UserID
	}
	list, err := s.k.Store.ListPublishedArtifacts(ctx, tenantID, f, since, until, limit)
	if err != nil {
		return nil, err
	}
	out := make([]model.TriggerMatch, 0, len(list))
	for _, a := range list {
		out = append(out, model.TriggerMatch{Key: "artifact:" + a.ID, At: a.CreatedAt})
	}
	return out, nil
}
