package live

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// ScheduleUpdate is a schedule after it changed (created, updated,
// paused, resumed, fired, skipped, refused, deleted). Schedule is nil for
// a deleted one; ScheduleID names it either way.
type ScheduleUpdate struct {
	Kind       string
	At         time.Time
	ScheduleID string
	Schedule   *model.Schedule
	Missed     int
}

// SubscribeSchedules follows the changes of the schedules the caller may
// see (the schedules domain's rule, checked per subscriber per update):
// what the dashboard's Schedules page reloads on. A deletion reaches the
// admins and whoever deleted it.
func (s *Live) SubscribeSchedules(ctx context.Context) (<-chan *ScheduleUpdate, error) {
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	r := s.subs.schedules.Join("schedules|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool { return e.TenantID == tenantID && e.ObjectKind == "schedule" },
		func(ctx context.Context, batch []events.Event) []*ScheduleUpdate {
			var out []*ScheduleUpdate
			for _, e := range batch {
				u := &ScheduleUpdate{Kind: e.Kind, At: e.At, ScheduleID: e.ObjectID}
				if e.Kind == "schedule.deleted" {
					// Gone: only who deleted it and the admins hear of it.
					u.Schedule = &model.Schedule{ID: e.ObjectID, TenantID: tenantID, Name: e.ObjectName, OwnerID: e.ActorID}
					out = append(out, u)
					continue
				}
				sc, err := s.reads.TenantSchedule(ctx, tenantID, e.ObjectID)
				if err != nil || sc == nil {
					continue
				}
				u.Schedule = sc
				out = append(out, u)
			}
			return out
		}, 0, nil))
	return pump(ctx, s, r, release, nil,
		func(p *identity.Principal, u *ScheduleUpdate) (*ScheduleUpdate, bool) {
			if !s.reads.SeesSchedule(p, u.Schedule) {
				return u, false
			}
			if u.Kind == "schedule.deleted" {
				c := *u
				c.Schedule = nil
				return &c, true
			}
			return u, true
		}), nil
}
